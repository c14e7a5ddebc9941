/**
 * Our datums and loss specs as Tinker's. Tinker's losses are per-token and summed, with no mask
 * input (masking is a zero advantage), so every aggregation mode is realized by scaling the
 * per-token inputs by the aggregation coefficients c of the whole call (src/rl/aggregation.ts):
 *   cross_entropy            weights    = c            (−Σ w·p = Σ c·l)
 *   importance_sampling      advantages = c·A          (−Σ r·(cA) = Σ c·l)
 *   ppo, cispo               advantages = c·A, clip thresholds 1 − clipLow and 1 + clipHigh (absolute)
 *   dro                      advantages = A, only where that is the same loss: aggregation sum and every
 *                            token weighted (its ½·β·(p − q)² penalty takes neither a scale nor a mask)
 * Since c ≥ 0, scaling A by c scales each token's PPO/CISPO loss by c exactly. What Tinker lacks is
 * refused with one line saying what to use instead: the KL term of the loss, PPO's dual clip, a
 * temperature other than 1, and GSPO (its ratio is a whole sequence's; Tinker's losses see one token).
 */
import type { Datum, LossSpec } from "../types.js";
import { aggregationCoefficients } from "../../rl/aggregation.js";
import { resolvedLoss } from "../../rl/policy-loss.js";
import { InputError } from "../../util/errors.js";
import type { WireDatum } from "./tinker-codec.js";

export interface TinkerLoss {
  lossFn: string;
  lossFnConfig?: Record<string, number>;
  data: WireDatum[];
}

export function tinkerLoss(datums: Datum[], spec: LossSpec): TinkerLoss {
  const loss = resolvedLoss(spec);
  if (loss.kl)
    throw new InputError(
      "the tinker engine cannot add a KL term to the loss (Tinker's losses have none)",
      "put the KL in the reward instead: algorithm.kl.inReward=true",
    );
  if (loss.type === "gspo")
    throw new InputError(
      "the tinker engine cannot run gspo: its clipped ratio is a whole sequence's, and Tinker's losses are per token",
      "use ppo (loss.dualClip=0) or cispo on a tinker engine",
    );
  if (loss.type === "ppo" && loss.dualClip > 0)
    throw new InputError(
      "the tinker engine cannot use PPO's dual clip (Tinker's ppo has none)",
      "set loss.dualClip=0 (or use cispo)",
    );
  if (loss.temperature !== 1)
    throw new InputError(
      `the tinker engine trains at temperature 1, but the loss asks for ${loss.temperature}`,
      "sample at temperature 1 (rollout.temperature=1) so the learner's logprobs match the sampler's",
    );
  const coef = aggregationCoefficients(datums, loss.aggregation, loss.normalizer);
  if (loss.type === "dro") {
    const exact = loss.aggregation === "sum" && datums.every((d) => d.weights.every((w) => w === 1));
    if (!exact)
      throw new InputError(
        "the tinker engine can run dro only with aggregation sum on datums whose every token is weighted (Tinker's dro has no mask or scale for its penalty)",
        "use cispo or ppo, or loss.aggregation=sum on single-turn data",
      );
  }
  const f32 = (data: number[]) => ({ data, dtype: "float32" as const });
  const data: WireDatum[] = datums.map((d, i) => {
    const inputs: WireDatum["inputs"] = { target_tokens: { data: d.targetTokens, dtype: "int64" } };
    const c = coef[i];
    if (loss.type === "cross_entropy") inputs.weights = f32(c);
    else {
      const a = d.advantages ?? d.targetTokens.map(() => 0);
      inputs.advantages = f32(loss.type === "dro" ? a.slice() : a.map((x, t) => c[t] * x));
      inputs.logprobs = f32(d.logprobs ?? d.targetTokens.map(() => 0));
    }
    return { tokens: d.tokens, inputs };
  });
  const clip = { clip_low_threshold: 1 - loss.clipLow, clip_high_threshold: 1 + loss.clipHigh };
  const lossFnConfig =
    loss.type === "ppo" || loss.type === "cispo" ? clip : loss.type === "dro" ? { beta: loss.beta } : undefined;
  return { lossFn: loss.type, ...(lossFnConfig ? { lossFnConfig } : {}), data };
}

/** Splits datums into chunks of at most `maxLen` datums and about `maxBytes` bytes (the SDK's limits). */
export function chunkDatums(data: WireDatum[], maxLen: number, maxBytes: number): WireDatum[][] {
  const chunks: WireDatum[][] = [];
  let cur: WireDatum[] = [],
    bytes = 0;
  for (const d of data) {
    const size = 4 * d.tokens.length + Object.values(d.inputs).reduce((s, t) => s + 8 * t.data.length, 0);
    if (cur.length > 0 && (cur.length >= maxLen || bytes + size > maxBytes)) {
      chunks.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(d);
    bytes += size;
  }
  if (cur.length) chunks.push(cur);
  return chunks;
}
