/**
 * Tools from the TypeScript agent ecosystem as ours, so a ToolEnv runs them with our timeouts,
 * output caps and error-as-observation behaviour (a thrown error, an MCP `isError` result or a
 * broken transport becomes the observation the model reads):
 *  - fromAiSdkTools(record): Vercel AI SDK tools (`tool({ description, inputSchema, execute })`,
 *    with a zod schema, `jsonSchema(...)` or a Standard Schema);
 *  - fromAgentsSdkTools(list): OpenAI Agents SDK function tools (`tool({ name, parameters, execute })`),
 *    invoked as the SDK invokes them;
 *  - mcpTools(client): the tools of a connected MCP client; connectMcp({ command } | { url }) makes
 *    one over stdio or streamable HTTP (`@modelcontextprotocol/sdk`, an optional dependency loaded
 *    only here).
 * None of these packages is imported by the adapters themselves: the objects are read by shape.
 *
 * An MCP server is a stranger. Its tools' schemas are checked with linear-time patterns
 * (../agent/tool-schema.ts), and so are its output schemas in a client connectMcp made
 * (`linearJsonSchemaValidator`; give it to a Client of your own too). Its tool listing stops at
 * MAX_MCP_TOOL_PAGES pages or MAX_MCP_TOOLS tools, or when a cursor comes back. connectMcp's
 * transports (./mcp-transports.ts) fail only the call whose answer is over `maxMessageBytes`.
 */
import { defineTool, type AnyTool } from "../agent/tool.js";
import { compileJsonSchema } from "../agent/tool-schema.js";
import { InputError } from "../util/errors.js";
import type { StdioTransport } from "./mcp-transports.js";

export interface AdapterOptions {
  /** Per call; default the tool's own, else ours (30 s). */
  timeoutMs?: number;
  maxResponseChars?: number;
}

/** A tool's result as the text the model reads. */
function asText(out: unknown): string {
  if (typeof out === "string") return out;
  if (out === undefined) return "";
  try {
    return JSON.stringify(out);
  } catch {
    return String(out);
  }
}

// ---- Vercel AI SDK ----

interface AiSdkTool {
  description?: string;
  inputSchema?: unknown;
  parameters?: unknown;
  execute?: (
    input: unknown,
    options: { toolCallId: string; messages: unknown[]; abortSignal?: AbortSignal },
  ) => unknown;
}

/** The AI SDK's `jsonSchema(...)` wrapper: { jsonSchema (maybe a promise), validate? }. */
async function aiSdkSchema(s: unknown): Promise<{ inputSchema: unknown; jsonSchema?: Record<string, unknown> }> {
  const o = s as { jsonSchema?: unknown; validate?: unknown; "~standard"?: unknown } | null;
  if (o && typeof o === "object" && "jsonSchema" in o && !("~standard" in o) && !("_zod" in o)) {
    const json = (await o.jsonSchema) as Record<string, unknown>;
    const validate = o.validate as ((v: unknown) => unknown) | undefined;
    if (!validate) return { inputSchema: json };
    // Its own validator as a Standard Schema, shown to the model as its JSON Schema.
    return {
      jsonSchema: json,
      inputSchema: {
        "~standard": {
          version: 1,
          vendor: "ai-sdk",
          validate: async (v: unknown) => {
            const r = (await validate(v)) as { success: boolean; value?: unknown; error?: Error };
            return r.success ? { value: r.value } : { issues: [{ message: r.error?.message ?? "invalid arguments" }] };
          },
        },
      },
    };
  }
  return { inputSchema: s };
}

export async function fromAiSdkTools(tools: Record<string, unknown>, o: AdapterOptions = {}): Promise<AnyTool[]> {
  const out: AnyTool[] = [];
  let calls = 0;
  for (const [name, raw] of Object.entries(tools)) {
    const t = raw as AiSdkTool;
    if (typeof t?.execute !== "function")
      throw new InputError(`AI SDK tool '${name}' has no execute function (a client-side tool cannot run in an env)`);
    const schema = await aiSdkSchema(t.inputSchema ?? t.parameters);
    out.push(
      defineTool({
        name,
        description: t.description ?? name,
        inputSchema: schema.inputSchema as never,
        ...(schema.jsonSchema ? { jsonSchema: schema.jsonSchema } : {}),
        ...o,
        async execute(args, ctx) {
          let result = await t.execute!(args, { toolCallId: `call_${++calls}`, messages: [], abortSignal: ctx.signal });
          // A tool that streams preliminary results: its last one is the result.
          if (result && typeof result === "object" && Symbol.asyncIterator in result) {
            let last: unknown;
            for await (const part of result as AsyncIterable<unknown>) last = part;
            result = last;
          }
          return asText(result);
        },
      }),
    );
  }
  return out;
}

// ---- OpenAI Agents SDK ----

interface AgentsSdkFunctionTool {
  type: string;
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
  invoke: (runContext: unknown, input: string, details?: unknown) => Promise<unknown>;
  timeoutMs?: number;
}

/**
 * `runContext` is handed to each call (the SDK's RunContext, with your context object); by default
 * a new RunContext of `@openai/agents-core` when that package is installed.
 */
export async function fromAgentsSdkTools(
  tools: unknown[],
  o: AdapterOptions & { runContext?: unknown } = {},
): Promise<AnyTool[]> {
  let runContext = o.runContext;
  if (runContext === undefined) {
    try {
      const core = (await import("@openai/agents-core" as string)) as { RunContext: new () => unknown };
      runContext = new core.RunContext();
    } catch {
      runContext = { context: {} };
    }
  }
  return tools.map((raw, i) => {
    const t = raw as AgentsSdkFunctionTool;
    if (t?.type !== "function" || typeof t.invoke !== "function")
      throw new InputError(
        `Agents SDK tool ${i} (${t?.name ?? "unnamed"}) is not a function tool; only function tools run in an env`,
      );
    let calls = 0;
    return defineTool({
      name: t.name,
      description: t.description ?? t.name,
      inputSchema: { type: "object", ...t.parameters } as Record<string, unknown> & { type: "object" },
      ...(t.timeoutMs !== undefined ? { timeoutMs: t.timeoutMs } : {}),
      ...o,
      async execute(args) {
        return asText(await t.invoke(runContext, JSON.stringify(args), { toolCall: { callId: `call_${++calls}` } }));
      },
    });
  });
}

// ---- MCP ----

interface McpContent {
  type: string;
  text?: string;
  uri?: string;
  resource?: { uri?: string; text?: string };
}

/** A tool as an MCP server lists it. */
export interface McpToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

/** What an MCP client needs to offer (the SDK's Client does). */
export interface McpClientLike {
  listTools(params?: { cursor?: string }): Promise<{ tools: McpToolInfo[]; nextCursor?: string }>;
  callTool(
    params: { name: string; arguments?: Record<string, unknown> },
    resultSchema?: unknown,
    options?: { signal?: AbortSignal; timeout?: number },
  ): Promise<unknown>;
}

function mcpText(content: McpContent[] | undefined): string {
  return (content ?? [])
    .map((c) =>
      c.type === "text"
        ? (c.text ?? "")
        : c.type === "resource"
          ? (c.resource?.text ?? `[resource ${c.resource?.uri ?? ""}]`)
          : c.type === "resource_link"
            ? `[resource ${c.uri ?? ""}]`
            : `[${c.type}]`,
    )
    .join("\n");
}

/** At most this many pages of tools/list are read, and this many tools kept, from one server. */
export const MAX_MCP_TOOL_PAGES = 100;
export const MAX_MCP_TOOLS = 10_000;

/** "MCP server 'name'" from what the server said of itself at initialization (the SDK's Client keeps it). */
function serverLabel(client: McpClientLike): string | undefined {
  try {
    const info = (client as { getServerVersion?: () => { name?: unknown } | undefined }).getServerVersion?.();
    if (typeof info?.name === "string" && info.name) return `MCP server '${info.name.slice(0, 100)}'`;
  } catch {
    // a client that cannot say
  }
  return undefined;
}

/** Every page of tools/list, within the page and tool limits and without a cursor seen before. */
async function listAllTools(client: McpClientLike, where: string): Promise<McpToolInfo[]> {
  const listed: McpToolInfo[] = [];
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let page = 1; ; page++) {
    const r = await client.listTools(cursor ? { cursor } : undefined);
    if (!Array.isArray(r?.tools)) throw new InputError(`${where}: page ${page} of tools/list has no tools array`);
    if (listed.length + r.tools.length > MAX_MCP_TOOLS)
      throw new InputError(`${where}: lists more than ${MAX_MCP_TOOLS} tools (by page ${page} of tools/list)`);
    for (const t of r.tools) listed.push(t);
    cursor = r.nextCursor;
    if (!cursor) return listed;
    if (cursors.has(cursor))
      throw new InputError(
        `${where}: page ${page} of tools/list gives a cursor it gave before (${JSON.stringify(cursor.slice(0, 80))}); the listing would never end`,
      );
    if (page >= MAX_MCP_TOOL_PAGES)
      throw new InputError(`${where}: tools/list goes on past ${MAX_MCP_TOOL_PAGES} pages (MAX_MCP_TOOL_PAGES)`);
    cursors.add(cursor);
  }
}

/** The tools a connected MCP client lists (every page), as ours. */
export async function mcpTools(client: McpClientLike, o: AdapterOptions = {}): Promise<AnyTool[]> {
  const listed = await listAllTools(client, serverLabel(client) ?? "the MCP server");
  // The SDK's Client checks each answer against the tool's output schema: refused now, not per call.
  for (const t of listed)
    if (t.outputSchema && typeof t.outputSchema === "object")
      compileJsonSchema(t.outputSchema, `tool '${String(t.name)}'`, "the JSON Schema of its output");
  return listed.map((t) =>
    defineTool({
      name: t.name,
      description: t.description ?? t.title ?? t.name,
      inputSchema: { type: "object", ...t.inputSchema } as Record<string, unknown> & { type: "object" },
      ...o,
      async execute(args, ctx) {
        const r = (await client.callTool({ name: t.name, arguments: args }, undefined, {
          signal: ctx.signal,
          ...(o.timeoutMs !== undefined ? { timeout: o.timeoutMs } : {}),
        })) as { content?: McpContent[]; isError?: boolean; structuredContent?: unknown };
        const text = mcpText(r.content) || (r.structuredContent !== undefined ? asText(r.structuredContent) : "");
        if (r.isError) throw new Error(text || "the MCP tool reported an error");
        return text;
      },
    }),
  );
}

/** How the SDK's Client checks an answer against its tool's output schema: with linear-time patterns. */
export const linearJsonSchemaValidator = {
  getValidator(schema: Record<string, unknown>) {
    let check: (value: unknown) => string | null;
    try {
      check = compileJsonSchema(schema, "MCP tool", "the JSON Schema of its output");
    } catch (err) {
      const message = (err as Error).message;
      check = () => message;
    }
    return (input: unknown) => {
      const error = check(input);
      return error === null
        ? { valid: true as const, data: input, errorMessage: undefined }
        : { valid: false as const, data: undefined, errorMessage: error };
    };
  },
};

/** `maxMessageBytes` (default 10 MiB): a larger answer fails its call; the connection stays. */
export type McpServerSpec =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string; maxMessageBytes?: number }
  | { url: string; headers?: Record<string, string>; maxMessageBytes?: number };

/** A URL as errors show it: without credentials, query or fragment. */
function urlLabel(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InputError(`MCP server url: not a valid URL`);
  }
  return `${u.origin}${u.pathname}`;
}

/** A connected MCP client over stdio (a command) or streamable HTTP (a URL); close it with `client.close()`. */
export async function connectMcp(
  spec: McpServerSpec,
  name = "agent-r1",
): Promise<McpClientLike & { close(): Promise<void> }> {
  type Sdk = {
    Client: new (
      info: { name: string; version: string },
      options: { jsonSchemaValidator: typeof linearJsonSchemaValidator },
    ) => McpClientLike & { connect(t: unknown): Promise<void>; close(): Promise<void> };
  };
  let sdk: Sdk;
  try {
    sdk = (await import("@modelcontextprotocol/sdk/client/index.js" as string)) as Sdk;
  } catch {
    throw new InputError("MCP tools need the MCP SDK", "npm install @modelcontextprotocol/sdk");
  }
  const where = `MCP server ${"command" in spec ? `${spec.command} ${(spec.args ?? []).join(" ")}`.trim() : urlLabel(spec.url)}`;
  // A call's error names the server by its own name once it has said it (the model reads that error).
  let label = where;
  // Node-only (child processes), so loaded here, as the SDK is.
  const { cappedFetch, DEFAULT_MAX_MESSAGE_BYTES, StdioTransport } = await import("./mcp-transports.js");
  const maxMessageBytes = spec.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  if (!(Number.isInteger(maxMessageBytes) && maxMessageBytes > 0))
    throw new InputError(`${where}: maxMessageBytes must be a positive integer, got ${maxMessageBytes}`);
  const client = new sdk.Client({ name, version: "0.1.0" }, { jsonSchemaValidator: linearJsonSchemaValidator });
  let transport: unknown;
  let stdio: StdioTransport | undefined;
  if ("command" in spec) {
    const [{ getDefaultEnvironment }, { deserializeMessage }] = (await Promise.all([
      import("@modelcontextprotocol/sdk/client/stdio.js" as string),
      import("@modelcontextprotocol/sdk/shared/stdio.js" as string),
    ])) as [{ getDefaultEnvironment(): Record<string, string> }, { deserializeMessage(line: string): unknown }];
    transport = stdio = new StdioTransport(spec, {
      label: () => label,
      maxMessageBytes,
      parse: deserializeMessage,
      env: getDefaultEnvironment(),
    });
  } else {
    const { StreamableHTTPClientTransport } = (await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js" as string
    )) as {
      StreamableHTTPClientTransport: new (url: URL, o?: object) => unknown;
    };
    transport = new StreamableHTTPClientTransport(new URL(spec.url), {
      fetch: cappedFetch(() => label, maxMessageBytes),
      ...(spec.headers ? { requestInit: { headers: spec.headers } } : {}),
    });
  }
  try {
    await client.connect(transport);
  } catch (e) {
    await client.close().catch(() => {});
    const stderr = stdio?.lastStderrLine();
    let detail = (e as Error).message.split("\n")[0];
    if ("url" in spec) detail = detail.split(spec.url).join(urlLabel(spec.url)); // no credentials in errors
    throw new InputError(`${where}: ${detail}${stderr ? `; its stderr says: ${stderr}` : ""}`);
  }
  label = serverLabel(client) ?? where;
  return client;
}
