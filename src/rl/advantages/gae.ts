/**
 * Generalized Advantage Estimation (Schulman et al. 2016), in the two forms
 * Agent-R1 uses.
 *
 * Token GAE (Agent-R1 legacy; StepPO `token_gae`): the recursion runs over the
 * action tokens of a trajectory only, across all its steps, so tool-output
 * tokens neither advance time nor get credit:
 *   δ_t = r_t + γ·V_{t+1} − V_t   (V after the last action token = 0)
 *   A_t = δ_t + γλ·A_{t+1},  R_t = A_t + V_t
 * then A is whitened over every action token of the batch with verl's
 * masked_whiten: (A − μ)/sqrt(var + 1e-8), unbiased var. R uses A before whitening.
 *
 * Step GAE (Agent-R1 main / StepPO "gae"): one MDP step per LLM call.
 *   r_t = Σ token rewards of step t, V_t = value before the step's first token,
 *   same recursion with V_T = 0, R_t = A_t + V_t,
 * A whitened over all steps of the batch as (A − μ)/(σ + 1e-8), σ unbiased
 * (torch.std), then each step's A is broadcast to its tokens.
 *
 * Departures: the paper's GAE bootstraps from V(s_T) of a truncated episode;
 * here, as in Agent-R1, every trajectory ends with value 0, truncated or not.
 * Whitening can be turned off (Agent-R1 always whitens). A single-step batch
 * whitens to 0 where torch.std would give NaN (see whiten.ts).
 */
import { whiten, whitenBatch } from "../whiten.js";

export interface GaeOptions {
  gamma: number;
  lambda: number;
  /** Default true. */
  whiten?: boolean;
}

export interface GaeResult {
  /** Same shape as the rewards given. */
  advantages: number[][];
  returns: number[][];
}

/** The backward recursion over one sequence; rewards and values have equal length. */
export function gaeSequence(rewards: readonly number[], values: readonly number[], gamma: number, lambda: number): { advantages: number[]; returns: number[] } {
  const n = rewards.length;
  const advantages = new Array<number>(n);
  let next = 0; // A_{t+1}
  for (let t = n - 1; t >= 0; t--) {
    const nextValue = t + 1 < n ? values[t + 1] : 0;
    const delta = rewards[t] + gamma * nextValue - values[t];
    next = delta + gamma * lambda * next;
    advantages[t] = next;
  }
  return { advantages, returns: advantages.map((a, t) => a + values[t]) };
}

/** rewards[i][t], values[i][t]: trajectory i, action token t. */
export function tokenGae(rewards: readonly (readonly number[])[], values: readonly (readonly number[])[], opts: GaeOptions): GaeResult {
  const per = rewards.map((r, i) => gaeSequence(r, values[i], opts.gamma, opts.lambda));
  const raw = per.map((p) => p.advantages);
  return {
    advantages: opts.whiten ?? true ? whitenBatch(raw) : raw,
    returns: per.map((p) => p.returns),
  };
}

/** stepRewards[i][k], stepValues[i][k]: trajectory i, step k. Results are per step. */
export function stepGae(stepRewards: readonly (readonly number[])[], stepValues: readonly (readonly number[])[], opts: GaeOptions): GaeResult {
  const per = stepRewards.map((r, i) => gaeSequence(r, stepValues[i], opts.gamma, opts.lambda));
  const returns = per.map((p) => p.returns);
  if (!(opts.whiten ?? true)) return { advantages: per.map((p) => p.advantages), returns };
  const flat = whiten(per.flatMap((p) => p.advantages), { epsOn: "std", eps: 1e-8 });
  let k = 0;
  return { advantages: per.map((p) => p.advantages.map(() => flat[k++])), returns };
}
