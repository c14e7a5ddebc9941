/**
 * How well a model knows the tokens that decide each step of a task's expert demonstrations:
 * teacher-forced logprobs of the demonstrations (quality 1), then per action the loss of its worst
 * token. A low mean loss per token can hide a high loss on the one or two tokens that pick the
 * place or object; the household figures of dev/LOG.md (2026-11-27) come from this script.
 *
 *   node --import tsx dev/experiments/deciding-tokens.ts --model assets/base/household [--task household]
 *     [--split val] [--rows 24]
 */
import { parseArgs } from "node:util";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { getTask } from "../../src/tasks/index.js";
import type { Split } from "../../src/tasks/types.js";
import { sftDatums } from "../../src/train/sft.js";
import { required } from "./usage.js";

const USAGE =
  "node --import tsx dev/experiments/deciding-tokens.ts --model DIR [--task household] [--split val] [--rows 24]";
const { values: a } = parseArgs({
  options: {
    model: { type: "string" },
    task: { type: "string", default: "household" },
    split: { type: "string", default: "val" },
    rows: { type: "string", default: "24" },
  },
});
const engine = await LocalEngine.load(required(a.model, "--model", USAGE));
const task = getTask(a.task, { val: 64, test: 64 });
const rows = task.rows(a.split as Split).slice(0, Number(a.rows));
const datums = sftDatums(task, rows, engine.tokenizer, { seed: 1, quality: 1 });
const lps = await engine.computeLogprobs(datums.map((d) => [...d.tokens, d.targetTokens[d.targetTokens.length - 1]]));
let tokens = 0,
  sum = 0,
  sure = 0;
const worst: number[] = [];
datums.forEach((d, k) => {
  let max = 0;
  d.weights.forEach((w, i) => {
    if (w <= 0) return;
    const loss = -(lps[k][i + 1] ?? 0);
    [sum, tokens, max] = [sum + loss, tokens + 1, Math.max(max, loss)];
  });
  worst.push(max);
  if (max < Math.LN2) sure++;
});
worst.sort((x, y) => x - y);
const at = (q: number) => worst[Math.min(worst.length - 1, Math.floor(worst.length * q))].toFixed(2);
console.log(
  JSON.stringify({
    model: a.model,
    task: a.task,
    split: a.split,
    actions: worst.length,
    meanTokenLoss: Number((sum / tokens).toFixed(4)),
    everyTokenAboveHalf: Number((sure / worst.length).toFixed(3)),
    worstTokenLossMedian: Number(at(0.5)),
    worstTokenLossP90: Number(at(0.9)),
  }),
);
await engine.dispose();
