/**
 * RLOO (Ahmadian et al. 2024; Kool et al. 2019): each trajectory's baseline is
 * the mean score of the other trajectories of its group,
 *   A_i = s_i − (Σ_{j≠i} s_j)/(n − 1) = n/(n − 1)·(s_i − μ_group),
 * one scalar per trajectory, broadcast by the caller to its action tokens.
 *
 * Departure from Agent-R1/verl: a group of one has no "others"; verl and
 * StepPO then leave the raw score as the advantage, here it is 0 (no baseline
 * means no relative signal, and a raw score would not be on the same scale
 * as the other groups' centered advantages).
 */
import { groupMembers, mean, type GroupKey } from "../groups.js";

export function rlooAdvantages(scores: readonly number[], groups: readonly GroupKey[]): number[] {
  const out = new Array<number>(scores.length);
  for (const members of groupMembers(groups).values()) {
    const n = members.length;
    const mu = mean(members.map((i) => scores[i]));
    for (const i of members) out[i] = n > 1 ? (n / (n - 1)) * (scores[i] - mu) : 0;
  }
  return out;
}
