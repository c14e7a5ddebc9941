/** Flags shared by the task commands (tokenizer, pretrain, eval, data): --task, --option key=value, --split. */
import { parse as parseYaml } from "yaml";
import { getTask, TASKS, type Split, type Task } from "../../tasks/index.js";
import { InputError } from "../../util/errors.js";
import { checkKey, findForbiddenKey } from "../../util/safe-keys.js";
import type { FlagSpec, Parsed } from "../args.js";

export const SPLIT_NAMES: readonly Split[] = ["train", "val", "test"];

export const TASK_FLAGS: FlagSpec = {
  task: { type: "string" },
  option: { type: "string", multiple: true },
};

/** `--option test=128` → { test: 128 } (values parsed as YAML scalars). */
export function taskOptions(command: string, flags: Parsed["flags"]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const o of (flags.option as string[] | undefined) ?? []) {
    const eq = o.indexOf("=");
    if (eq <= 0) throw new InputError(`${command}: --option '${o}' must look like name=value`, "for example --option test=128");
    const name = o.slice(0, eq);
    checkKey(name, `${command}: --option '${o}'`);
    const value = parseYaml(o.slice(eq + 1)) as unknown;
    const nested = findForbiddenKey(value);
    if (nested) checkKey(nested.split(".").pop()!, `${command}: --option '${o}'`);
    out[name] = value;
  }
  return out;
}

/** The task of --task with its --option values over `defaults`. */
export function taskFromFlags(command: string, flags: Parsed["flags"], defaults: Record<string, unknown> = {}): Task {
  const name = flags.task;
  if (typeof name !== "string" || name === "") throw new InputError(`${command}: --task is required; tasks: ${Object.keys(TASKS).join(", ")}`);
  return getTask(name, { ...defaults, ...taskOptions(command, flags) });
}

export function splitFromFlags(command: string, flags: Parsed["flags"], fallback: Split = "test"): Split {
  const s = (flags.split as string | undefined) ?? fallback;
  if (!SPLIT_NAMES.includes(s as Split)) throw new InputError(`${command}: unknown --split '${s}'; splits: ${SPLIT_NAMES.join(", ")}`);
  return s as Split;
}
