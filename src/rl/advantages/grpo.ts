/**
 * GRPO (Shao et al. 2024, DeepSeekMath) outcome advantages, as Agent-R1
 * computes them: one scalar score s per trajectory, grouped by prompt,
 *   A = (s − μ_group) / (σ_group + ε),  σ unbiased (torch.std), ε = 1e-6,
 * broadcast by the caller to every action token of the trajectory.
 * Dr. GRPO (Liu et al. 2025) drops the division: A = s − μ_group
 * (Agent-R1's norm_adv_by_std_in_grpo=False).
 *
 * Departure from the papers, kept from Agent-R1: a group of one uses μ = 0,
 * σ = 1, so its advantage is s/(1 + ε) (Dr. GRPO: s), not 0. A group whose
 * scores are all equal gets 0 (drop it with filters.ts to save the compute).
 */
import { groupMembers, type GroupKey } from "../groups.js";
import { moments } from "../whiten.js";

export interface GrpoOptions {
  /** Default 1e-6. */
  epsilon?: number;
  /** Divide by the group std. Default true; false is Dr. GRPO. */
  normalizeByStd?: boolean;
}

/** One advantage per trajectory; scores[i] belongs to groups[i]. */
export function grpoAdvantages(
  scores: readonly number[],
  groups: readonly GroupKey[],
  opts: GrpoOptions = {},
): number[] {
  const eps = opts.epsilon ?? 1e-6;
  const byStd = opts.normalizeByStd ?? true;
  const out = new Array<number>(scores.length);
  for (const members of groupMembers(groups).values()) {
    const m =
      members.length === 1
        ? { mean: 0, variance: 1 }
        : moments(
            members.map((i) => scores[i]),
            true,
          );
    const std = Math.sqrt(m.variance);
    for (const i of members) out[i] = byStd ? (scores[i] - m.mean) / (std + eps) : scores[i] - m.mean;
  }
  return out;
}

export function drGrpoAdvantages(scores: readonly number[], groups: readonly GroupKey[]): number[] {
  return grpoAdvantages(scores, groups, { normalizeByStd: false });
}
