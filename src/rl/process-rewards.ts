/**
 * Per-token rewards from an outcome reward plus process rewards (per step and
 * per tool call), on a trajectory's datum positions (datums.ts): one row per
 * datum, `steps[d][i]` the step whose action token is the target at position
 * i (−1 for prompt and observation targets). Positions that are not action
 * tokens get reward 0.
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

type Rows = readonly (readonly number[])[];

export interface ProcessRewardTrajectory {
  /** Per datum of the trajectory, per position: the step of the action token there, −1 elsewhere. */
  steps: Rows;
  outcome: number;
  /** Process reward of each step, by step index (0 where a step has none). */
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

type Position = [datum: number, index: number];

/** The last action position of each step, and of the trajectory. */
function lastPositions(steps: Rows): { byStep: Map<number, Position>; last?: Position } {
  const byStep = new Map<number, Position>();
  let last: Position | undefined;
  steps.forEach((row, d) =>
    row.forEach((k, i) => {
      if (k < 0) return;
      if (!Number.isInteger(k))
        throw new InputError(`steps[${d}][${i}] must be a step index (an integer >= 0) or -1, got ${k}`);
      byStep.set(k, (last = [d, i]));
    }),
  );
  return { byStep, last };
}

const zeros = (steps: Rows) => steps.map((row) => row.map(() => 0));

export function outcomeTokenRewards(t: ProcessRewardTrajectory): number[][] {
  const { last } = lastPositions(t.steps);
  if (!last) throw new InputError("the trajectory has no action tokens to carry its outcome reward");
  const r = zeros(t.steps);
  r[last[0]][last[1]] = t.outcome;
  return r;
}

export function processTokenRewards(t: ProcessRewardTrajectory): number[][] {
  const { byStep } = lastPositions(t.steps);
  const r = zeros(t.steps);
  const put = (step: number, reward: number, what: string) => {
    if (!Number.isInteger(step) || step < 0) throw new InputError(`${what}: step ${step} is not a step index`);
    const at = byStep.get(step);
    if (!at) {
      if (reward !== 0) throw new InputError(`${what}: step ${step} has no action tokens to carry reward ${reward}`);
      return;
    }
    r[at[0]][at[1]] += reward;
  };
  t.stepRewards?.forEach((x, k) => put(k, x, `stepRewards[${k}]`));
  t.toolCallRewards?.forEach((c, j) => put(c.step, c.reward, `toolCallRewards[${j}]`));
  return r;
}

/** batch[j][d][i]: process reward of trajectory j at position i of its datum d. */
export function primeNormalize(batch: readonly Rows[]): number[][][] {
  let maxAbs = 0;
  for (const rows of batch) {
    let c = 0; // reward-to-go, across the trajectory's datums from its end
    for (let d = rows.length - 1; d >= 0; d--) {
      for (let i = rows[d].length - 1; i >= 0; i--) {
        c += rows[d][i];
        maxAbs = Math.max(maxAbs, Math.abs(c));
      }
    }
  }
  return batch.map((rows) => rows.map((row) => row.map((x) => x / (maxAbs + 1e-6))));
}

/** Per trajectory, per datum position: outcome + processWeight · (normalized) process rewards. */
export function combineRewards(
  batch: readonly ProcessRewardTrajectory[],
  opts: CombineRewardsOptions = {},
): number[][][] {
  const w = opts.processWeight ?? 1;
  const raw = batch.map(processTokenRewards);
  const process = opts.primeNorm ? primeNormalize(raw) : raw;
  return batch.map((t, j) => outcomeTokenRewards(t).map((row, d) => row.map((o, i) => o + w * process[j][d][i])));
}
