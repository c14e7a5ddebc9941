/** Flags shared by the task commands (tokenizer, pretrain, eval, data): --task, --option key=value, --split. */
import { parse as parseYaml } from "yaml";
import { getTask, TASKS, type Split, type Task } from "../../tasks/index.js";
import { UsageError } from "../../util/errors.js";
import { checkKey, findForbiddenKey } from "../../util/safe-keys.js";
import { usageError, type FlagSpec, type Parsed } from "../args.js";

export const SPLIT_NAMES: readonly Split[] = ["train", "val", "test"];

export const TASK_FLAGS: FlagSpec = {
  task: {
    type: "string",
    value: `${Object.keys(TASKS).join("|")}|FILE.ts`,
    description: "the task: its rows, tools, env and reward (required); or a module exporting an agent and its rows",
  },
  option: {
    type: "string",
    value: "NAME=VALUE",
    multiple: true,
    description: "a task option, such as a split size: --option test=128",
  },
};

/** The --split flag of the commands that read one split of a task. */
export function splitFlag(description: string, fallback?: Split): FlagSpec {
  return { split: { type: "string", value: SPLIT_NAMES.join("|"), description, fallback } };
}

/** `--option test=128` → { test: 128 } (values parsed as YAML scalars). */
export function taskOptions(command: string, flags: Parsed["flags"]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const o of (flags.option as string[] | undefined) ?? []) {
    const eq = o.indexOf("=");
    if (eq <= 0)
      throw usageError(command, `--option '${o}' must look like name=value`, "for example --option test=128");
    const name = o.slice(0, eq);
    checkKey(name, `${command}: --option '${o}'`);
    const value = parseYaml(o.slice(eq + 1)) as unknown;
    const nested = findForbiddenKey(value);
    if (nested) checkKey(nested.split(".").pop()!, `${command}: --option '${o}'`);
    out[name] = value;
  }
  return out;
}

/**
 * The task of --task with its --option values over `defaults`. A missing or unknown --task is a
 * usage error; an option the task rejects is not (it is the task's configuration).
 */
export function taskFromFlags(command: string, flags: Parsed["flags"], defaults: Record<string, unknown> = {}): Task {
  const name = flags.task;
  const tasks = Object.keys(TASKS).join(", ");
  if (typeof name !== "string" || name === "") throw usageError(command, `--task is required; tasks: ${tasks}`);
  if (isModulePath(name))
    throw new UsageError(
      `${command}: --task ${name}: an agent module plays through the gateway, which ${command} does not use; it works with eval and train (task.module)`,
    );
  if (!Object.hasOwn(TASKS, name)) throw new UsageError(`unknown task '${name}'; tasks: ${tasks}`);
  return getTask(name, { ...defaults, ...taskOptions(command, flags) });
}

/** A --task value that names a module of the user's (an agent task) rather than a built-in task. */
export function isModulePath(task: unknown): boolean {
  return typeof task === "string" && /\.(m?[jt]s)$/.test(task);
}

export function splitFromFlags(command: string, flags: Parsed["flags"], fallback: Split = "test"): Split {
  const s = (flags.split as string | undefined) ?? fallback;
  if (!SPLIT_NAMES.includes(s as Split))
    throw usageError(command, `unknown --split '${s}'; splits: ${SPLIT_NAMES.join(", ")}`);
  return s as Split;
}
