/**
 * A generated task over many worlds. One world holds each name and each house for the whole run, so a
 * policy trained on it can gain by recalling that world (which company founded first, which cabinet
 * holds the mug) rather than by reading what its tools return; the held-out splits of the same world
 * cannot reward that (a warm start on one big world scored 89 % exact match on its train questions and
 * 52 % on held-out ones after expert-only SFT: dev/LOG.md, 2026-11-25). Small worlds draw names afresh,
 * so the same name stands for other facts in another world.
 *
 * `trainWorlds` generates the task from other seeds (seed + WORLD_SEED_OFFSET + first + k), each with a
 * share of the train questions and no held-out ones; `withTrainWorlds` keeps the task's own validation
 * and test rows and draws its training rows from those worlds, each row tagged with its world
 * (extra_info.world) so its env, score and demonstration come from that world. The warm start uses the
 * same worlds (pretrain's --worlds); RL uses them through the recipe's task.worlds.
 */
import { InputError } from "../util/errors.js";
import { getTask } from "./index.js";
import type { Split, Task, TaskRow } from "./types.js";

/** Task seeds of the generated worlds start here, away from the seeds users pick. */
export const WORLD_SEED_OFFSET = 1000;

/**
 * `worlds` copies of task `name` generated from seeds seed + WORLD_SEED_OFFSET + first + k, sharing
 * `questions` train questions (ceil(questions / worlds) each) and holding no val or test questions.
 */
export function trainWorlds(
  name: string,
  options: Record<string, unknown>,
  worlds: number,
  questions: number,
  first = 0,
): Task[] {
  if (!(Number.isInteger(worlds) && worlds >= 1))
    throw new InputError(`worlds: need a whole number >= 1, got ${worlds}`);
  if (!(Number.isInteger(first) && first >= 0))
    throw new InputError(`worlds: the first world must be a whole number >= 0, got ${first}`);
  const seed = Number(options.seed ?? 0);
  const train = Math.ceil(questions / worlds);
  return Array.from({ length: worlds }, (_, k) =>
    getTask(name, { ...options, seed: seed + WORLD_SEED_OFFSET + first + k, train, val: 0, test: 0 }),
  );
}

/** The world a row of `withTrainWorlds` was drawn from, or undefined for the task's own rows. */
export function rowWorld(row: TaskRow): number | undefined {
  const w = row.extra_info.world;
  return typeof w === "number" ? w : undefined;
}

/**
 * `task` with its training rows drawn from `worlds` instead: taken in turn (the first row of every
 * world, then the second, ...), so any prefix spreads over the worlds. Validation and test rows, the
 * tokenizer corpus and the tool schemas stay the task's own.
 */
export function withTrainWorlds(task: Task, worlds: readonly Task[]): Task {
  if (worlds.length === 0) throw new InputError(`task '${task.name}': no train worlds given`);
  const owner = (row: TaskRow): Task => {
    const w = rowWorld(row);
    if (w === undefined) return task;
    if (!(w >= 0 && w < worlds.length))
      throw new InputError(`task '${task.name}': row names world ${w}, but there are ${worlds.length} train worlds`);
    return worlds[w];
  };
  const trainRows = (): TaskRow[] => {
    const each = worlds.map((t) => t.rows("train"));
    const out: TaskRow[] = [];
    for (let i = 0, longest = Math.max(...each.map((r) => r.length)); i < longest; i++)
      each.forEach((rows, w) => {
        if (i < rows.length) out.push({ ...rows[i], extra_info: { ...rows[i].extra_info, world: w } });
      });
    return out;
  };
  return {
    name: task.name,
    rows: (split: Split) => (split === "train" ? trainRows() : task.rows(split)),
    makeEnv: (row) => owner(row).makeEnv(row),
    score: (t, row, tokenizer) => owner(row).score(t, row, tokenizer),
    demonstrations: (rows, opts) =>
      rows.flatMap((row, i) => owner(row).demonstrations([row], { seed: opts.seed + i, quality: opts.quality })),
    corpus: () => task.corpus(),
    ...(task.tools ? { tools: task.tools } : {}),
    ...(task.close ? { close: () => task.close!() } : {}),
  };
}

/** `task` with its training rows drawn from `worlds` worlds (trainWorlds from `first`) sharing its train questions. */
export function inTrainWorlds(task: Task, options: Record<string, unknown>, worlds: number, first = 0): Task {
  return withTrainWorlds(task, trainWorlds(task.name, options, worlds, task.rows("train").length, first));
}
