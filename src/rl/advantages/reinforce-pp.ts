/**
 * REINFORCE++ (Hu 2025) and its group-baseline variant, as in Agent-R1/verl.
 *
 * REINFORCE++: per action token, the discounted reward-to-go
 *   G_t = Σ_k γ^k r_{t+k}   (over the trajectory's action tokens),
 * whitened over every action token of the batch (verl masked_whiten:
 * (G − μ)/sqrt(var + 1e-8), unbiased var). The paper's per-token KL penalty
 * belongs in r (kl.ts, applyKlToRewards) before this is called.
 *
 * REINFORCE++-baseline: s − μ_group per trajectory (μ = 0 for a group of one,
 * as verl/StepPO), broadcast to its action tokens, then the same batch
 * whitening over action tokens (so long trajectories weigh more in μ and σ).
 *
 * Departure from verl/Agent-R1 legacy: there the running return is reset to 0
 * at every non-action token, so a reward never flows back across a tool
 * output (verl PR #6376); in StepPO each step is its own row and returns stop
 * at the step boundary. Here the sum runs over the action-token timeline of
 * the whole trajectory (across its datums, skipping the masked positions), so
 * the outcome reaches earlier turns.
 */
import { groupMembers, mean, type GroupKey } from "../groups.js";
import { whitenBatch } from "../whiten.js";
import { backwardOverActions, broadcast, fullMask, ownTrajectories, type Rows } from "./input.js";
import type { RowLayout } from "./gae.js";

/** G_t over each trajectory's action tokens, across its datums; 0 off the mask. */
export function maskedReturns(rewards: Rows, mask: Rows, trajectory: readonly number[], gamma: number): number[][] {
  const out = mask.map((row) => row.map(() => 0));
  let g = 0;
  backwardOverActions(
    mask,
    trajectory,
    () => (g = 0),
    (d, i) => {
      g = rewards[d][i] + gamma * g;
      out[d][i] = g;
    },
  );
  return out;
}

export function discountedReturns(rewards: readonly number[], gamma: number): number[] {
  return maskedReturns([rewards], fullMask([rewards]), [0], gamma)[0];
}

/** rewards[d][i]: datum (or trajectory) d, position i. `returns` are the G_t before whitening. */
export function reinforcePlusPlus(
  rewards: Rows,
  gamma: number,
  layout: RowLayout = {},
): { advantages: number[][]; returns: number[][] } {
  const mask = layout.mask ?? fullMask(rewards);
  const returns = maskedReturns(rewards, mask, layout.trajectory ?? ownTrajectories(rewards), gamma);
  return { advantages: whitenBatch(returns, { masks: mask }), returns };
}

/** scores[j] in groups[j]; trajectory j's action tokens are where `mask` is 1 in its datums. Per-position advantages. */
export function reinforcePlusPlusBaseline(
  scores: readonly number[],
  groups: readonly GroupKey[],
  mask: Rows,
  trajectory: readonly number[] = ownTrajectories(mask),
): number[][] {
  const centered = new Array<number>(scores.length);
  for (const members of groupMembers(groups).values()) {
    const mu = members.length > 1 ? mean(members.map((i) => scores[i])) : 0;
    for (const i of members) centered[i] = scores[i] - mu;
  }
  return whitenBatch(broadcast(centered, mask, trajectory), { masks: mask });
}
