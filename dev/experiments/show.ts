/** The first six episodes of a model on a multi-hop split, greedy, action and observation per step: to read what the model copies. */
import { getTask } from "../../src/tasks/index.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { playRows } from "../../src/train/evaluate.js";
import { decodeTrajectory } from "../../src/agent/trajectory-view.js";
import { required } from "./usage.js";

const USAGE = "node --import tsx dev/experiments/show.ts MODEL_DIR [split: test]";
const dir = required(process.argv[2], "MODEL_DIR", USAGE);
const split = (process.argv[3] ?? "test") as "test";
const task = getTask("multihop");
const engine = await LocalEngine.load(dir);
const rows = task.rows(split).slice(0, 6);
const res = await playRows(engine, engine.tokenizer, task, rows, {
  greedy: true,
  maxTurns: 5,
  maxTokensPerTurn: 96,
  maxTotalTokens: 1024,
  seed: 1,
});
for (const t of res.result.trajectories) {
  const row = rows[t.rowIndex];
  console.log("Q:", row.prompt[1].content, "| gold:", row.reward_model.ground_truth);
  for (const s of decodeTrajectory(t, engine.tokenizer).steps) {
    console.log(
      "  A:",
      JSON.stringify(s.action).slice(0, 200),
      "\n  O:",
      JSON.stringify(s.observation ?? "").slice(0, 160),
    );
  }
}
await engine.dispose();
