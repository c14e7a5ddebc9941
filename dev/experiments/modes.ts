/**
 * Where a base model's exact matches come from: greedy and sampled episodes on a multi-hop split,
 * with EM by question type and by the number of tool calls (docs/main-job.md, the base's figures).
 */
import { getTask } from "../../src/tasks/index.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { playRows } from "../../src/train/evaluate.js";
import { required } from "./usage.js";

const USAGE = "node --import tsx dev/experiments/modes.ts MODEL_DIR [split: test] [samples per row: 4]";
const [dirArg, split = "test", nArg = "4"] = process.argv.slice(2);
const dir = required(dirArg, "MODEL_DIR", USAGE);
const task = getTask("multihop");
const engine = await LocalEngine.load(dir);
const rows = task.rows(split as "test");
const limits = { maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, seed: 1 };

type Tally = Map<string, { n: number; em: number }>;
const add = (t: Tally, key: string, em: number) => {
  const e = t.get(key) ?? { n: 0, em: 0 };
  e.n++;
  e.em += em;
  t.set(key, e);
};
const show = (t: Tally) =>
  [...t.entries()]
    .sort()
    .map(([k, v]) => `${k} ${((100 * v.em) / v.n).toFixed(0)}% (${v.n})`)
    .join(" | ");

for (const mode of [
  { greedy: true, n: 1 },
  { temperature: 1, n: Number(nArg) },
]) {
  const t0 = Date.now();
  const res = await playRows(engine, engine.tokenizer, task, rows, { ...limits, ...mode });
  const byType: Tally = new Map(),
    byCalls: Tally = new Map();
  res.result.trajectories.forEach((t, i) => {
    add(byType, String(rows[t.rowIndex].extra_info.type), res.scores[i].em);
    add(byCalls, `${t.metrics.toolCalls} calls`, res.scores[i].em);
  });
  const s = res.summary;
  const label = "greedy" in mode ? "greedy" : `sampled x${mode.n}`;
  console.log(
    `${label}: EM ${(100 * s.em).toFixed(1)}% format ${s.format.toFixed(2)} tool calls ${s.toolCalls.toFixed(2)} tokens ${s.responseTokens.toFixed(0)} (${((Date.now() - t0) / 1000).toFixed(0)} s)`,
  );
  console.log("  by type:", show(byType));
  console.log("  by calls:", show(byCalls));
}
await engine.dispose();
