/**
 * A recipe's task from a module of the user's (`task.module`) and/or MCP servers (`task.mcp`).
 * What the module exports picks how episodes are played, exactly one of:
 *   agent     through the recording gateway (./agent-module.ts)
 *   tools     in the built-in ToolEnv (./tool-module.ts)
 *   makeEnv   in its own env, in the built-in rollout (./tool-module.ts)
 * With task.mcp, the servers' tools join a `tools` module's, are handed to `makeEnv`, or (a module
 * with rows alone, or no module: rows from data.train) are the whole tool set. The servers are
 * started here, before the first rollout, and closed by the task's `close()` (and at the latest when
 * the process ends: ../tools/mcp-transports.ts). A relative `task.module` in a recipe is resolved
 * against the recipe's directory when it is loaded (src/train/load-config.ts); here, against the
 * current directory (`eval --task`).
 */
import { InputError } from "../util/errors.js";
import { agentTask } from "./agent-module.js";
import { openMcpServers, type McpEntry } from "./mcp-servers.js";
import { moduleTools } from "./module-tools.js";
import { envTask, toolTask } from "./tool-module.js";
import type { Split, Task, TaskRow } from "./types.js";
import { exportNames, loadUserModule, moduleRows, type LoadedModule } from "./user-module.js";

export interface ModuleTaskSection {
  module?: string;
  mcp?: McpEntry[];
  options?: Record<string, unknown>;
}

const KINDS = ["agent", "tools", "makeEnv"] as const;

/** Which of agent, tools, makeEnv the module exports: exactly one, or none when MCP servers give the tools. */
function moduleKind(loaded: LoadedModule, withMcp: boolean): (typeof KINDS)[number] | undefined {
  const given = KINDS.filter((k) => loaded.mod[k] !== undefined);
  const { where } = loaded;
  if (given.length > 1)
    throw new InputError(
      `${where}: exports ${given.join(" and ")}; export exactly one of agent, tools, makeEnv`,
      "agent plays through the gateway; tools and makeEnv play in the built-in rollout",
    );
  if (given.length === 0 && !withMcp)
    throw new InputError(
      `${where}: exports none of agent, tools, makeEnv (it exports ${exportNames(loaded.mod)}); export exactly one`,
    );
  if (given[0] === "agent" && withMcp)
    throw new InputError(
      `${where}: exports agent, and task.mcp names MCP servers; an agent calls its own tools`,
      "export tools or makeEnv (or rows alone) to train on the servers' tools",
    );
  return given[0];
}

/** Rows for a task without a module: data.train gives them (the trainer reads it before asking the task). */
function rowsFromData(split: Split): TaskRow[] {
  if (split !== "train") return [];
  throw new InputError(
    "task.mcp without task.module: the training rows come from data.train",
    "give data.train (a .jsonl or .parquet of Agent-R1 rows), or a task.module that exports rows",
  );
}

export async function loadModuleTask(section: ModuleTaskSection): Promise<Task> {
  const mcp = section.mcp ?? [];
  const options = section.options ?? {};
  const loaded: LoadedModule = section.module
    ? await loadUserModule(section.module)
    : { mod: {}, where: "task.mcp", dir: process.cwd() };
  const kind = section.module ? moduleKind(loaded, mcp.length > 0) : undefined;
  const name = section.module ? `module:${section.module}` : "mcp";
  const split = section.module ? await moduleRows(loaded) : undefined;
  const rows = split ? (s: Split) => split[s] : rowsFromData;
  if (kind === "agent") return agentTask(loaded, split!, name, options);
  const own = kind === "tools" ? await moduleTools(loaded.mod.tools, loaded.where) : [];
  const servers = mcp.length ? await openMcpServers(mcp) : undefined;
  try {
    const input = { mod: loaded.mod, where: loaded.where, name, rows, tools: own, mcpTools: servers?.tools ?? [] };
    const close = servers ? () => servers.close() : undefined;
    return kind === "makeEnv" ? envTask({ ...input, close }) : toolTask({ ...input, close });
  } catch (e) {
    await servers?.close();
    throw e;
  }
}
