/**
 * The off-policy masks in a real training step on a tiny random model, on each local backend:
 * one rollout whose sampler logprobs are far from the learner's is masked, so the update is the one
 * the batch without it gives; and in the trainer, the shares masked reach metrics.jsonl.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { Datum } from "../src/engine/types.js";
import { TrajectoryBuilder, type Trajectory } from "../src/agent/trajectory.js";
import { parseConfig } from "../src/train/load-config.js";
import { prepareBatch } from "../src/train/prepare-batch.js";
import { lossSpec, updatePolicy } from "../src/train/update.js";
import type { TrainConfig } from "../src/train/config.js";
import { Trainer } from "../src/train/trainer.js";
import { Rng } from "../src/util/rng.js";
import { ENGINES } from "./engine-internals.js";
import { toyTask } from "./fixtures/toy-task.js";
import { toyConfig, toyEngines } from "./fixtures/train-toy.js";
import { tempDir } from "./helpers.js";

const root = tempDir("agent-r1-offpolicy-");
const base = join(root, "tiny");
before(() => initModel({ preset: "tiny", out: base, seed: 0 }));
after(() => rmSync(root, { recursive: true, force: true }));

const CONTEXT = [1, 2, 3];
/** Two groups of two single-turn rollouts; y0's sampler is the far one. */
const ROLLOUTS = [
  { id: "x0", row: 0, sample: 0, action: [10, 11, 12], reward: 1 },
  { id: "x1", row: 0, sample: 1, action: [13, 14], reward: 0 },
  { id: "y0", row: 1, sample: 0, action: [15, 16, 17], reward: 1 },
  { id: "y1", row: 1, sample: 1, action: [18, 19], reward: 0 },
];
const FAR = 2; // y0: the batch's third trajectory, so its datum's sequence is 2
const sequences = () => ROLLOUTS.map((r) => [...CONTEXT, ...r.action]);
const score = (e: LocalEngine, seqs: number[][]) => e.computeLogprobs(seqs, { temperature: 1 });

/** The rollouts as the engine would have sampled them, except y0's logprobs 4 nats below the learner's (r = e⁴ ≈ 55). */
async function rollouts(e: LocalEngine): Promise<Trajectory[]> {
  const lps = await score(e, sequences());
  return ROLLOUTS.map((r, i) => {
    const own = lps[i].slice(CONTEXT.length) as number[];
    const b = new TrajectoryBuilder(r.id, r.row, r.sample);
    b.add(CONTEXT, {
      action: r.action,
      logprobs: i === FAR ? own.map((q) => q - 4) : own,
      stopReason: "stop",
      observation: [],
      reward: r.reward,
      done: true,
      toolCalls: [],
      info: {},
      timing: { sampleMs: 0, envMs: 0 },
    });
    return b.finish("done");
  });
}

/** The importance-sampling loss has no clip, so unmasked, y0's ratio of e⁴ would weigh its gradient (PPO would clip it). */
const config = (loss: Record<string, unknown>) =>
  parseConfig({
    algorithm: { estimator: "grpo" },
    loss: { type: "importance_sampling", ...loss },
    optim: { lr: 0.01 },
  });

/** One optimizer step on `datums` from the base weights; the learner's logprobs of the rollouts after it. */
async function trainedLogprobs(backend: (typeof ENGINES)[number], cfg: TrainConfig, datums: Datum[]) {
  const e = await LocalEngine.load(base, { workers: 0, backend });
  try {
    await updatePolicy(e, datums, {
      spec: lossSpec(cfg),
      optim: cfg.optim,
      schedule: { step: 0, totalSteps: 1 },
      epochs: 1,
      miniBatches: 1,
      rng: new Rng(0, 7),
    });
    return (await score(e, sequences())).flatMap((row) => row.slice(CONTEXT.length) as number[]);
  } finally {
    await e.dispose();
  }
}

const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

for (const backend of ENGINES) {
  test(`${backend}: a rollout whose sampler is far from the learner is masked and changes nothing`, async () => {
    const e = await LocalEngine.load(base, { workers: 0, backend });
    const prepare = async (cfg: TrainConfig) =>
      prepareBatch(await rollouts(e), cfg, { learnerLogprobs: (s) => score(e, s) }, 0);
    const maskedCfg = config({ offPolicy: { seqMask: [0.5, 2] } });
    const masked = await prepare(maskedCfg);
    const plain = await prepare(config({}));
    await e.dispose();
    // y0's geometric-mean ratio is e⁴; the others' are 1 to float rounding.
    assert.deepEqual(masked.offPolicy, { maskedTokens: 3 / 10, maskedSequences: 1 / 4 });
    const far = masked.datums.find((d) => d.sequence === FAR)!;
    assert.ok(far.weights.every((w) => w === 0));
    assert.ok(
      plain.datums.find((d) => d.sequence === FAR)!.advantages!.some((a) => a > 0),
      "y0 has an advantage to train on",
    );
    const withMask = await trainedLogprobs(backend, maskedCfg, masked.datums);
    const without = await trainedLogprobs(
      backend,
      maskedCfg,
      masked.datums.filter((d) => d.sequence !== FAR),
    );
    const unmasked = await trainedLogprobs(backend, maskedCfg, plain.datums);
    // Masked: the step the batch without y0 gives (to float rounding of a different batch shape).
    assert.ok(maxDiff(withMask, without) < 1e-5, `masked vs without y0: ${maxDiff(withMask, without)}`);
    // Unmasked, y0 trains: the step differs.
    assert.ok(maxDiff(unmasked, without) > 1e-3, `unmasked vs without y0: ${maxDiff(unmasked, without)}`);
  });
}

test("the trainer scores with the learner and writes the shares masked to metrics.jsonl", async () => {
  const out = tempDir();
  const cfg = toyConfig(1);
  // In process the sampler is the learner: every ratio is 1 to float rounding, so [1.5, 2] masks
  // every token (and every sequence), and the loss has nothing left.
  const t = await Trainer.open(
    {
      ...cfg,
      algorithm: { ...cfg.algorithm, filterConstantGroups: false }, // a batch even if every reward ties
      loss: { ...cfg.loss, offPolicy: { tokenMask: [1.5, 2] } },
    },
    { out, task: toyTask(), engines: toyEngines() },
  );
  await t.run();
  await t.close();
  const m = JSON.parse(readFileSync(join(out, "metrics.jsonl"), "utf8").trim()) as Record<string, number>;
  assert.equal(m.offpolicy_masked_tokens, 1);
  assert.equal(m.offpolicy_masked_seqs, 1);
  assert.equal(m.loss, 0);
  assert.equal(m.tis_weight, undefined, "no TIS measures without loss.tis");
});
