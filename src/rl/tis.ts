/**
 * Truncated importance sampling (TIS) for a sampler that is not the learner (an inference server,
 * a quantized or differently batched copy): the rollouts' logprobs q_s come from the sampler, the
 * learner scores the same tokens at q_l before its update, and each action token's policy-gradient
 * term is weighted by w = min(exp(q_l − q_s), cap), a constant (no gradient through it). The
 * learner's q_l then anchors the PPO/IS ratio in place of q_s. This is the correction of Yao et
 * al. (2025, "Your efficient RL framework secretly brings you off-policy RL training") as verl and
 * SkyRL apply it per token. Since w ≥ 0, scaling the advantage by w scales each token's loss by w
 * for every policy loss here.
 *
 * Also measured, over the action tokens: how far the two disagree (mean |q_l − q_s| and the k3 KL
 * of the sampler from the learner), the mean weight, and the share of tokens the cap truncated.
 */
import type { Datum } from "../engine/types.js";
import { klValue } from "./kl.js";

export interface TisMetrics {
  /** Mean |q_l − q_s| over action tokens. */
  drift: number;
  /** Mean k3 estimate of KL(sampler ‖ learner) over action tokens. */
  kl: number;
  meanWeight: number;
  cappedFraction: number;
}

/** Datums re-anchored on the learner's logprobs with TIS-weighted advantages; `learner[j][t]` scores datum j's target t. */
export function applyTis(datums: Datum[], learner: number[][], cap: number): { datums: Datum[]; metrics: TisMetrics } {
  if (!(cap > 0)) throw new Error(`internal: TIS cap must be positive, got ${cap}`);
  let n = 0,
    drift = 0,
    kl = 0,
    weight = 0,
    capped = 0;
  const out = datums.map((d, j) => {
    const ql = learner[j];
    const advantages = d.targetTokens.map((_, t) => {
      const a = d.advantages?.[t] ?? 0;
      if (!(d.weights[t] > 0)) return a;
      const qs = d.logprobs![t];
      const ratio = Math.exp(ql[t] - qs);
      const w = Math.min(ratio, cap);
      n++;
      drift += Math.abs(ql[t] - qs);
      kl += klValue(qs, ql[t], "k3"); // exp(q_l − q_s) − (q_l − q_s) − 1, on tokens the sampler drew
      weight += w;
      if (ratio > cap) capped++;
      return w * a;
    });
    return { ...d, advantages, logprobs: ql.slice() };
  });
  const m = Math.max(1, n);
  return {
    datums: out,
    metrics: { drift: drift / m, kl: kl / m, meanWeight: n ? weight / m : 1, cappedFraction: capped / m },
  };
}
