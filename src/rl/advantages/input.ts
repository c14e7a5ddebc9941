/**
 * The common input and output of every advantage estimator, and the helpers
 * the estimators share.
 *
 * Layout: token-level arrays on datum positions (datums.ts), one row per
 * datum, with a mask that is 1 where the target is an action token (the
 * tokens the policy generated; prompt and tool-output targets are 0), as
 * verl's estimators take (batch × response) tensors with a response mask.
 * A trajectory may span several datums (a context rewrite starts a new one):
 * `trajectory[d]` names datum d's trajectory, a trajectory's datums are
 * consecutive and in order, and the token-level recursions run over its action
 * tokens in that order, across its datums, skipping the masked positions.
 */
import type { GroupKey } from "../groups.js";
import { InputError } from "../../util/errors.js";

export type Rows = readonly (readonly number[])[];

export interface TrajectoryInfo {
  /** Trajectories sampled from the same prompt share a group. */
  group: GroupKey;
  /** Scalar outcome used by the outcome estimators (grpo, dr-grpo, rloo, reinforce, reinforce++-baseline). Agent-R1 main uses the sum of the step rewards. */
  score: number;
  /** gigpo: each step's anchor state (the env's rendered state when it acted), by step index; undefined: none. */
  anchors?: readonly (string | undefined)[];
}

export interface AdvantageInput {
  /** One entry per trajectory. */
  trajectories: TrajectoryInfo[];
  /** Per datum: the index of its trajectory; non-decreasing (a trajectory's datums are consecutive). */
  trajectory: readonly number[];
  /** Per datum position: 1 on action tokens, 0 elsewhere. */
  mask: Rows;
  /** Per datum position: the token reward (0 off the mask). Required by gae, gae-step, reinforce++. */
  rewards?: Rows;
  /** Per datum position: the critic's value of the state at that position (it predicts the target there). gae, gae-step. */
  values?: Rows;
  /** Per datum position: the step (LLM call) whose action token is the target there, −1 off the mask. gae-step. */
  steps?: Rows;
  /** Discount. Default 1 (verl/Agent-R1 default). gae, gae-step, reinforce++. */
  gamma?: number;
  /** GAE λ. Default 1. gae, gae-step. */
  lambda?: number;
  /** Whiten GAE advantages over the batch. Default true (Agent-R1 always does). gae, gae-step. */
  whiten?: boolean;
  /** GRPO std epsilon. Default 1e-6. grpo. */
  epsilon?: number;
  /** REINFORCE baseline. Default "none". reinforce. */
  baseline?: "none" | "batch-mean";
  /** GiGPO's step weight and normalization (gigpo.ts). gigpo. */
  gigpo?: { stepWeight?: number; normalize?: "mean-std" | "mean" };
}

export interface AdvantageOutput {
  /** Per datum position; 0 off the mask. */
  advantages: number[][];
  /**
   * Per datum position where `returnMask` is 1: the critic's targets (gae: every action token;
   * gae-step: the first action token of each step) or the discounted returns G_t (reinforce++).
   */
  returns?: number[][];
  returnMask?: number[][];
}

export type RowField = "rewards" | "values" | "steps";

/** Checks the layout, and that the fields an estimator reads are present and shaped like the mask. */
export function checkInput(input: AdvantageInput, need: RowField[] = []): void {
  const { trajectories, trajectory, mask } = input;
  if (trajectory.length !== mask.length)
    throw new InputError(`trajectory has ${trajectory.length} entries, mask has ${mask.length} datums`);
  trajectory.forEach((j, d) => {
    if (!Number.isInteger(j) || j < 0 || j >= trajectories.length)
      throw new InputError(
        `trajectory[${d}] must be an index into trajectories (0..${trajectories.length - 1}), got ${j}`,
      );
    if (d > 0 && j < trajectory[d - 1])
      throw new InputError(
        `trajectory[${d}] is ${j} after ${trajectory[d - 1]}`,
        "order the datums by trajectory, each trajectory's datums consecutive and in order",
      );
  });
  trajectories.forEach((t, j) => {
    if (!Number.isFinite(t.score))
      throw new InputError(`trajectories[${j}].score must be a finite number, got ${t.score}`);
  });
  for (const field of need) {
    const rows = input[field];
    if (!rows)
      throw new InputError(
        `${field} is required by this estimator`,
        field === "values" ? "run the critic first" : undefined,
      );
    if (rows.length !== mask.length)
      throw new InputError(`${field} has ${rows.length} datums, mask has ${mask.length}`);
    rows.forEach((row, d) => {
      if (row.length !== mask[d].length)
        throw new InputError(`${field}[${d}] has ${row.length} positions, mask[${d}] has ${mask[d].length}`);
      if (field === "steps") {
        row.forEach((k, i) => {
          if (mask[d][i] > 0 !== k >= 0 || !Number.isInteger(k))
            throw new InputError(
              `steps[${d}][${i}] is ${k} where mask is ${mask[d][i]}`,
              "give a step index >= 0 on action tokens and -1 elsewhere",
            );
        });
      } else if (row.some((x) => !Number.isFinite(x))) throw new InputError(`${field}[${d}] holds a non-finite number`);
    });
  }
}

/** Each trajectory's scalar on its action tokens, 0 elsewhere. */
export function broadcast(perTrajectory: readonly number[], mask: Rows, trajectory: readonly number[]): number[][] {
  return mask.map((row, d) => row.map((m) => (m > 0 ? perTrajectory[trajectory[d]] : 0)));
}

/** Each row its own trajectory: the layout of one datum per trajectory. */
export const ownTrajectories = (rows: Rows): number[] => rows.map((_, d) => d);

/** A mask of ones shaped like `rows`: every position is an action token. */
export const fullMask = (rows: Rows): number[][] => rows.map((row) => row.map(() => 1));

/**
 * Visits the action positions of every trajectory from its last to its first
 * (across its datums); `start` is called before each trajectory's first visit.
 */
export function backwardOverActions(
  mask: Rows,
  trajectory: readonly number[],
  start: () => void,
  visit: (d: number, i: number) => void,
): void {
  for (let d = mask.length - 1; d >= 0; d--) {
    if (d === mask.length - 1 || trajectory[d] !== trajectory[d + 1]) start();
    for (let i = mask[d].length - 1; i >= 0; i--) if (mask[d][i] > 0) visit(d, i);
  }
}
