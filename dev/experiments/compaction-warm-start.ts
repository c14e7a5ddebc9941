/**
 * A warm start for trained compaction (docs/compaction.md): the long-horizon expert
 * (src/tasks/multihop/compaction-expert.ts) plays long-horizon questions of other worlds through
 * the real compaction flow with the model's own tokenizer, and the model learns its episodes by
 * SFT: every action, the summaries included, exactly as a rollout would hold it (trajectoryDatums).
 *
 *   node --import tsx dev/experiments/compaction-warm-start.ts --init assets/base/multihop --out runs/base-compaction \
 *     [--worlds 16] [--questions 64] [--hops 3-8] [--steps 600] [--batch 8] [--lr 3e-4] [--at 700] [--keep-last 1] [--max-tokens-per-turn 96] [--held-out 16]
 *     [--hops-over both|cities|companies] [--summary-style earliest|ledger] [--first-world 0]
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { hermesFormat } from "../../src/agent/formats/hermes.js";
import { rollout } from "../../src/agent/rollout.js";
import { COMPACTION_DEFAULTS } from "../../src/agent/compaction-options.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { OPTIMIZER_FILE, STATE_FILE } from "../../src/engine/local/trainable-io.js";
import { trajectoryDatums } from "../../src/rl/datums.js";
import { createMultihopTask } from "../../src/tasks/multihop/index.js";
import { longHorizonReply, SUMMARY_STYLES, type SummaryStyle } from "../../src/tasks/multihop/compaction-expert.js";
import type { HopsOver } from "../../src/tasks/multihop/long-horizon.js";
import type { TaskRow } from "../../src/tasks/types.js";
import { ScriptedEngine } from "../../src/testing/index.js";
import { meanCrossEntropy, trainSft } from "../../src/train/sft.js";
import { required, usage } from "./usage.js";

const USAGE = "node --import tsx dev/experiments/compaction-warm-start.ts --init MODEL_DIR --out DIR [flags]";
const { values: a } = parseArgs({
  options: {
    init: { type: "string" },
    out: { type: "string" },
    worlds: { type: "string", default: "16" },
    // The first world's index (seed 5000 + index): a continued warm start takes worlds it has not seen.
    "first-world": { type: "string", default: "0" },
    questions: { type: "string", default: "64" },
    hops: { type: "string", default: "3-8" },
    steps: { type: "string", default: "600" },
    batch: { type: "string", default: "8" },
    lr: { type: "string", default: "3e-4" },
    at: { type: "string", default: "700" },
    "keep-last": { type: "string", default: "1" },
    "max-total-tokens": { type: "string", default: "1024" },
    "max-tokens-per-turn": { type: "string", default: "96" },
    // Val and test questions per world: unused, but they size the world's held-out entities, and each
    // held-out split must still draw its questions (`hops` entities with different founding years).
    "held-out": { type: "string", default: "16" },
    // What the questions list (the task option hopsOver).
    "hops-over": { type: "string", default: "both" },
    // How the expert's summaries read (src/tasks/multihop/compaction-expert.ts).
    "summary-style": { type: "string", default: "earliest" },
  },
});
const init = required(a.init, "--init", USAGE);
const out = required(a.out, "--out", USAGE);
const [lo, hi] = a.hops.split("-").map(Number);
const heldOut = Number(a["held-out"]);
const hopsOver = a["hops-over"] as HopsOver; // createMultihopTask checks it
const style = a["summary-style"] as SummaryStyle;
if (!SUMMARY_STYLES.includes(style))
  usage(USAGE, `--summary-style: '${style}' is not one of ${SUMMARY_STYLES.join(", ")}`);
const compaction = { atTokens: Number(a.at), keepLast: Number(a["keep-last"]), prompt: COMPACTION_DEFAULTS.prompt };

const engine = await LocalEngine.load(init);
const tok = engine.tokenizer;
const eot = tok.decode([tok.eosTokenId!]);
/** The context ends with the flow's summary request (the ChatML layout of the project's templates). */
const asks = (text: string) => text.endsWith(`${compaction.prompt}${eot}\n<|im_start|>assistant\n`);
const expert = new ScriptedEngine(tok, (c) => {
  return (
    longHorizonReply(
      c.text,
      asks(c.text),
      (query) => hermesFormat.write({ name: "search", arguments: { query } }),
      style,
    ) + eot
  );
});

const datums = [];
let episodes = 0,
  solved = 0,
  summaries = 0,
  longestSummary = 0;
const started = Date.now();
const firstWorld = Number(a["first-world"]);
for (let w = firstWorld; w < firstWorld + Number(a.worlds); w++) {
  const hops = lo + (w % (hi - lo + 1));
  const task = createMultihopTask({
    hops,
    hopsOver,
    seed: 5000 + w,
    train: Number(a.questions),
    val: heldOut,
    test: heldOut,
  });
  const rows = task.rows("train");
  const res = await rollout(expert, (r: TaskRow) => task.makeEnv(r), rows, {
    maxTurns: 40,
    maxTokensPerTurn: Number(a["max-tokens-per-turn"]),
    maxTotalTokens: Number(a["max-total-tokens"]),
    tokenizer: tok,
    compaction,
  });
  for (const t of res.trajectories) {
    episodes++;
    if (t.reward >= 1) solved++;
    const sums = t.steps.filter((s) => s.info.flowTurn === "compaction");
    summaries += sums.length;
    for (const s of sums) longestSummary = Math.max(longestSummary, s.action.length);
    if (t.reward >= 1) datums.push(...trajectoryDatums(t).datums);
  }
}
console.log(
  `demonstrations: ${episodes} episodes (hops ${lo}-${hi}), ${solved} solved, ${summaries} summaries, ${datums.length} datums, longest summary ${longestSummary} tokens, ${((Date.now() - started) / 1000).toFixed(0)} s`,
);
if (solved === 0) throw new Error("the expert solved no episode: check the context limits");
const probe = datums.slice(0, 64);
const before = await meanCrossEntropy(engine, probe);
await trainSft(engine, datums, {
  steps: Number(a.steps),
  batchSize: Number(a.batch),
  lr: Number(a.lr),
  seed: 0,
  onStep: (s) => {
    if (s.step % 50 === 0 || s.step === Number(a.steps))
      console.log(`sft ${s.step}/${a.steps} loss ${s.loss.toFixed(3)}`);
  },
});
const after = await meanCrossEntropy(engine, probe);
mkdirSync(out, { recursive: true });
await engine.save(out);
for (const f of [OPTIMIZER_FILE, STATE_FILE]) rmSync(join(out, f), { force: true }); // a base, not a checkpoint
console.log(
  `wrote ${out}: cross-entropy ${before.toFixed(3)} -> ${after.toFixed(3)}, ${((Date.now() - started) / 60000).toFixed(1)} min`,
);
await engine.dispose();
