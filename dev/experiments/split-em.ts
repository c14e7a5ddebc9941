/**
 * Greedy EM of a model on the first N rows of a multi-hop split, by question type, in the world the
 * warm start trained on (train size 8192 by default), to tell copying from recall.
 */
import { getTask } from "../../src/tasks/index.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { playRows } from "../../src/train/evaluate.js";
import { required } from "./usage.js";

const USAGE = "node --import tsx dev/experiments/split-em.ts MODEL_DIR [split: train] [N: 64] [train size: 8192]";
const [dirArg, split = "train", nArg = "64", trainArg = "8192"] = process.argv.slice(2);
const dir = required(dirArg, "MODEL_DIR", USAGE);
const task = getTask("multihop", { train: Number(trainArg) });
const engine = await LocalEngine.load(dir);
const rows = task.rows(split as "test").slice(0, Number(nArg));
const res = await playRows(engine, engine.tokenizer, task, rows, {
  maxTurns: 5,
  maxTokensPerTurn: 96,
  maxTotalTokens: 1024,
  seed: 1,
  greedy: true,
  n: 1,
});
const byType = new Map<string, [number, number]>();
res.result.trajectories.forEach((t, i) => {
  const k = String(rows[t.rowIndex].extra_info.type),
    e = byType.get(k) ?? [0, 0];
  byType.set(k, [e[0] + 1, e[1] + res.scores[i].em]);
});
const s = res.summary;
console.log(
  `${split} x${rows.length} greedy: EM ${(100 * s.em).toFixed(1)}% tool calls ${s.toolCalls.toFixed(2)} tokens ${s.responseTokens.toFixed(0)}`,
);
console.log(
  "  by type:",
  [...byType]
    .sort()
    .map(([k, [n, em]]) => `${k} ${((100 * em) / n).toFixed(0)}% (${n})`)
    .join(" | "),
);
await engine.dispose();
