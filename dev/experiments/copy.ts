/**
 * The copying curriculum alone (src/train/copy-curriculum.ts) on a fresh preset model, logging the
 * copy loss every 100 steps: the copying-curriculum figures of dev/LOG.md (2026-11-22).
 */
import { parseArgs } from "node:util";
import { getTask } from "../../src/tasks/index.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { initModel } from "../../src/model/init-model.js";
import { copyDatums, corpusWords } from "../../src/train/copy-curriculum.js";
import { trainSft } from "../../src/train/sft.js";
import { required } from "./usage.js";

const USAGE =
  "node --import tsx dev/experiments/copy.ts --tok TOKENIZER_DIR --out DIR [--preset tiny] [--steps 3000] [--lr 1e-2] [--bs 32] [--max 12] [--warm 50]";
const { values: a } = parseArgs({
  options: {
    preset: { type: "string", default: "tiny" },
    steps: { type: "string", default: "3000" },
    lr: { type: "string", default: "1e-2" },
    bs: { type: "string", default: "32" },
    out: { type: "string" },
    tok: { type: "string" },
    max: { type: "string", default: "12" },
    warm: { type: "string", default: "50" },
  },
});
const tok = required(a.tok, "--tok", USAGE);
const out = required(a.out, "--out", USAGE);

const task = getTask("multihop", { train: 4096, val: 0, test: 0 });
const texts: string[] = [];
for (const demo of task.demonstrations(task.rows("train"), { seed: 0, quality: 1 }))
  for (const m of demo) texts.push(m.content);
const words = corpusWords(texts);
console.log("words", words.length);
const init = await initModel({ preset: a.preset as "tiny", out: out + "-init", tokenizer: tok, seed: 0 });
const engine = await LocalEngine.load(init.dir);
const copies = copyDatums(engine.tokenizer, words, { count: 20000, minWords: 3, maxWords: Number(a.max), seed: 0 });
const t0 = Date.now();
let acc = 0;
await trainSft(engine, copies, {
  steps: Number(a.steps),
  batchSize: Number(a.bs),
  lr: Number(a.lr),
  warmupSteps: Number(a.warm),
  seed: 0,
  onStep: (s) => {
    acc += s.loss;
    if (s.step % 100 !== 0) return;
    console.log(`copy ${s.step} loss ${(acc / 100).toFixed(3)} ${((Date.now() - t0) / 1000).toFixed(0)}s`);
    acc = 0;
  },
});
await engine.save(out);
await engine.dispose();
