/** The task registry: name -> factory; `getTask` validates options with the task's own schema. */
import { InputError } from "../util/errors.js";
import { createCalcTask } from "./calc/task.js";
import { createMultihopTask } from "./multihop/task.js";
import { createShopTask } from "./shop/task.js";
import { createHouseholdTask } from "./household/task.js";
import type { McpEntry } from "./mcp-servers.js";
import type { Task, TaskFactory } from "./types.js";

export const TASKS: Record<string, TaskFactory> = {
  multihop: createMultihopTask,
  calc: createCalcTask,
  shop: createShopTask,
  household: createHouseholdTask,
};

export function getTask(name: string, options: Record<string, unknown> = {}): Task {
  if (!Object.hasOwn(TASKS, name))
    throw new InputError(`unknown task '${name}'; tasks: ${Object.keys(TASKS).join(", ")}`);
  return TASKS[name](options);
}

/**
 * A recipe's task: a module of the user's (`task.module`) and/or MCP servers (`task.mcp`), or a
 * built-in task by name. A task with MCP servers holds them open until its `close()`.
 */
export async function loadTask(section: {
  name: string;
  module?: string;
  mcp?: McpEntry[];
  options: Record<string, unknown>;
  /** Train worlds (tasks/worlds.ts); 1: the task's own train split. */
  worlds?: number;
  firstWorld?: number;
}): Promise<Task> {
  const worlds = section.worlds ?? 1;
  if (section.module !== undefined || (section.mcp?.length ?? 0) > 0) {
    if (worlds > 1)
      throw new InputError(
        "task.worlds: only a built-in task is generated in other worlds, not task.module or task.mcp",
      );
    const { loadModuleTask } = await import("./module-task.js");
    return loadModuleTask(section);
  }
  const task = getTask(section.name, section.options);
  if (worlds === 1) return task;
  const { inTrainWorlds } = await import("./worlds.js"); // worlds.ts builds tasks with getTask
  return inTrainWorlds(task, section.options, worlds, section.firstWorld ?? 0);
}

export type { Task, TaskFactory, TaskRow, EpisodeScore, Split } from "./types.js";
export { parseTaskOptions } from "./options.js";
export * from "./multihop/index.js";
export * from "./calc/index.js";
export * as shop from "./shop/index.js";
export * as household from "./household/index.js";
