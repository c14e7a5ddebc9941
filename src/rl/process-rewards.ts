/**
 * Per-token rewards from an outcome reward plus process rewards (per step and
 * per tool call), laid out over a trajectory's action tokens (see
 * advantages/input.ts), ready for `TrajectoryInput.tokenRewards`.
 *
 * Placement:
 *  - the outcome reward sits on the last action token of the trajectory;
 *  - a step's process reward, and the reward of each tool call a step made,
 *    sit on the last action token of that step (the step that made the call:
 *    in Agent-R1 legacy generation stops at `</tool_call>`, so that is the
 *    closing token of the call).
 *
 * Combination: r = outcome + processWeight·p, where p is the process rewards,
 * optionally PRIME-normalized first over the batch (Agent-R1 legacy
 * `prime_norm`, from PRIME, Cui et al. 2025):
 *   p ← p / (max over the batch and tokens of |Σ_{k≥t} p_k| + 1e-6)
 * so that no process reward-to-go exceeds 1 in magnitude.
 *
 * Departures from Agent-R1 legacy: several tool calls in one step share that
 * step's last token (their rewards add), where legacy put each at its own
 * `</tool_call>` token; legacy had no weight (processWeight = 1).
 */
import { InputError } from "../util/errors.js";

export interface ProcessRewardTrajectory {
  /** Action tokens of each step, in order. */
  stepTokens: readonly number[];
  outcome: number;
  /** One process reward per step (0 where a step has none). */
  stepRewards?: readonly number[];
  /** Reward of each tool call, with the index of the step that made it. */
  toolCallRewards?: readonly { step: number; reward: number }[];
}

export interface CombineRewardsOptions {
  /** Scale of the process rewards against the outcome (which has weight 1). Default 1. */
  processWeight?: number;
  /** PRIME normalization of the process rewards over the batch. Default false. */
  primeNorm?: boolean;
}

/** Index of each step's last action token (-1 for a step with none). */
function stepEnds(stepTokens: readonly number[]): number[] {
  let end = 0;
  return stepTokens.map((n) => {
    if (!Number.isInteger(n) || n < 0) throw new InputError(`stepTokens must hold non-negative integers, got ${n}`);
    end += n;
    return n > 0 ? end - 1 : -1;
  });
}

const total = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0);

export function outcomeTokenRewards(t: ProcessRewardTrajectory): number[] {
  const n = total(t.stepTokens);
  if (n === 0) throw new InputError("the trajectory has no action tokens to carry its outcome reward");
  const r = new Array<number>(n).fill(0);
  r[n - 1] = t.outcome;
  return r;
}

export function processTokenRewards(t: ProcessRewardTrajectory): number[] {
  const ends = stepEnds(t.stepTokens);
  const r = new Array<number>(total(t.stepTokens)).fill(0);
  const put = (step: number, reward: number, what: string) => {
    if (!Number.isInteger(step) || step < 0 || step >= ends.length) throw new InputError(`${what}: step ${step} is out of range (the trajectory has ${ends.length} steps)`);
    if (ends[step] < 0) {
      if (reward !== 0) throw new InputError(`${what}: step ${step} has no action tokens to carry reward ${reward}`);
      return;
    }
    r[ends[step]] += reward;
  };
  if (t.stepRewards) {
    if (t.stepRewards.length !== ends.length) throw new InputError(`stepRewards has ${t.stepRewards.length} entries, the trajectory has ${ends.length} steps`);
    t.stepRewards.forEach((x, k) => put(k, x, `stepRewards[${k}]`));
  }
  t.toolCallRewards?.forEach((c, j) => put(c.step, c.reward, `toolCallRewards[${j}]`));
  return r;
}

/** rows[i][t]: process reward of trajectory i at action token t. */
export function primeNormalize(rows: readonly (readonly number[])[]): number[][] {
  let maxAbs = 0;
  for (const row of rows) {
    let c = 0;
    for (let t = row.length - 1; t >= 0; t--) {
      c += row[t];
      maxAbs = Math.max(maxAbs, Math.abs(c));
    }
  }
  return rows.map((row) => row.map((x) => x / (maxAbs + 1e-6)));
}

/** Per trajectory, per action token: outcome + processWeight · (normalized) process rewards. */
export function combineRewards(batch: readonly ProcessRewardTrajectory[], opts: CombineRewardsOptions = {}): number[][] {
  const w = opts.processWeight ?? 1;
  const raw = batch.map(processTokenRewards);
  const process = opts.primeNorm ? primeNormalize(raw) : raw;
  return batch.map((t, i) => outcomeTokenRewards(t).map((o, k) => o + w * process[i][k]));
}
