/**
 * The MCP servers a recipe names (`task.mcp`), opened once per run: each is connected (a process
 * over stdio, or a URL over streamable HTTP: src/tools/ecosystem.ts), its tools listed and kept as
 * `include` and `exclude` say, and all of them closed together when the run ends. A name in
 * include or exclude that the server does not have, or two servers offering the same tool name,
 * is an error naming it; whatever was opened by then is closed again.
 *
 * `${NAME}` in an env or headers value is read from the environment when the server starts, so a
 * recipe (and the run's saved config.yaml) can name a secret without holding it.
 */
import type { AnyTool } from "../agent/tool.js";
import { connectMcp, mcpTools, type McpServerSpec } from "../tools/ecosystem.js";
import { InputError } from "../util/errors.js";

/** One entry of task.mcp, as the recipe schema checked it (exactly one of command and url). */
export interface McpEntry {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  url?: string;
  headers?: Record<string, string>;
  include?: string[];
  exclude?: string[];
  maxMessageBytes?: number;
}

export interface McpServers {
  /** Every server's tools that include and exclude kept, in the recipe's order. */
  tools: AnyTool[];
  /** Per server, its label and the names of the tools kept. */
  servers: { label: string; tools: string[] }[];
  /** Closes every server (a process gets stdin closed, then SIGTERM, then SIGKILL); never throws. */
  close(): Promise<void>;
}

/** How a server is shown in messages: `task.mcp[0] (node server.js)`, a URL without credentials or query. */
function label(entry: McpEntry, i: number): string {
  let what: string;
  if (entry.command !== undefined) what = [entry.command, ...(entry.args ?? [])].join(" ");
  else {
    try {
      const u = new URL(entry.url ?? "");
      what = `${u.origin}${u.pathname}`;
    } catch {
      what = "a url that does not parse";
    }
  }
  return `task.mcp[${i}] (${what.length > 120 ? `${what.slice(0, 120)}...` : what})`;
}

/** `${NAME}` replaced by the environment's value; an unset variable is an error naming the key. */
function expand(values: Record<string, string> | undefined, where: string): Record<string, string> | undefined {
  if (!values) return undefined;
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(values))
    out[key] = value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
      const v = process.env[name];
      if (v === undefined)
        throw new InputError(`${where}: ${key} names \${${name}}, which is not set in the environment`);
      return v;
    });
  return out;
}

function spec(entry: McpEntry, where: string): McpServerSpec {
  const max = entry.maxMessageBytes !== undefined ? { maxMessageBytes: entry.maxMessageBytes } : {};
  if (entry.command !== undefined) {
    const env = expand(entry.env, `${where}: env`);
    return {
      command: entry.command,
      ...(entry.args ? { args: entry.args } : {}),
      ...(env ? { env } : {}),
      ...(entry.cwd !== undefined ? { cwd: entry.cwd } : {}),
      ...max,
    };
  }
  if (entry.url === undefined) throw new InputError(`${where}: give command or url`);
  const headers = expand(entry.headers, `${where}: headers`);
  return { url: entry.url, ...(headers ? { headers } : {}), ...max };
}

/** The tools a server listed, as include and exclude keep them; a name the server does not have is an error. */
function selectTools(tools: AnyTool[], entry: McpEntry, where: string): AnyTool[] {
  const names = tools.map((t) => t.name);
  for (const key of ["include", "exclude"] as const) {
    const unknown = (entry[key] ?? []).find((n) => !names.includes(n));
    if (unknown !== undefined)
      throw new InputError(
        `${where}: ${key} names '${unknown}', which the server does not have; it has: ${names.join(", ") || "no tools"}`,
      );
  }
  const include = entry.include && new Set(entry.include);
  const exclude = new Set(entry.exclude ?? []);
  return tools.filter((t) => (!include || include.has(t.name)) && !exclude.has(t.name));
}

/** Connects every server in order and lists its tools; on any failure, closes those opened and throws. */
export async function openMcpServers(entries: McpEntry[]): Promise<McpServers> {
  const clients: { close(): Promise<void> }[] = [];
  const close = async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
  };
  const tools: AnyTool[] = [];
  const owner = new Map<string, string>();
  const servers: McpServers["servers"] = [];
  try {
    for (const [i, entry] of entries.entries()) {
      const where = label(entry, i);
      const client = await connectMcp(spec(entry, where));
      clients.push(client);
      const kept = selectTools(await mcpTools(client), entry, where);
      for (const t of kept) {
        const other = owner.get(t.name);
        if (other)
          throw new InputError(
            `${where}: offers a tool named '${t.name}', as ${other} does`,
            "exclude it from one of them (task.mcp[i].exclude)",
          );
        owner.set(t.name, where);
      }
      tools.push(...kept);
      servers.push({ label: where, tools: kept.map((t) => t.name) });
    }
  } catch (e) {
    await close();
    throw e;
  }
  return { tools, servers, close };
}
