/**
 * Comparing conversations as the chat template sees them: a message by role, trimmed content and
 * tool calls (name and parsed arguments, key order aside), and a tool list by its canonical JSON.
 * The recorder (episode-recorder.ts) uses them to tell a request that extends its episode from one
 * that rewrote it, and a client's retry (the same request again) from both.
 */
import type { AgentMessage } from "../agent/chat-setup.js";
import type { ToolSchema } from "../model/chat-template.js";

/** A message compared as the template sees it: role, content, tool calls by name and parsed arguments. */
export function sameMessage(a: AgentMessage, b: AgentMessage): boolean {
  if (a.role !== b.role || (a.content ?? "").trim() !== (b.content ?? "").trim()) return false;
  const ca = a.tool_calls ?? [],
    cb = b.tool_calls ?? [];
  if (ca.length !== cb.length) return false;
  return ca.every(
    (c, i) =>
      c.function.name === cb[i].function.name &&
      canonical(c.function.arguments) === canonical(cb[i].function.arguments),
  );
}

/** JSON with object keys sorted, so two values that differ only in key order give the same text. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

/** A tool list as text, for telling whether two requests offer the same tools. */
export const toolsKey = (tools?: ToolSchema[]): string => canonical(tools ?? []);

/** What makes two chat completion requests the same ask. */
interface RequestParts {
  messages: readonly AgentMessage[];
  tools?: ToolSchema[];
  forced?: string;
  stop?: string[];
  templateVars?: Record<string, unknown>;
}

/** Whether `b` asks exactly what `a` asked (a client's retry); the next turn has more messages, so it is told apart at once. */
export function sameRequest(a: RequestParts, b: RequestParts): boolean {
  if (a.messages.length !== b.messages.length) return false;
  const key = (r: RequestParts) =>
    JSON.stringify([r.messages, r.tools ?? null, r.forced ?? "", r.stop ?? [], r.templateVars ?? {}]);
  return key(a) === key(b);
}
