/**
 * The metrics of a forwardBackward call, from the learner's logprobs at the
 * weighted tokens: PPO clip fraction, k3 KL from the sampler to the learner,
 * KL to the reference, mean entropy. Plain numbers, shared by every engine.
 */
import type { Datum, ForwardBackwardResult } from "../engine/types.js";
import { klValue } from "./kl.js";
import { policyTokenLoss, sequenceLogRatio, type ResolvedLoss } from "./policy-loss.js";

/** `lossSum` and `entropySum` (over weighted tokens) come from the engine's pass. */
export function summarizeForwardBackward(
  datums: Datum[],
  loss: ResolvedLoss,
  logprobs: number[][],
  lossSum: number,
  entropySum: number,
): ForwardBackwardResult {
  let n = 0,
    clipped = 0,
    approxKl = 0,
    klRef = 0;
  datums.forEach((d, i) => {
    const seq = loss.type === "gspo" ? sequenceLogRatio((t) => logprobs[i][t], d.logprobs, d.weights) : undefined;
    d.weights.forEach((w, t) => {
      if (w <= 0) return;
      n++;
      const p = logprobs[i][t];
      if (d.logprobs) {
        clipped += policyTokenLoss(loss, p, d.logprobs[t], d.advantages?.[t] ?? 0, seq).clipped ? 1 : 0;
        approxKl += klValue(p, d.logprobs[t], "k3");
      }
      if (d.refLogprobs) klRef += klValue(p, d.refLogprobs[t], loss.kl?.form ?? "k3");
    });
  });
  const denom = Math.max(1, n);
  const metrics: ForwardBackwardResult["metrics"] = { loss: lossSum, tokens: n, entropy: entropySum / denom };
  if (loss.type === "ppo" || loss.type === "cispo" || loss.type === "gspo") metrics.clipFraction = clipped / denom;
  if (datums[0].logprobs) metrics.approxKl = approxKl / denom;
  if (datums[0].refLogprobs) metrics.klRef = klRef / denom;
  return { logprobs, metrics };
}
