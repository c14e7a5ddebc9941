/**
 * Tools in the style of TypeScript agent libraries:
 *   defineTool({ name, description, inputSchema: z.object({...}), execute: async (args, ctx) => "text" })
 * `execute` returns text, or `{ text, reward, metadata }` where `reward` is a
 * process reward for that call. The runtime validates arguments against
 * `inputSchema` before `execute` runs (see tool-runner.ts).
 */
import { z } from "zod";
import type { ToolSchema } from "../model/chat-template.js";
import { InputError } from "../util/errors.js";

export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RESPONSE_CHARS = 8_192;

export interface ToolContext<Row = unknown> {
  /** Aborts when the call times out: hand it to fetch, child processes, timers. */
  signal: AbortSignal;
  /** The dataset row the env was reset with. */
  row: Row;
  /** The row's ground truth when the env knows where it is (Agent-R1 rows: reward_model.ground_truth). */
  groundTruth: unknown;
  /** 0-based index of this call among the trajectory's calls, and the turn that made it. */
  callIndex: number;
  turn: number;
}

export interface ToolOutput {
  text: string;
  /** Process reward for this call; lands on the step whose action made it. */
  reward?: number;
  metadata?: Record<string, unknown>;
}

export interface Tool<Args = unknown> {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: z.ZodType<Args>;
  readonly timeoutMs: number;
  /** Longer responses are cut to this many characters, with a marker saying how many were dropped. */
  readonly maxResponseChars: number;
  execute(args: Args, ctx: ToolContext): Promise<string | ToolOutput>;
}

// Tool<Args> is invariant in Args (the schema); collections hold any tool.
export type AnyTool = Tool<any>;

export interface ToolDefinition<S extends z.ZodType> {
  name: string;
  description: string;
  inputSchema: S;
  execute: (args: z.output<S>, ctx: ToolContext) => Promise<string | ToolOutput> | string | ToolOutput;
  timeoutMs?: number;
  maxResponseChars?: number;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

export function defineTool<S extends z.ZodType>(def: ToolDefinition<S>): Tool<z.output<S>> {
  const where = `tool '${String(def.name)}'`;
  if (typeof def.name !== "string" || !NAME.test(def.name)) {
    throw new InputError(
      `${where}: name must match ${NAME.source}`,
      "use letters, digits, '_', '.' or '-', starting with a letter or '_'",
    );
  }
  if (typeof def.description !== "string" || def.description.trim() === "")
    throw new InputError(`${where}: description must be a non-empty string`);
  if (typeof def.execute !== "function") throw new InputError(`${where}: execute must be a function`);
  const timeoutMs = def.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  if (!(timeoutMs > 0 && Number.isFinite(timeoutMs)))
    throw new InputError(`${where}: timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`);
  const maxResponseChars = def.maxResponseChars ?? DEFAULT_MAX_RESPONSE_CHARS;
  if (!(Number.isInteger(maxResponseChars) && maxResponseChars > 0))
    throw new InputError(`${where}: maxResponseChars must be a positive integer, got ${maxResponseChars}`);
  const tool: Tool<z.output<S>> = {
    name: def.name,
    description: def.description,
    inputSchema: def.inputSchema as z.ZodType<z.output<S>>,
    timeoutMs,
    maxResponseChars,
    execute: async (args, ctx) => def.execute(args, ctx),
  };
  toolSchema(tool); // fails now, at definition, when the schema is not an object schema
  return tool;
}

const schemas = new WeakMap<object, ToolSchema>();

/** The OpenAI-style function schema the chat template lists under `tools`. */
export function toolSchema(tool: AnyTool): ToolSchema {
  let s = schemas.get(tool);
  if (s) return s;
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(tool.inputSchema, { io: "input" }) as Record<string, unknown>;
  } catch (err) {
    throw new InputError(
      `tool '${tool.name}': inputSchema cannot be written as JSON Schema: ${(err as Error).message}`,
      "avoid transforms and custom types in inputSchema",
    );
  }
  if (json.type !== "object")
    throw new InputError(
      `tool '${tool.name}': inputSchema must be an object schema (z.object), got type ${JSON.stringify(json.type)}`,
    );
  delete json.$schema;
  s = { type: "function", function: { name: tool.name, description: tool.description, parameters: json } };
  schemas.set(tool, s);
  return s;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text that can be encoded: each lone UTF-16 surrogate (text that is not valid
 * Unicode, e.g. from slicing a string mid-pair or from binary data) becomes
 * U+FFFD, the replacement character a UTF-8 encoder would write for it anyway.
 * So what a tool returned, what is recorded and what the model reads agree.
 */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, "\uFFFD");
}

/** Cuts text to `max` characters (never inside a surrogate pair) and says how much was dropped. */
export function truncateResponse(text: string, max: number): string {
  if (text.length <= max) return text;
  let cut = max;
  const code = text.charCodeAt(cut - 1);
  if (code >= 0xd800 && code <= 0xdbff) cut--;
  return `${text.slice(0, cut)}\n[truncated: ${text.length - cut} more characters]`;
}
