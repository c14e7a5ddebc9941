/**
 * Generalized Advantage Estimation (Schulman et al. 2016), in the two forms
 * Agent-R1 uses. Inputs are on datum positions with the action mask (input.ts).
 *
 * Token GAE (Agent-R1 legacy; StepPO `token_gae`): the recursion runs over the
 * action tokens of a trajectory only, across all its steps and datums, so
 * tool-output tokens neither advance time nor get credit (verl's
 * compute_gae_advantage_return skips them the same way, by the mask):
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
 * whitens to 0 where torch.std would give NaN (see whiten.ts). A step that
 * generated no token (the agent loop never records one) has no position, so
 * step GAE does not see it.
 */
import { whiten, whitenBatch } from "../whiten.js";
import { backwardOverActions, fullMask, ownTrajectories, type Rows } from "./input.js";

export interface GaeOptions {
  gamma: number;
  lambda: number;
  /** Default true. */
  whiten?: boolean;
}

/** Where the rows sit: the action mask and each row's trajectory. Default: every position an action token, each row its own trajectory. */
export interface RowLayout {
  mask?: Rows;
  trajectory?: readonly number[];
}

export interface GaeResult {
  /** Shaped like the rewards given; 0 off the mask. */
  advantages: number[][];
  returns: number[][];
}

const zeros = (rows: Rows) => rows.map((row) => row.map(() => 0));

/** The backward recursion over each trajectory's action tokens, without whitening. */
export function maskedGae(
  rewards: Rows,
  values: Rows,
  mask: Rows,
  trajectory: readonly number[],
  gamma: number,
  lambda: number,
): GaeResult {
  const advantages = zeros(mask),
    returns = zeros(mask);
  let nextValue = 0,
    next = 0; // V_{t+1}, A_{t+1}
  backwardOverActions(
    mask,
    trajectory,
    () => (nextValue = next = 0),
    (d, i) => {
      const delta = rewards[d][i] + gamma * nextValue - values[d][i];
      next = delta + gamma * lambda * next;
      advantages[d][i] = next;
      returns[d][i] = next + values[d][i];
      nextValue = values[d][i];
    },
  );
  return { advantages, returns };
}

/** The recursion over one sequence of action tokens; rewards and values have equal length. */
export function gaeSequence(
  rewards: readonly number[],
  values: readonly number[],
  gamma: number,
  lambda: number,
): { advantages: number[]; returns: number[] } {
  const r = maskedGae([rewards], [values], fullMask([rewards]), [0], gamma, lambda);
  return { advantages: r.advantages[0], returns: r.returns[0] };
}

/** rewards[d][i], values[d][i]: datum (or trajectory) d, position i. */
export function tokenGae(rewards: Rows, values: Rows, opts: GaeOptions & RowLayout): GaeResult {
  const mask = opts.mask ?? fullMask(rewards);
  const raw = maskedGae(rewards, values, mask, opts.trajectory ?? ownTrajectories(rewards), opts.gamma, opts.lambda);
  return {
    advantages: (opts.whiten ?? true) ? whitenBatch(raw.advantages, { masks: mask }) : raw.advantages,
    returns: raw.returns,
  };
}

/** stepRewards[j][k], stepValues[j][k]: trajectory j, step k. Results are per step. */
export function stepGae(stepRewards: Rows, stepValues: Rows, opts: GaeOptions): GaeResult {
  const per = stepRewards.map((r, i) => gaeSequence(r, stepValues[i], opts.gamma, opts.lambda));
  const returns = per.map((p) => p.returns);
  if (!(opts.whiten ?? true)) return { advantages: per.map((p) => p.advantages), returns };
  const flat = whiten(
    per.flatMap((p) => p.advantages),
    { epsOn: "std", eps: 1e-8 },
  );
  let k = 0;
  return { advantages: per.map((p) => p.advantages.map(() => flat[k++])), returns };
}

export interface StepRows {
  rewards: Rows;
  values: Rows;
  /** The step of the action token at each position, −1 off the action tokens. */
  steps: Rows;
  trajectory: readonly number[];
  /** Number of trajectories. */
  count: number;
}

/**
 * Step GAE on datum positions: each step's reward is the sum of its token
 * rewards, its value the critic's value at its first action token; each
 * action token gets its step's advantage, and the return sits on the step's
 * first action token (`returnMask` 1 there).
 */
export function stepGaeOnDatums(rows: StepRows, opts: GaeOptions): GaeResult & { returnMask: number[][] } {
  const { rewards, values, steps, trajectory } = rows;
  // Per trajectory: its steps in order, by step id; their rewards, values and first positions.
  const index = Array.from({ length: rows.count }, () => new Map<number, number>());
  const stepRewards: number[][] = index.map(() => []),
    stepValues: number[][] = index.map(() => []);
  const first: [number, number][][] = index.map(() => []);
  steps.forEach((row, d) =>
    row.forEach((k, i) => {
      if (k < 0) return;
      const j = trajectory[d];
      let s = index[j].get(k);
      if (s === undefined) {
        index[j].set(k, (s = index[j].size));
        stepRewards[j].push(0);
        stepValues[j].push(values[d][i]);
        first[j].push([d, i]);
      }
      stepRewards[j][s] += rewards[d][i];
    }),
  );
  const out = stepGae(stepRewards, stepValues, opts);
  const advantages = steps.map((row, d) =>
    row.map((k) => (k >= 0 ? out.advantages[trajectory[d]][index[trajectory[d]].get(k)!] : 0)),
  );
  const returns = zeros(steps),
    returnMask = zeros(steps);
  first.forEach((ps, j) =>
    ps.forEach(([d, i], s) => {
      returns[d][i] = out.returns[j][s];
      returnMask[d][i] = 1;
    }),
  );
  return { advantages, returns, returnMask };
}
