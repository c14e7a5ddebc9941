/**
 * Off-policy masks: drop the parts of a batch whose sampler disagrees too much with the learner.
 *
 * When the rollouts come from another engine (an inference server, a quantized copy) or from an
 * older policy, the learner scores each action token before its update, and r_t = exp(q_l − q_s)
 * compares the learner's logprob q_l with the sampler's q_s. Two masks read these ratios, each
 * with an inclusive range [lo, hi] (kept when lo ≤ r ≤ hi, masked otherwise; a NaN ratio is
 * always masked):
 *  - tokenMask: a token whose r_t is outside the range gets weight 0. This is the token mask of
 *    IcePop (introduced with Ring-1T by inclusionAI's Ling team, 2025, "Every Step Evolves"), which
 *    keeps the policy-gradient update to the tokens on which the training and the inference engine
 *    roughly agree.
 *  - seqMask: a sequence whose geometric-mean ratio exp(mean_t log r_t) is outside the range gets
 *    weight 0 on all its tokens. This is the "geometric" rejection of verl's rollout correction
 *    (Liu, Li et al. 2025, "When Speed Kills Stability"): a per-token average, so long and short
 *    responses are judged on the same scale, unlike the product of ratios.
 * A sequence is what the loss aggregation calls one (src/rl/aggregation.ts): the datums sharing a
 * `sequence` id, so a trajectory split across several datums is judged once on all its action
 * tokens; a datum without an id is a sequence by itself. Only positions with weight > 0 count
 * (prompt and observation targets, or a trajectory already masked as overlong, carry no ratio);
 * the mean is unweighted over them. Both masks are judged on the rollout's own weights, so a token
 * the token mask drops still counts in its sequence's mean, and they combine by multiplication.
 *
 * Where they act: on the datum weights, before the update. prepareBatch (src/train/prepare-batch.ts)
 * applies them with loss.offPolicy set, once the learner has scored the rollouts (one scoring shared
 * with loss.tis, which in the same pass weights the advantages, tis.ts). The weights are the loss
 * mask every engine honours (both local backends and the Tinker engine turn them into aggregation
 * coefficients), so a masked token has no gradient and also leaves the aggregation's denominators
 * (Σ w, the sequence count), as verl's rejection edits its response mask. The KL term of the loss
 * reads the same weights, so a masked token has none either.
 *
 * Departures: IcePop's mask M(k) keeps k = π_train/π_infer as a weight on the kept tokens and
 * anchors its PPO ratio on the learner's old logprobs; here a mask only zeroes weights and leaves the
 * anchor and the advantages alone. Together with `loss.tis` (cap ≥ hi) a token's loss is scaled by
 * k on [lo, hi] and 0 outside, anchored on the learner: IcePop's objective. verl's rejection takes a
 * lower bound of 1/hi when none is given; here both ends are always given.
 */
import type { Datum } from "../engine/types.js";
import { sequenceKeys } from "./aggregation.js";

/** An inclusive range [lo, hi] of learner/sampler probability ratios. */
export type RatioRange = readonly [lo: number, hi: number];

export interface OffPolicyMasks {
  /** Mask a whole sequence whose geometric-mean ratio is outside the range. */
  seqMask?: RatioRange;
  /** Mask a token whose ratio is outside the range. */
  tokenMask?: RatioRange;
}

export interface OffPolicyMaskMetrics {
  /** Share of the action tokens (weight > 0) the masks set to weight 0. */
  maskedTokens: number;
  /** Share of the sequences with an action token that the masks left with none. */
  maskedSequences: number;
}

/** Whether r lies in [lo, hi], ends included (never for NaN). */
export const inRatioRange = (r: number, [lo, hi]: RatioRange): boolean => r >= lo && r <= hi;

/** Per datum, per position: log r = q_l − q_s where the weight is positive, else undefined. */
function logRatios(datums: readonly Datum[], learner: readonly (readonly number[])[]): (number | undefined)[][] {
  return datums.map((d, j) =>
    d.weights.map((w, t) => {
      if (!(w > 0)) return undefined;
      if (!d.logprobs) throw new Error("internal: off-policy masks need the sampler's logprobs on every datum");
      return learner[j][t] - d.logprobs[t];
    }),
  );
}

/** Per sequence key: its geometric-mean ratio exp(mean log r) over its action tokens (absent when it has none). */
export function sequenceGeoMeans(
  datums: readonly Datum[],
  learner: readonly (readonly number[])[],
): Map<string, number> {
  const keys = sequenceKeys(datums);
  const sums = new Map<string, { sum: number; n: number }>();
  logRatios(datums, learner).forEach((row, j) => {
    for (const x of row) {
      if (x === undefined) continue;
      const s = sums.get(keys[j]) ?? { sum: 0, n: 0 };
      sums.set(keys[j], { sum: s.sum + x, n: s.n + 1 });
    }
  });
  return new Map([...sums].map(([k, s]) => [k, Math.exp(s.sum / s.n)]));
}

/** The keys of the sequences whose geometric-mean ratio lies in `range`. */
function sequencesInRange(
  datums: readonly Datum[],
  learner: readonly (readonly number[])[],
  range: RatioRange,
): Set<string> {
  const geo = sequenceGeoMeans(datums, learner);
  return new Set([...geo].filter(([, r]) => inRatioRange(r, range)).map(([k]) => k));
}

/**
 * Per datum, per position: 1 where the token keeps its weight, 0 where a mask drops it (positions
 * without weight keep theirs, 0); and the shares masked. `learner[j][t]` scores datum j's target t.
 */
export function offPolicyKeep(
  datums: readonly Datum[],
  learner: readonly (readonly number[])[],
  masks: OffPolicyMasks,
): { keep: number[][]; metrics: OffPolicyMaskMetrics } {
  const keys = sequenceKeys(datums);
  const keptSequences = masks.seqMask ? sequencesInRange(datums, learner, masks.seqMask) : undefined;
  const keep = logRatios(datums, learner).map((row, j) => {
    const seqKept = !keptSequences || keptSequences.has(keys[j]);
    return row.map((x) => {
      if (x === undefined) return 1;
      const tokenKept = !masks.tokenMask || inRatioRange(Math.exp(x), masks.tokenMask);
      return seqKept && tokenKept ? 1 : 0;
    });
  });
  return { keep, metrics: maskedShares(datums, keep, keys) };
}

/** The shares of action tokens and of sequences with an action token that `keep` drops. */
function maskedShares(datums: readonly Datum[], keep: number[][], keys: string[]): OffPolicyMaskMetrics {
  let tokens = 0,
    dropped = 0;
  const kept = new Map<string, boolean>(); // per sequence with an action token: whether one survives
  datums.forEach((d, j) =>
    d.weights.forEach((w, t) => {
      if (!(w > 0)) return;
      tokens++;
      if (keep[j][t] === 0) dropped++;
      kept.set(keys[j], (kept.get(keys[j]) ?? false) || keep[j][t] === 1);
    }),
  );
  const sequences = kept.size;
  const emptied = [...kept.values()].filter((k) => !k).length;
  return { maskedTokens: tokens ? dropped / tokens : 0, maskedSequences: sequences ? emptied / sequences : 0 };
}

/** The datums with their weights multiplied by `keep` (everything else as it was). */
export function withKeptWeights(datums: readonly Datum[], keep: readonly (readonly number[])[]): Datum[] {
  return datums.map((d, j) => ({ ...d, weights: d.weights.map((w, t) => w * keep[j][t]) }));
}

/** Both steps at once: the masked datums and the shares masked. */
export function applyOffPolicyMasks(
  datums: readonly Datum[],
  learner: readonly (readonly number[])[],
  masks: OffPolicyMasks,
): { datums: Datum[]; metrics: OffPolicyMaskMetrics } {
  const { keep, metrics } = offPolicyKeep(datums, learner, masks);
  return { datums: withKeptWeights(datums, keep), metrics };
}
