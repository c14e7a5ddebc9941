/**
 * The `tools` a task module exports, as ours (src/agent/tool.ts), whatever library wrote them:
 *   - a list, each one of: a tool of ours (`defineTool`), an OpenAI Agents SDK function tool
 *     (`tool({ name, parameters, execute })`), or a plain tool `{ name, description, inputSchema,
 *     execute }` whose inputSchema is JSON Schema (or zod, or any Standard Schema);
 *   - a record of name -> tool: Vercel AI SDK tools (`tool({ description, inputSchema, execute })`),
 *     or tools of ours under any key.
 * A thing that is none of these is an error naming it (`tools[2]`, `tools.search`).
 */
import { defineTool, type AnyTool, type ToolOutput } from "../agent/tool.js";
import { fromAgentsSdkTools, fromAiSdkTools } from "../tools/ecosystem.js";
import { InputError } from "../util/errors.js";

type Obj = Record<string, unknown>;
const isObject = (x: unknown): x is Obj => x !== null && typeof x === "object" && !Array.isArray(x);

/** A tool `defineTool` made (read by shape: a copy of the package loaded twice is still ours). */
function isOurs(x: Obj): boolean {
  return (
    typeof x.name === "string" &&
    typeof x.validate === "function" &&
    typeof x.execute === "function" &&
    isObject(x.parameters) &&
    typeof x.timeoutMs === "number" &&
    typeof x.maxResponseChars === "number"
  );
}

const isAgentsSdkTool = (x: Obj) => x.type === "function" && typeof x.invoke === "function";

/** What a plain tool's execute returned, as a tool result: text, `{ text, reward }`, or anything else as JSON. */
function asResult(out: unknown): string | ToolOutput {
  if (typeof out === "string") return out;
  if (isObject(out) && typeof out.text === "string") return out as unknown as ToolOutput;
  if (out === undefined) return "";
  try {
    return JSON.stringify(out);
  } catch {
    return String(out);
  }
}

/** `{ name, description, inputSchema | parameters, execute }` through defineTool (which checks every field). */
function plainTool(x: Obj): AnyTool {
  const execute = x.execute as (args: unknown, ctx: unknown) => unknown;
  return defineTool({
    name: x.name as string,
    description: typeof x.description === "string" ? x.description : (x.name as string),
    inputSchema: (x.inputSchema ?? x.parameters) as never,
    ...(typeof x.timeoutMs === "number" ? { timeoutMs: x.timeoutMs } : {}),
    ...(typeof x.maxResponseChars === "number" ? { maxResponseChars: x.maxResponseChars } : {}),
    execute: async (args, ctx) => asResult(await execute(args, ctx)),
  });
}

async function listItem(x: unknown, where: string): Promise<AnyTool> {
  if (isObject(x)) {
    if (isOurs(x)) return x as unknown as AnyTool;
    if (isAgentsSdkTool(x)) return (await fromAgentsSdkTools([x]))[0];
    if (typeof x.name === "string" && typeof x.execute === "function") return plainTool(x);
  }
  throw new InputError(
    `${where} is not a tool`,
    "a list holds defineTool(...) tools, Agents SDK function tools, or { name, description, inputSchema, execute }; AI SDK tools go in a record { name: tool(...) }",
  );
}

/** The module's tools as ours, in the order it gives them. */
export async function moduleTools(tools: unknown, where: string): Promise<AnyTool[]> {
  const out: AnyTool[] = [];
  try {
    if (Array.isArray(tools)) {
      for (const [i, t] of tools.entries()) out.push(await listItem(t, `${where}: tools[${i}]`));
    } else if (isObject(tools)) {
      for (const [key, t] of Object.entries(tools)) {
        if (isObject(t) && isOurs(t)) out.push(t as unknown as AnyTool);
        else if (isObject(t)) out.push(...(await fromAiSdkTools({ [key]: t })));
        else throw new InputError(`${where}: tools.${key} is not a tool`);
      }
    } else throw new InputError(`${where}: tools must be a list of tools, or a record of name -> AI SDK tool`);
  } catch (e) {
    if (e instanceof InputError && !e.message.startsWith(where)) throw new InputError(`${where}: ${e.message}`, e.hint);
    throw e;
  }
  if (out.length === 0) throw new InputError(`${where}: tools is empty`);
  return out;
}
