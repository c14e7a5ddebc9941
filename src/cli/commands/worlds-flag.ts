/** The --worlds flag of `pretrain` and `tokenizer`: demonstration worlds generated from other seeds. */
import type { Task } from "../../tasks/types.js";
import { trainWorlds } from "../../tasks/worlds.js";
import { WARM_START_DEFAULTS } from "../../train/warm-start.js";
import { optionalNumber, usageError, type FlagSpec, type Parsed } from "../args.js";
import { taskOptions } from "./task-flags.js";

/** --worlds; `fallback` is the command's default. */
export function worldsFlag(fallback: number): FlagSpec {
  return {
    worlds: {
      type: "string",
      value: "N",
      description: "learn from the train rows of N worlds generated from other seeds (1: the task's own train split)",
      fallback,
    },
  };
}

/**
 * The tasks whose train rows the command learns from: `task` itself when --worlds is 1, else that
 * many worlds of the same task from other seeds sharing its train questions (--option train=N,
 * default WARM_START_DEFAULTS.trainQuestions).
 */
export function worldsFromFlags(
  command: string,
  flags: Parsed["flags"],
  task: Task,
  fallback: number,
): { worlds: number; tasks: Task[] } {
  const worlds = optionalNumber(command, flags, "worlds") ?? fallback;
  if (!(Number.isInteger(worlds) && worlds >= 1))
    throw usageError(command, `--worlds must be a whole number >= 1, got ${worlds}`);
  if (worlds === 1) return { worlds, tasks: [task] };
  const options = { train: WARM_START_DEFAULTS.trainQuestions, ...taskOptions(command, flags) };
  return { worlds, tasks: trainWorlds(task.name, options, worlds, Number(options.train)) };
}
