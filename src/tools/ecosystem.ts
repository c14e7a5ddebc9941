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
 */
import { defineTool, type AnyTool } from "../agent/tool.js";
import { InputError } from "../util/errors.js";

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

/** What an MCP client needs to offer (the SDK's Client does). */
export interface McpClientLike {
  listTools(params?: { cursor?: string }): Promise<{
    tools: { name: string; title?: string; description?: string; inputSchema: Record<string, unknown> }[];
    nextCursor?: string;
  }>;
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

/** The tools a connected MCP client lists (every page), as ours. */
export async function mcpTools(client: McpClientLike, o: AdapterOptions = {}): Promise<AnyTool[]> {
  const listed: Awaited<ReturnType<McpClientLike["listTools"]>>["tools"] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    listed.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
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

export type McpServerSpec =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }
  | { url: string; headers?: Record<string, string> };

/** A connected MCP client over stdio (a command) or streamable HTTP (a URL); close it with `client.close()`. */
export async function connectMcp(
  spec: McpServerSpec,
  name = "agent-r1",
): Promise<McpClientLike & { close(): Promise<void> }> {
  type Sdk = {
    Client: new (info: {
      name: string;
      version: string;
    }) => McpClientLike & { connect(t: unknown): Promise<void>; close(): Promise<void> };
  };
  let sdk: Sdk;
  try {
    sdk = (await import("@modelcontextprotocol/sdk/client/index.js" as string)) as Sdk;
  } catch {
    throw new InputError("MCP tools need the MCP SDK", "npm install @modelcontextprotocol/sdk");
  }
  const client = new sdk.Client({ name, version: "0.1.0" });
  let transport: unknown;
  if ("command" in spec) {
    const { StdioClientTransport } = (await import("@modelcontextprotocol/sdk/client/stdio.js" as string)) as {
      StdioClientTransport: new (o: object) => unknown;
    };
    transport = new StdioClientTransport({
      command: spec.command,
      args: spec.args ?? [],
      env: spec.env,
      cwd: spec.cwd,
      stderr: "pipe",
    });
  } else {
    const { StreamableHTTPClientTransport } = (await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js" as string
    )) as {
      StreamableHTTPClientTransport: new (url: URL, o?: object) => unknown;
    };
    transport = new StreamableHTTPClientTransport(
      new URL(spec.url),
      spec.headers ? { requestInit: { headers: spec.headers } } : {},
    );
  }
  try {
    await client.connect(transport);
  } catch (e) {
    const where = "command" in spec ? `${spec.command} ${(spec.args ?? []).join(" ")}`.trim() : spec.url;
    throw new InputError(`MCP server ${where}: ${(e as Error).message.split("\n")[0]}`);
  }
  return client;
}
