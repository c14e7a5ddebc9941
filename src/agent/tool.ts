/**
 * Tools in the style of TypeScript agent libraries:
 *   defineTool({ name, description, inputSchema: z.object({...}), execute: async (args, ctx) => "text" })
 * `inputSchema` may also be any Standard Schema validator or a plain JSON Schema object
 * (./tool-schema.ts). `execute` returns text, or `{ text, reward, metadata }` where `reward` is a
 * process reward for that call. The runtime validates arguments against the schema before
 * `execute` runs (see tool-runner.ts).
 */
import type { z } from "zod";
import type { ToolSchema } from "../model/chat-template.js";
import { InputError } from "../util/errors.js";
import {
  argumentSchema,
  type AnySchema,
  type JsonSchemaObject,
  type StandardSchemaV1,
  type ValidationResult,
} from "./tool-schema.js";

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
  /** The schema the tool was defined with: zod, a Standard Schema validator, or JSON Schema. */
  readonly inputSchema: AnySchema;
  /** The arguments as JSON Schema (an object schema): what the chat template lists. */
  readonly parameters: Record<string, unknown>;
  /** Checks (and, for validators that transform, converts) the model's arguments. */
  validate(args: unknown): Promise<ValidationResult<Args>>;
  readonly timeoutMs: number;
  /** Longer responses are cut to this many characters, with a marker saying how many were dropped. */
  readonly maxResponseChars: number;
  execute(args: Args, ctx: ToolContext): Promise<string | ToolOutput>;
}

// Tool<Args> is invariant in Args (the schema); collections hold any tool.
export type AnyTool = Tool<any>;

/** The arguments a schema describes: zod's output type, a Standard Schema's output, or `Record<string, unknown>` for JSON Schema. */
export type SchemaOutput<S> = S extends z.ZodType
  ? z.output<S>
  : S extends StandardSchemaV1<infer O>
    ? O
    : Record<string, unknown>;

export interface ToolDefinition<S extends AnySchema> {
  name: string;
  description: string;
  inputSchema: S;
  /** The JSON Schema of the arguments, for a Standard Schema validator that cannot say it itself. */
  jsonSchema?: Record<string, unknown>;
  execute: (args: SchemaOutput<S>, ctx: ToolContext) => Promise<string | ToolOutput> | string | ToolOutput;
  timeoutMs?: number;
  maxResponseChars?: number;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

export function defineTool<S extends AnySchema>(def: ToolDefinition<S>): Tool<SchemaOutput<S>> {
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
  // Fails now, at definition, when the schema is not an object schema.
  const schema = argumentSchema<SchemaOutput<S>>(def.inputSchema, where, def.jsonSchema);
  return {
    name: def.name,
    description: def.description,
    inputSchema: def.inputSchema,
    parameters: schema.parameters,
    validate: (args) => schema.validate(args),
    timeoutMs,
    maxResponseChars,
    execute: async (args, ctx) => def.execute(args, ctx),
  };
}

/** The OpenAI-style function schema the chat template lists under `tools`. */
export function toolSchema(tool: AnyTool): ToolSchema {
  return {
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  };
}

export type { AnySchema, JsonSchemaObject, StandardSchemaV1 };

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
