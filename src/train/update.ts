/**
 * The update stage: PPO epochs over the batch, each split into mini-batches
 * of whole sequences (a trajectory's datums stay together, so the seq-mean
 * aggregations count it once); one forwardBackward + optimStep per mini-batch (the engine packs each
 * mini-batch into memory-bounded micro-batches itself). Then the critic, the
 * same way, when there is one.
 */
import type { Critic, Datum, Engine, LossSpec, ValueDatum } from "../engine/types.js";
import { Rng } from "../util/rng.js";
import type { TrainConfig } from "./config.js";
import { learningRate } from "./lr-schedule.js";
import { GSPO_CLIP } from "../rl/policy-loss.js";

/** What one policy update needs besides the engine and the datums. */
export interface PolicyUpdate {
  /** The loss, built once when the trainer opens (lossSpec), with this iteration's KL coefficient. */
  spec: LossSpec;
  /** AdamW's settings and the learning-rate schedule (the recipe's `optim`). */
  optim: TrainConfig["optim"];
  /** Optimizer steps taken before this update, and the run's planned total (the schedule's horizon). */
  schedule: { step: number; totalSteps: number };
  /** Passes over the batch and mini-batches per pass (the recipe's train.ppoEpochs, train.miniBatches). */
  epochs: number;
  miniBatches: number;
  /** Orders the mini-batches. */
  rng: Rng;
}

export interface UpdateResult {
  loss: number;
  /** Absent when the engine does not report entropy. */
  entropy?: number;
  clipFraction?: number;
  approxKl?: number;
  klRef?: number;
  gradNorm: number;
  skippedSteps: number;
  steps: number;
  lr: number;
  valueLoss?: number;
}

function miniBatches<T>(items: T[], count: number, rng: Rng): T[][] {
  const order = items.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  const k = Math.min(count, items.length);
  return Array.from({ length: k }, (_, b) => order.filter((_, i) => i % k === b).map((i) => items[i]));
}

/** Datums grouped by `sequence` (in first-seen order; a datum without one alone): a mini-batch takes a split trajectory whole. */
function sequences(datums: Datum[]): Datum[][] {
  const bySeq = new Map<number, Datum[]>();
  const out: Datum[][] = [];
  for (const d of datums) {
    const group = d.sequence === undefined ? undefined : bySeq.get(d.sequence);
    if (group) group.push(d);
    else {
      out.push([d]);
      if (d.sequence !== undefined) bySeq.set(d.sequence, out[out.length - 1]);
    }
  }
  return out;
}

/** The recipe's loss; `klCoef` (default the recipe's algorithm.kl.coef) weighs the KL term when it is in the loss. */
export function lossSpec(cfg: TrainConfig, klCoef = cfg.algorithm.kl.coef): LossSpec {
  const l = cfg.loss,
    kl = cfg.algorithm.kl;
  return {
    type: l.type,
    clipLow: l.clipLow ?? (l.type === "cispo" ? 1 : l.type === "gspo" ? GSPO_CLIP.low : 0.2),
    clipHigh: l.clipHigh ?? (l.type === "cispo" ? 3 : l.type === "gspo" ? GSPO_CLIP.high : 0.28),
    beta: l.beta,
    dualClip: l.dualClip,
    aggregation: l.aggregation,
    normalizer: l.normalizer,
    temperature: cfg.rollout.temperature > 0 ? cfg.rollout.temperature : 1,
    kl: kl.inReward || klCoef === 0 ? undefined : { coef: klCoef, form: kl.form },
  };
}

/** The KL coefficient of a loss spec set to `coef` (no KL term stays none). */
export function withKlCoef(spec: LossSpec, coef: number): LossSpec {
  return spec.kl ? { ...spec, kl: { ...spec.kl, coef } } : spec;
}

/**
 * `epochs` passes over the datums in `miniBatches` mini-batches of whole sequences, one
 * forwardBackward and optimStep each. A mini-batch whose gradients are not finite leaves the
 * weights as they were (the engine skips the step); it is counted in `skippedSteps` and its
 * (non-finite) loss and statistics are left out of the means.
 */
export async function updatePolicy(engine: Engine, datums: Datum[], u: PolicyUpdate): Promise<UpdateResult> {
  const { spec, optim, rng } = u;
  let step = u.schedule.step;
  const acc = { loss: 0, entropy: 0, noEntropy: false, clip: 0, approxKl: 0, klRef: 0, gradNorm: 0, skipped: 0, n: 0 };
  let lr = learningRate(optim, step, u.schedule.totalSteps);
  for (let epoch = 0; epoch < u.epochs; epoch++) {
    for (const mb of miniBatches(sequences(datums), u.miniBatches, rng).map((seqs) => seqs.flat())) {
      if (mb.every((d) => d.weights.every((w) => w === 0))) continue;
      lr = learningRate(optim, step, u.schedule.totalSteps);
      const fb = await engine.forwardBackward(mb, spec);
      const os = await engine.optimStep({
        lr,
        beta1: optim.beta1,
        beta2: optim.beta2,
        weightDecay: optim.weightDecay,
        gradClipNorm: optim.gradClipNorm,
      });
      if (os.skipped) {
        acc.skipped++;
        continue;
      }
      step++;
      acc.n++;
      acc.loss += fb.metrics.loss;
      if (fb.metrics.entropy === undefined) acc.noEntropy = true;
      else acc.entropy += fb.metrics.entropy;
      acc.clip += fb.metrics.clipFraction ?? 0;
      acc.approxKl += fb.metrics.approxKl ?? 0;
      acc.klRef += fb.metrics.klRef ?? 0;
      acc.gradNorm += os.gradNorm;
    }
  }
  const n = Math.max(1, acc.n);
  return {
    loss: acc.loss / n,
    entropy: acc.noEntropy ? undefined : acc.entropy / n,
    clipFraction: spec.type === "ppo" || spec.type === "cispo" || spec.type === "gspo" ? acc.clip / n : undefined,
    approxKl: acc.approxKl / n,
    klRef: spec.kl ? acc.klRef / n : undefined,
    gradNorm: acc.gradNorm / n,
    skippedSteps: acc.skipped,
    steps: acc.n,
    lr,
  };
}

export async function updateCritic(
  critic: Critic,
  datums: ValueDatum[],
  cfg: TrainConfig,
  seed: number,
): Promise<number | undefined> {
  if (datums.length === 0) return undefined;
  const rng = new Rng(seed, 11);
  let loss = 0,
    n = 0;
  for (let epoch = 0; epoch < cfg.train.ppoEpochs; epoch++) {
    for (const mb of miniBatches(datums, cfg.train.miniBatches, rng)) {
      const fb = await critic.forwardBackward(mb, { clip: cfg.critic.valueClip });
      await critic.optimStep({ lr: cfg.critic.lr, gradClipNorm: cfg.optim.gradClipNorm });
      loss += fb.metrics.loss;
      n++;
    }
  }
  return loss / Math.max(1, n);
}
