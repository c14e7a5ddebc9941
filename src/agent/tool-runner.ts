/**
 * Runs one parsed tool call against a tool set and always returns a record:
 * an unreadable call, an unknown tool, arguments that fail the schema, a
 * timeout and a thrown exception each become error text the model reads.
 * Whatever a tool returns or throws, the text is made well-formed (lone
 * surrogates become U+FFFD) and cut to the tool's maxResponseChars with a
 * marker; a tool that ignores its abort signal is still abandoned at the
 * timeout (a late result or rejection is ignored).
 */
import type { AnyTool, ToolContext, ToolOutput } from "./tool.js";
import { DEFAULT_MAX_RESPONSE_CHARS, truncateResponse, wellFormed } from "./tool.js";
import type { ParsedToolCall } from "./formats/types.js";
import { describeThrown } from "../util/describe-thrown.js";

export const TOOL_ERROR_KINDS = ["parse_error", "unknown_tool", "invalid_arguments", "timeout", "tool_error"] as const;
export type ToolErrorKind = (typeof TOOL_ERROR_KINDS)[number];

export interface ToolCallRecord {
  /** Index among the trajectory's calls, and the turn that made the call. */
  index: number;
  turn: number;
  /** null when the call could not be parsed far enough to name a tool. */
  name: string | null;
  /** Arguments as the model wrote them (null when unreadable). */
  arguments: Record<string, unknown> | null;
  /** The call's text in the action. */
  raw: string;
  ok: boolean;
  error?: { kind: ToolErrorKind; message: string };
  /** What the model reads back. */
  text: string;
  reward?: number;
  metadata?: Record<string, unknown>;
  /** Wall clock (epoch ms) when the call started, and its duration. */
  startedAt: number;
  durationMs: number;
}

export interface CallContext {
  row: unknown;
  groundTruth: unknown;
  callIndex: number;
  turn: number;
  /** Appended to parse errors: how this format writes a call. */
  usage: string;
}

const TIMEOUT = Symbol("timeout");

/** Accepts text or { text, reward?, metadata? }; anything else is the tool's bug, reported as such. */
function checkOutput(out: unknown): ToolOutput | string {
  if (typeof out === "string") return { text: out };
  if (typeof out !== "object" || out === null || typeof (out as ToolOutput).text !== "string") {
    return `returned ${out === null ? "null" : typeof out}; expected a string or { text, reward?, metadata? }`;
  }
  const o = out as ToolOutput;
  if (o.reward !== undefined && !(typeof o.reward === "number" && Number.isFinite(o.reward)))
    return `returned a non-finite reward (${String(o.reward)})`;
  return o;
}

async function executeWithTimeout(tool: AnyTool, args: unknown, ctx: Omit<ToolContext, "signal">): Promise<unknown> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMEOUT>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`tool '${tool.name}' timed out after ${tool.timeoutMs} ms`));
      resolve(TIMEOUT);
    }, tool.timeoutMs);
  });
  try {
    // .then() so that a synchronous throw in execute is caught like a rejection.
    const run = Promise.resolve().then(() => tool.execute(args, { ...ctx, signal: controller.signal }));
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export async function runToolCall(
  call: ParsedToolCall,
  tools: ReadonlyMap<string, AnyTool>,
  ctx: CallContext,
): Promise<ToolCallRecord> {
  const startedAt = Date.now(),
    t0 = performance.now();
  const base = { index: ctx.callIndex, turn: ctx.turn, raw: call.raw, startedAt };
  const fail = (
    kind: ToolErrorKind,
    message: string,
    name: string | null,
    args: Record<string, unknown> | null,
  ): ToolCallRecord => {
    const max = (name !== null ? tools.get(name)?.maxResponseChars : undefined) ?? DEFAULT_MAX_RESPONSE_CHARS;
    const clean = truncateResponse(wellFormed(message), max);
    return {
      ...base,
      name,
      arguments: args,
      ok: false,
      error: { kind, message: clean },
      text: truncateResponse(`Error: ${clean}`, max),
      durationMs: performance.now() - t0,
    };
  };
  if (!call.ok)
    return fail("parse_error", `could not parse tool call: ${call.error}. ${ctx.usage}`, call.name ?? null, null);
  const tool = tools.get(call.name);
  if (!tool) {
    const available = [...tools.keys()].join(", ") || "(none)";
    return fail(
      "unknown_tool",
      `unknown tool '${call.name}'. Available tools: ${available}.`,
      call.name,
      call.arguments,
    );
  }
  let parsed: Awaited<ReturnType<typeof tool.validate>>;
  try {
    parsed = await tool.validate(call.arguments);
  } catch (err) {
    return fail(
      "tool_error",
      `tool '${tool.name}' could not check its arguments: ${describeThrown(err, true)}`,
      tool.name,
      call.arguments,
    );
  }
  if (!parsed.success)
    return fail(
      "invalid_arguments",
      `invalid arguments for tool '${tool.name}': ${parsed.error}.`,
      tool.name,
      call.arguments,
    );
  let out: unknown;
  try {
    out = await executeWithTimeout(tool, parsed.data, {
      row: ctx.row,
      groundTruth: ctx.groundTruth,
      callIndex: ctx.callIndex,
      turn: ctx.turn,
    });
  } catch (err) {
    return fail("tool_error", `tool '${tool.name}' failed: ${describeThrown(err, true)}`, tool.name, call.arguments);
  }
  if (out === TIMEOUT)
    return fail("timeout", `tool '${tool.name}' timed out after ${tool.timeoutMs} ms.`, tool.name, call.arguments);
  const checked = checkOutput(out);
  if (typeof checked === "string")
    return fail("tool_error", `tool '${tool.name}' ${checked}`, tool.name, call.arguments);
  return {
    ...base,
    name: tool.name,
    arguments: call.arguments,
    ok: true,
    text: truncateResponse(wellFormed(checked.text), tool.maxResponseChars),
    ...(checked.reward !== undefined ? { reward: checked.reward } : {}),
    ...(checked.metadata !== undefined ? { metadata: checked.metadata } : {}),
    durationMs: performance.now() - t0,
  };
}

/** Error counts by kind, every kind present (zeros included) so metrics line up across steps. */
export function countToolErrors(records: readonly ToolCallRecord[]): Record<ToolErrorKind, number> {
  const counts = Object.fromEntries(TOOL_ERROR_KINDS.map((k) => [k, 0])) as Record<ToolErrorKind, number>;
  for (const r of records) if (r.error) counts[r.error.kind]++;
  return counts;
}
