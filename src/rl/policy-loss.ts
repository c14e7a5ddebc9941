/**
 * Policy losses per token, in plain numbers: the definition the engines'
 * tensor code implements (and is tested against), and the source of the
 * clip fraction forwardBackward reports.
 *
 * Notation: p learner logprob, q sampling logprob, A advantage, r = exp(p − q).
 *  - cross_entropy:        l = −p
 *  - importance_sampling:  l = −r·A
 *  - ppo (dual clip):      l = max(−r·A, −clip(r, 1 − clipLow, 1 + clipHigh)·A); if A < 0, l = min(l, −A·c)
 *    with log r clamped to ±20 before exp, as verl and Agent-R1 do.
 *  - cispo:                l = −sg(clip(r, 1 − clipLow, 1 + clipHigh))·p·A (MiniMax-M1's CISPO, as Tinker
 *    defines it: the clipped ratio is a constant weight, so every token keeps a gradient −clip(r)·A;
 *    default bounds [0, 4], Tinker's tutorial values)
 *  - dro:                  l = −(p·A − ½·β·(p − q)²) (Tinker's `dro`, β default 0.05)
 *  - gspo:                 PPO's clipped objective on the datum's sequence-level ratio
 *    s = exp(mean over its weighted tokens of (p − q)) (GSPO, Zheng et al. 2025), per token as
 *    GSPO-token: s_k = sg(s)·exp(p_k − sg(p_k)), whose value is s and whose derivative in p_k is s,
 *    so l_k = max(−s·A_k, −clip(s, 1 − clipLow, 1 + clipHigh)·A_k) (dual clip as PPO) and, unclipped,
 *    dl_k/dp_k = −A_k·s. With the seq-mean-token-mean aggregation this is GSPO's sequence gradient.
 *    The mean log-ratio is clamped to ±10 (StepPO), and the sequence is one datum: with one datum per
 *    agent step (prompts rebuilt from state) it is the step's action, as StepPO's ratio is. Default
 *    clips 3e-4 / 4e-4 (GSPO's; StepPO's ALFWorld script uses the same).
 * A KL term to the reference (kl.ts) is added as coef·kl per token; the batch
 * reduction is aggregation.ts.
 */
import type { LossSpec } from "../engine/types.js";
import { klGrad, klValue } from "./kl.js";

/** |log r| and |ref − p| are clamped to this before exp (verl, Agent-R1). */
export const LOG_RATIO_CLAMP = 20;
/** GSPO's mean log-ratio of a sequence is clamped to this before exp (StepPO). */
export const SEQ_LOG_RATIO_CLAMP = 10;

/** GSPO's default clip range (the paper's and StepPO's ALFWorld script's). */
export const GSPO_CLIP = { low: 3e-4, high: 4e-4 };

/** A loss spec with every default filled in. */
export function resolvedLoss(spec: LossSpec) {
  const cispo = spec.type === "cispo",
    gspo = spec.type === "gspo";
  return {
    type: spec.type,
    clipLow: spec.clipLow ?? (cispo ? 1 : gspo ? GSPO_CLIP.low : 0.2),
    clipHigh: spec.clipHigh ?? (cispo ? 3 : gspo ? GSPO_CLIP.high : 0.2),
    dualClip: spec.dualClip ?? 3,
    beta: spec.beta ?? 0.05,
    kl: spec.kl && spec.kl.coef !== 0 ? { coef: spec.kl.coef, form: spec.kl.form ?? "k3" } : undefined,
    aggregation: spec.aggregation ?? "token-mean",
    normalizer: spec.normalizer,
    temperature: spec.temperature ?? 1,
  };
}
export type ResolvedLoss = ReturnType<typeof resolvedLoss>;

/**
 * GSPO's sequence log-ratio: the mean of p − q over the datum's weighted tokens (0 when it has
 * none). `p(t)` is the learner's logprob at position t.
 */
export function sequenceLogRatio(
  p: (t: number) => number,
  q: readonly number[] | undefined,
  weights: readonly number[],
): number {
  let sum = 0,
    n = 0;
  weights.forEach((w, t) => {
    if (w <= 0) return;
    sum += p(t) - (q?.[t] ?? 0);
    n++;
  });
  return n > 0 ? sum / n : 0;
}

/** The ratio a token's clipped objective sees, and its derivative in the token's own p. */
function ratioOf(
  loss: ResolvedLoss,
  p: number,
  q: number,
  seqLogRatio: number | undefined,
): { r: number; drdp: number } {
  if (loss.type === "gspo") {
    const lr = seqLogRatio ?? p - q;
    const r = Math.exp(Math.max(-SEQ_LOG_RATIO_CLAMP, Math.min(SEQ_LOG_RATIO_CLAMP, lr)));
    return { r, drdp: Math.abs(lr) <= SEQ_LOG_RATIO_CLAMP ? r : 0 };
  }
  const lr = p - q;
  const r = Math.exp(Math.max(-LOG_RATIO_CLAMP, Math.min(LOG_RATIO_CLAMP, lr)));
  return { r, drdp: Math.abs(lr) <= LOG_RATIO_CLAMP ? r : 0 };
}

/**
 * The policy part of the per-token loss (no KL), and whether PPO, GSPO or CISPO clipped the ratio.
 * GSPO needs the datum's `seqLogRatio` (sequenceLogRatio); without it a token is its own sequence.
 */
export function policyTokenLoss(
  loss: ResolvedLoss,
  p: number,
  q: number,
  a: number,
  seqLogRatio?: number,
): { loss: number; clipped: boolean } {
  if (loss.type === "cross_entropy") return { loss: -p, clipped: false };
  if (loss.type === "dro") return { loss: -(p * a - 0.5 * loss.beta * (p - q) ** 2), clipped: false };
  const { r } = ratioOf(loss, p, q, seqLogRatio);
  if (loss.type === "importance_sampling") return { loss: -r * a, clipped: false };
  if (loss.type === "cispo") {
    const w = Math.max(1 - loss.clipLow, Math.min(1 + loss.clipHigh, r));
    return { loss: -w * p * a, clipped: w !== r };
  }
  const unclipped = -a * r;
  const clipped = -a * Math.max(1 - loss.clipLow, Math.min(1 + loss.clipHigh, r));
  let l = Math.max(unclipped, clipped);
  let wasClipped = clipped > unclipped;
  if (loss.dualClip > 0 && a < 0 && l > -a * loss.dualClip) {
    l = -a * loss.dualClip;
    wasClipped = true;
  }
  return { loss: l, clipped: wasClipped };
}

/**
 * The whole per-token loss l(p) (policy part plus coef·KL to `ref`) and its derivative in p, the
 * learner logprob: where an engine's backward starts (the native engine; the TF.js engine gets
 * the same numbers from autodiff). At a clip boundary the derivative is the one TF.js's
 * gradients take: clip bounds are inclusive, and max / min pass the gradient to their first
 * argument on a tie.
 */
export function tokenLossGrad(
  loss: ResolvedLoss,
  p: number,
  q: number,
  a: number,
  ref: number,
  seqLogRatio?: number,
): { loss: number; grad: number } {
  let l: number, g: number;
  if (loss.type === "cross_entropy") [l, g] = [-p, -1];
  else if (loss.type === "dro") [l, g] = [-(p * a - 0.5 * loss.beta * (p - q) ** 2), -(a - loss.beta * (p - q))];
  else {
    const { r, drdp } = ratioOf(loss, p, q, seqLogRatio);
    const lo = 1 - loss.clipLow,
      hi = 1 + loss.clipHigh;
    const w = Math.max(lo, Math.min(hi, r));
    if (loss.type === "importance_sampling") [l, g] = [-r * a, -a * drdp];
    else if (loss.type === "cispo") [l, g] = [-w * p * a, -w * a];
    else {
      const unclipped = -a * r,
        clipped = -a * w;
      const dldr = unclipped >= clipped ? -a : r >= lo && r <= hi ? -a : 0;
      l = Math.max(unclipped, clipped);
      g = dldr * drdp;
      if (loss.dualClip > 0 && a < 0) {
        const cap = -a * loss.dualClip;
        if (l > cap) [l, g] = [cap, 0];
      }
    }
  }
  if (loss.kl) {
    l += loss.kl.coef * klValue(p, ref, loss.kl.form);
    g += loss.kl.coef * klGrad(p, ref, loss.kl.form);
  }
  return { loss: l, grad: g };
}
