/**
 * Batch filters applied before the advantages.
 *
 * Zero-variance groups (DAPO dynamic sampling; `filter_uniform_groups`,
 * `remove_constant_reward_groups` in peers): a group whose scores are all
 * equal gives every group-relative estimator zero advantages, so it only
 * costs compute. A group of one counts as uniform (DAPO's std is 0 there too);
 * do not enable this filter with one sample per prompt.
 *
 * Overlong masking (DAPO overlong filtering): a trajectory cut by the length
 * limit (stopReason "length") has an outcome that says little about its
 * actions; it keeps its place in the batch but gets loss weight 0.
 */
import type { StopReason } from "../engine/types.js";
import { groupMembers, type GroupKey } from "./groups.js";

export interface UniformGroupFilter {
  /** Indices of the trajectories to keep, in batch order. */
  keep: number[];
  droppedGroups: number;
  droppedTrajectories: number;
}

/** Drops groups whose scores span at most `tolerance` (default 0: all exactly equal). */
export function dropUniformGroups(
  scores: readonly number[],
  groups: readonly GroupKey[],
  tolerance = 0,
): UniformGroupFilter {
  const keepFlag = new Array<boolean>(scores.length).fill(true);
  let droppedGroups = 0,
    droppedTrajectories = 0;
  for (const members of groupMembers(groups).values()) {
    const s = members.map((i) => scores[i]);
    if (Math.max(...s) - Math.min(...s) > tolerance) continue;
    droppedGroups++;
    droppedTrajectories += members.length;
    for (const i of members) keepFlag[i] = false;
  }
  const keep = keepFlag.flatMap((k, i) => (k ? [i] : []));
  return { keep, droppedGroups, droppedTrajectories };
}

/** Per trajectory: weight 0 if it was truncated by the length limit, else 1; and how many were masked. */
export function maskOverlong(stopReasons: readonly StopReason[]): { weights: number[]; masked: number } {
  const weights = stopReasons.map((r) => (r === "length" ? 0 : 1));
  return { weights, masked: weights.filter((w) => w === 0).length };
}
