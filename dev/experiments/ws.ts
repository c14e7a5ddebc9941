/**
 * A warm start (src/train/warm-start.ts) with the given settings, then greedy evaluation on the 64
 * multi-hop test questions and 16 train questions x 8 samples at temperature 1 (dev/LOG.md, 2026-11-22, warm starts).
 */
import { parseArgs } from "node:util";
import { getTask } from "../../src/tasks/index.js";
import { warmStart } from "../../src/train/warm-start.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { localEngines } from "../../src/engine/local/factory.js";
import { playRows } from "../../src/train/evaluate.js";
import { required } from "./usage.js";

const USAGE =
  "node --import tsx dev/experiments/ws.ts --out DIR [--tok TOKENIZER_DIR] [--init MODEL_DIR] [--preset tiny] [--steps 200] [--quality 0.4] [--lr 3e-3] [--bs 16] [--train 384] [--copy 0]";
const { values: a } = parseArgs({
  options: {
    preset: { type: "string", default: "tiny" },
    steps: { type: "string", default: "200" },
    quality: { type: "string", default: "0.4" },
    lr: { type: "string", default: "3e-3" },
    bs: { type: "string", default: "16" },
    out: { type: "string" },
    tok: { type: "string" },
    train: { type: "string", default: "384" },
    copy: { type: "string", default: "0" },
    init: { type: "string" },
  },
});
const out = required(a.out, "--out", USAGE);
const task = getTask("multihop", { train: Number(a.train) });
let t0 = Date.now();
const secs = () => `${((Date.now() - t0) / 1000).toFixed(0)}s`;
const r = await warmStart({
  task,
  out,
  engines: localEngines(),
  preset: a.preset as "tiny",
  tokenizer: a.tok,
  quality: Number(a.quality),
  steps: Number(a.steps),
  batchSize: Number(a.bs),
  lr: Number(a.lr),
  seed: 0,
  copySteps: Number(a.copy),
  init: a.init,
  onCopyStep: (s) => {
    if (s.step % 25 === 0) console.log(`copy ${s.step} loss ${s.loss.toFixed(3)} ${secs()}`);
  },
  onStep: (s) => {
    if (s.step % 25 === 0)
      console.log(`step ${s.step} loss ${s.loss.toFixed(3)} lr ${s.lr.toExponential(2)} ${secs()}`);
  },
});
console.log(JSON.stringify(r), secs());
t0 = Date.now();
const engine = await LocalEngine.load(out);
const limits = { maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024, seed: 1 };
const test = await playRows(engine, engine.tokenizer, task, task.rows("test"), { greedy: true, ...limits });
console.log("test greedy", JSON.stringify(test.summary), secs());
const train = await playRows(engine, engine.tokenizer, task, task.rows("train").slice(0, 16), {
  n: 8,
  temperature: 1,
  ...limits,
});
console.log("train sampled 16x8", JSON.stringify(train.summary), secs());
await engine.dispose();
