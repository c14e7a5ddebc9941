/** Split bookkeeping shared by the generated tasks. */
import type { Split, TaskRow } from "../types.js";
import { InputError } from "../../util/errors.js";
import { Rng } from "../../util/rng.js";

export const SPLITS: readonly Split[] = ["train", "val", "test"];

/**
 * Splits are generated test first, then val, then train, each from its own
 * stream: the held-out sets do not change when the train size does.
 */
export const GENERATION_ORDER: readonly Split[] = ["test", "val", "train"];

export function splitStream(split: Split): number {
  return SPLITS.indexOf(split);
}

export function shuffle<T>(rng: Rng, xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}

/** The generated item behind a row (by extra_info split + index, checked against the question text). */
export function itemForRow<T extends { question: string }>(
  task: string,
  items: Record<Split, readonly T[]>,
  row: TaskRow,
): T {
  const { split, index, question } = row.extra_info;
  const item = SPLITS.includes(split as Split) ? items[split as Split][index] : undefined;
  if (item === undefined || (question !== undefined && question !== item.question)) {
    throw new InputError(
      `task '${task}': row (split ${JSON.stringify(split)}, index ${index}) is not one of this task's generated rows`,
      "demonstrations need rows from rows(split) of a task built with the same options (seed and sizes)",
    );
  }
  return item;
}

/**
 * The demonstration's behaviour for row i: "expert" with probability quality,
 * else one of `mistakes`; plus the row's stream for the mistake's own choices.
 */
export function demoMode<M extends string>(
  seed: number,
  i: number,
  quality: number,
  mistakes: readonly M[],
): { mode: "expert" | M; rng: Rng } {
  if (!(quality >= 0 && quality <= 1))
    throw new InputError(`demonstrations: quality must be in [0, 1], got ${quality}`);
  if (!Number.isFinite(seed)) throw new InputError(`demonstrations: seed must be a finite number, got ${seed}`);
  const rng = new Rng(seed, 1_000_003 + i);
  return { mode: rng.next() < quality ? "expert" : mistakes[rng.int(mistakes.length)], rng };
}
