/**
 * Plain REINFORCE (Williams 1992) with an outcome score: every action token
 * of a trajectory gets A = s. Default: no baseline, the textbook estimator.
 * Option "batch-mean": A = s − mean of the scores in the batch, a constant
 * baseline that lowers variance without bias (up to the O(1/N) coupling from
 * including s itself in the mean).
 *
 * Departure: Agent-R1 has no REINFORCE advantage estimator (main's
 * "reinforce" is a policy-loss type fed by another estimator's advantages);
 * this is the textbook form, for the REINFORCE row of its experiments.
 */
import { mean } from "../groups.js";

export type ReinforceBaseline = "none" | "batch-mean";

export function reinforceAdvantages(scores: readonly number[], baseline: ReinforceBaseline = "none"): number[] {
  const b = baseline === "batch-mean" ? mean(scores) : 0;
  return scores.map((s) => s - b);
}
