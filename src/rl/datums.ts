/**
 * Trajectories to training datums, laid out once, without re-tokenizing
 * anything. Steps share one datum while each context extends the previous one
 * (a segment); a new datum starts where the flow rewrote history. In a datum,
 * the target at index i is token i+1 of the segment; action tokens get weight
 * 1 (times the trajectory's weight) and carry the logprob they were sampled
 * with, prompt and observation tokens get weight 0. When the steps recorded the policy version
 * that sampled them (train.async), a datum carries the oldest of its steps'.
 *
 * Everything computed afterwards (rewards, reference logprobs, critic values,
 * advantages) lives on these datum positions, with the action mask telling
 * which positions are the policy's, as verl's estimators work on a response
 * mask. A trajectory split into several datums stays one sequence: its datums
 * are consecutive, `trajectory` names it per datum, and each datum's
 * `sequence` is that index (one sequence for the loss aggregation).
 */
import type { Datum } from "../engine/types.js";
import { segments, stepContext, type Trajectory } from "../agent/trajectory.js";

export interface TrajectoryDatums {
  datums: Datum[];
  /** Per datum, per position: the step whose action token is the target there; −1 for prompt and observation targets. */
  steps: number[][];
}

/** The datums of one trajectory; `weight` scales the loss mask (0 masks the trajectory, e.g. when it was cut off). */
export function trajectoryDatums(t: Trajectory, weight = 1): TrajectoryDatums {
  const datums: Datum[] = [];
  const steps: number[][] = [];
  for (const seg of segments(t)) {
    const seq = stepContext(t, seg[0]).slice();
    if (seq.length === 0) throw new Error(`internal: trajectory ${t.id} has an empty context`);
    const weights: number[] = [],
      lp: number[] = [],
      step: number[] = [];
    const pad = (n: number) => {
      for (let i = 0; i < n; i++) (weights.push(0), lp.push(0), step.push(-1));
    };
    pad(seq.length - 1); // targets that are context tokens
    seg.forEach((k, j) => {
      const s = t.steps[k];
      s.action.forEach((tok, i) => {
        seq.push(tok);
        weights.push(weight);
        lp.push(s.logprobs[i]);
        step.push(k);
      });
      // The observation is context for the next step of the segment; after the last one nothing reads it.
      if (j < seg.length - 1) {
        pad(s.observation.length);
        seq.push(...s.observation);
      }
    });
    const version = oldestVersion(seg.map((k) => t.steps[k].policyVersion));
    datums.push({
      tokens: seq.slice(0, -1),
      targetTokens: seq.slice(1),
      weights,
      logprobs: lp,
      ...(version !== undefined ? { policyVersion: version } : {}),
    });
    steps.push(step);
  }
  return { datums, steps };
}

/** The smallest of the steps' policy versions; undefined when none recorded one. */
function oldestVersion(versions: (number | undefined)[]): number | undefined {
  const known = versions.filter((v): v is number => v !== undefined);
  return known.length > 0 ? Math.min(...known) : undefined;
}

export interface BatchDatums extends TrajectoryDatums {
  /** Per datum: the index of its trajectory in the batch (also its `sequence`). A trajectory's datums are consecutive, in step order. */
  trajectory: number[];
}

/** The datums of a batch, trajectory after trajectory; `weights[i]` scales trajectory i's loss mask (default 1). */
export function batchDatums(trajectories: readonly Trajectory[], weights?: readonly number[]): BatchDatums {
  const out: BatchDatums = { datums: [], steps: [], trajectory: [] };
  trajectories.forEach((t, i) => {
    const td = trajectoryDatums(t, weights?.[i] ?? 1);
    for (const d of td.datums) (out.datums.push({ ...d, sequence: i }), out.trajectory.push(i));
    out.steps.push(...td.steps);
  });
  return out;
}

/** 1 where a position's target is an action token, else 0: the response mask the estimators read. */
export function actionMask(steps: readonly (readonly number[])[]): number[][] {
  return steps.map((row) => row.map((k) => (k >= 0 ? 1 : 0)));
}
