/**
 * Staleness in asynchronous training, as pure functions. A policy version is the number of
 * optimizer steps the weights have taken; a trajectory's version is the oldest of the versions
 * that sampled its actions. When the learner consumes a batch at version v, a group (a row's n
 * trajectories) is stale if one of its trajectories is older than v − k (k = train.async.maxStaleness).
 *
 * How far ahead the producer may run follows from one bound: an iteration takes at most
 * S = ppoEpochs × miniBatches optimizer steps (empty or skipped mini-batches take none), so a batch
 * started while the learner had finished iteration c, and consumed after iteration i − 1, is at
 * most S·(i − 1 − c) versions behind. onStale "wait" lets the producer start batch i once
 * c ≥ i − 1 − floor(k / S): never stale. onStale "drop" lets it run k batches ahead and drops what
 * came out too old.
 */
import type { Trajectory } from "../../agent/trajectory.js";
import type { TrainConfig } from "../config.js";

export type AsyncSettings = NonNullable<TrainConfig["train"]["async"]>;

/** Optimizer steps an iteration takes at most. */
export function stepsPerIteration(train: Pick<TrainConfig["train"], "ppoEpochs" | "miniBatches">): number {
  return train.ppoEpochs * train.miniBatches;
}

/** Batches the producer may have started beyond the one the learner is on. */
export function lookahead(a: AsyncSettings, steps: number): number {
  return a.onStale === "wait" ? Math.floor(a.maxStaleness / steps) : a.maxStaleness;
}

/** Why an async setting cannot do what it says (one line naming the field), or undefined. */
export function asyncSettingsProblem(train: TrainConfig["train"]): string | undefined {
  const a = train.async;
  if (!a || a.onStale !== "wait") return undefined;
  const steps = stepsPerIteration(train);
  if (lookahead(a, steps) > 0) return undefined;
  return `train.async.maxStaleness: ${a.maxStaleness} is below the optimizer steps of one iteration (train.ppoEpochs x train.miniBatches = ${steps}), so with onStale wait the producer could never run ahead; give at least ${steps}, or onStale drop`;
}

/** The oldest version among a trajectory's steps; `fallback` (the batch's start) when a step recorded none. */
export function trajectoryVersion(t: Trajectory, fallback: number): number {
  let oldest = Infinity;
  for (const s of t.steps) oldest = Math.min(oldest, s.policyVersion ?? fallback);
  return oldest === Infinity ? fallback : oldest;
}

export interface StalenessVerdict {
  /** The trajectories of the groups that are fresh enough, in their order. */
  kept: Trajectory[];
  /** Groups with a trajectory older than version − maxStaleness. */
  staleGroups: number;
  /** Versions behind, over the kept trajectories (0 when none is kept). */
  mean: number;
  max: number;
}

/** Splits a consumed batch into fresh groups and stale ones, at the learner's `version`. */
export function judgeStaleness(
  trajectories: Trajectory[],
  o: { version: number; maxStaleness: number; fallback: number },
): StalenessVerdict {
  const behind = trajectories.map((t) => o.version - trajectoryVersion(t, o.fallback));
  const stale = new Set<number>();
  trajectories.forEach((t, i) => {
    if (behind[i] > o.maxStaleness) stale.add(t.rowIndex);
  });
  const keep = trajectories.map((t) => !stale.has(t.rowIndex));
  const kept = trajectories.filter((_, i) => keep[i]);
  const keptBehind = behind.filter((_, i) => keep[i]);
  return {
    kept,
    staleGroups: stale.size,
    mean: keptBehind.length ? keptBehind.reduce((a, b) => a + b, 0) / keptBehind.length : 0,
    max: keptBehind.length ? Math.max(...keptBehind) : 0,
  };
}
