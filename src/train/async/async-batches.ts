/**
 * What a training iteration gets to learn from, in either mode: the rows, the played rollout and
 * the trajectories that will train. In lockstep these come straight from the rollout; with
 * train.async a batch is produced ahead (producedBatch, with the data cursor after its rows and
 * the version its rollout started at) and judged for staleness when the learner takes it
 * (consumedBatch, with the iteration's async metrics).
 */
import type { Trajectory } from "../../agent/trajectory.js";
import type { TaskRow } from "../../tasks/types.js";
import type { DataCursor } from "../data-order.js";
import type { playRows } from "../evaluate.js";
import type { Taken } from "./rollout-producer.js";
import { judgeStaleness, type AsyncSettings } from "./staleness.js";

type Played = Awaited<ReturnType<typeof playRows>>;

export interface GatheredBatch {
  rows: TaskRow[];
  ro: Played;
  /** The trajectories that go on to prepareBatch: all of them, or the fresh groups' (train.async). */
  trained: Trajectory[];
  /** train.async: how long the producer's rollout took, s (lockstep measures it in the step). */
  rolloutS?: number;
  /** train.async: staleness and waits, as metrics.jsonl keys. */
  asyncMetrics?: Record<string, number>;
}

export interface ProducedBatch {
  rows: TaskRow[];
  /** The data cursor after these rows: the learner's once it takes the batch. */
  cursor: DataCursor;
  ro: Played;
  rolloutMs: number;
  /** The policy version when the rollout started: no sample of it is older. */
  startVersion: number;
}

/** Plays `next`'s rows (through `play`) and keeps what the learner will need with the result. */
export async function producedBatch(
  next: { rows: TaskRow[]; cursor: DataCursor },
  startVersion: number,
  play: () => Promise<Played>,
): Promise<ProducedBatch> {
  const t0 = performance.now();
  const ro = await play();
  return { ...next, ro, rolloutMs: performance.now() - t0, startVersion };
}

/**
 * A produced batch as the learner takes it at policy `version`: stale groups dropped (onStale
 * drop), or none allowed (onStale wait, where the producer's bound makes them impossible: one
 * found is a bug, and the run stops rather than train on it).
 */
export function consumedBatch(taken: Taken<ProducedBatch>, version: number, a: AsyncSettings): GatheredBatch {
  const b = taken.value;
  const verdict = judgeStaleness(b.ro.result.trajectories, {
    version,
    maxStaleness: a.maxStaleness,
    fallback: b.startVersion,
  });
  if (a.onStale === "wait" && verdict.staleGroups > 0)
    throw new Error(
      `internal: ${verdict.staleGroups} stale groups under onStale wait (learner at version ${version}, the batch's rollout started at ${b.startVersion}, maxStaleness ${a.maxStaleness})`,
    );
  return {
    rows: b.rows,
    ro: b.ro,
    trained: verdict.kept,
    rolloutS: b.rolloutMs / 1000,
    asyncMetrics: {
      policy_version: version,
      staleness_mean: verdict.mean,
      staleness_max: verdict.max,
      stale_groups_dropped: verdict.staleGroups,
      learner_wait_s: taken.learnerWaitMs / 1000,
      producer_wait_s: taken.producerWaitMs / 1000,
    },
  };
}
