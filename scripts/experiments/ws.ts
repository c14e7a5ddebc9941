/** Session experiment (issue 6 warm start), kept so docs/main-job.md figures can be reproduced. */
import { parseArgs } from "node:util";
import { getTask } from "../../src/tasks/index.js";
import { warmStart } from "../../src/train/warm-start.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { playRows } from "../../src/train/evaluate.js";
const { values: a } = parseArgs({ options: { preset: { type: "string", default: "tiny" }, steps: { type: "string", default: "200" }, quality: { type: "string", default: "0.4" }, lr: { type: "string", default: "3e-3" }, bs: { type: "string", default: "16" }, out: { type: "string", default: "/tmp/mj/base" }, tok: { type: "string" }, train: { type: "string", default: "384" }, copy: { type: "string", default: "0" }, init: { type: "string" } } });
const task = getTask("multihop", { train: Number(a.train) });
let t0 = Date.now();
const r = await warmStart({ task, out: a.out!, preset: a.preset as "tiny", tokenizer: a.tok, quality: Number(a.quality), steps: Number(a.steps), batchSize: Number(a.bs), lr: Number(a.lr), seed: 0, copySteps: Number(a.copy), init: a.init,
  onCopyStep: (s) => { if (s.step % 25 === 0) console.log(`copy ${s.step} loss ${s.loss.toFixed(3)} ${((Date.now() - t0) / 1000).toFixed(0)}s`); },
  onStep: (s) => { if (s.step % 25 === 0) console.log(`step ${s.step} loss ${s.loss.toFixed(3)} lr ${s.lr.toExponential(2)} ${((Date.now() - t0) / 1000).toFixed(0)}s`); } });
console.log(JSON.stringify(r), `${((Date.now() - t0) / 1000).toFixed(0)}s`);
t0 = Date.now();
const engine = await LocalEngine.load(a.out!);
const res = await playRows(engine, engine.tokenizer, task, task.rows("test"), { greedy: true, maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, seed: 1 });
console.log("test greedy", JSON.stringify(res.summary), `${((Date.now() - t0) / 1000).toFixed(0)}s`);
const res2 = await playRows(engine, engine.tokenizer, task, task.rows("train").slice(0, 16), { n: 8, temperature: 1, maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, seed: 1 });
console.log("train sampled 16x8", JSON.stringify(res2.summary), `${((Date.now() - t0) / 1000).toFixed(0)}s`);
await engine.dispose();
