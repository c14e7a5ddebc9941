/**
 * A tool-call format: how a model writes tool calls (parser + writer) and how
 * results go back to it (messages in the roles its chat template expects).
 * Parsing never throws: a call that cannot be read becomes `{ ok: false }`.
 */
import type { AgentMessage } from "../chat-setup.js";

export type ParsedToolCall =
  | { ok: true; name: string; arguments: Record<string, unknown>; raw: string }
  /** `name` is set when the call was readable enough to name its tool. */
  | { ok: false; error: string; raw: string; name?: string };

export interface ParsedAction {
  /** The action's text outside tool calls, trimmed. */
  content: string;
  calls: ParsedToolCall[];
}

export interface ToolResultText {
  /** null when the call could not be parsed far enough to name a tool. */
  name: string | null;
  text: string;
}

export interface ToolCallFormat {
  readonly name: string;
  /** Finds every tool call in an action's text (the end-of-turn token already removed). */
  parse(text: string): ParsedAction;
  /** One call as the model should write it (docs, scripted tests, few-shot prompts). */
  write(call: { name: string; arguments: Record<string, unknown> }): string;
  /** Joins several written calls into one action text. */
  join(calls: string[]): string;
  /** The messages that carry a turn's results back, in call order. */
  resultMessages(results: ToolResultText[]): AgentMessage[];
  /** The action as a structured chat message (tool_calls), as an API server would store it. */
  assistantMessage(text: string): AgentMessage;
  /** One line telling the model how to write a call, appended to parse errors. */
  readonly usage: string;
}

export const isOk = (c: ParsedToolCall): c is Extract<ParsedToolCall, { ok: true }> => c.ok;

/**
 * Checks a decoded call object: a string `name` and an arguments object under
 * one of `argKeys` (a JSON string holding an object is accepted, as chat
 * templates accept both). Anything else is an error, never `{}`.
 */
export function callFromJson(value: unknown, argKeys: readonly string[], raw: string): ParsedToolCall {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return {
      ok: false,
      raw,
      error: `expected a JSON object, got ${Array.isArray(value) ? "an array" : typeof value === "object" ? "null" : typeof value}`,
    };
  }
  const obj = value as Record<string, unknown>;
  if (typeof obj.name !== "string" || obj.name.length === 0)
    return { ok: false, raw, error: 'missing "name" (a non-empty string)' };
  const name = obj.name;
  const key = argKeys.find((k) => k in obj);
  if (key === undefined)
    return { ok: false, raw, name, error: `missing ${argKeys.map((k) => `"${k}"`).join(" or ")} (an object)` };
  let args = obj[key];
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch (err) {
      return { ok: false, raw, name, error: `"${key}" is a string that is not valid JSON: ${(err as Error).message}` };
    }
  }
  if (typeof args !== "object" || args === null || Array.isArray(args))
    return { ok: false, raw, name, error: `"${key}" must be an object` };
  return { ok: true, name, arguments: args as Record<string, unknown>, raw };
}
