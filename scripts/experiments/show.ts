/** Session experiment (issue 6 warm start), kept so docs/main-job.md figures can be reproduced. */
import { getTask } from "../../src/tasks/index.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { playRows } from "../../src/train/evaluate.js";
import { decodeTrajectory } from "../../src/agent/trajectory-view.js";
const task = getTask("multihop");
const engine = await LocalEngine.load(process.argv[2]);
const split = (process.argv[3] ?? "test") as "test";
const rows = task.rows(split).slice(0, 6);
const res = await playRows(engine, engine.tokenizer, task, rows, { greedy: true, maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, seed: 1 });
for (const t of res.result.trajectories) {
  const d = decodeTrajectory(t, engine.tokenizer) as any;
  console.log("Q:", rows[t.rowIndex].prompt[1].content, "| gold:", rows[t.rowIndex].reward_model.ground_truth);
  for (const s of d.steps) console.log("  A:", JSON.stringify(s.action).slice(0, 200), "\n  O:", JSON.stringify(s.observation ?? "").slice(0, 160));
}
await engine.dispose();
