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
 * the whole trajectory, so the outcome reaches earlier turns.
 */
import { groupMembers, mean, type GroupKey } from "../groups.js";
import { whitenBatch } from "../whiten.js";
import { broadcast } from "./input.js";

export function discountedReturns(rewards: readonly number[], gamma: number): number[] {
  const out = new Array<number>(rewards.length);
  let g = 0;
  for (let t = rewards.length - 1; t >= 0; t--) {
    g = rewards[t] + gamma * g;
    out[t] = g;
  }
  return out;
}

/** rewards[i][t]: trajectory i, action token t. `returns` are the G_t before whitening. */
export function reinforcePlusPlus(rewards: readonly (readonly number[])[], gamma: number): { advantages: number[][]; returns: number[][] } {
  const returns = rewards.map((r) => discountedReturns(r, gamma));
  return { advantages: whitenBatch(returns), returns };
}

/** scores[i] in groups[i], with lengths[i] action tokens; per-token advantages. */
export function reinforcePlusPlusBaseline(scores: readonly number[], groups: readonly GroupKey[], lengths: readonly number[]): number[][] {
  const centered = new Array<number>(scores.length);
  for (const members of groupMembers(groups).values()) {
    const mu = members.length > 1 ? mean(members.map((i) => scores[i])) : 0;
    for (const i of members) centered[i] = scores[i] - mu;
  }
  return whitenBatch(centered.map((a, i) => broadcast([a], [lengths[i]])));
}
