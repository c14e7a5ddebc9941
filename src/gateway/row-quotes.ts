/**
 * Which row a conversation is about, told by what it quotes: the longer strings of a task row (its
 * question, its prompt messages), at most a few dozen. The gateway uses it to catch a conversation of
 * one row arriving at another row's episode (a client shared across episodes) without ever taking
 * two unrelated conversations of one agent for a mix: a request counts as another row's only when it
 * quotes that row and nothing of its own.
 */
import type { AgentMessage } from "../agent/chat-setup.js";

/** Strings shorter than this say too little about a row to tell rows apart. */
const MIN_CHARS = 12;
const MAX_QUOTES = 32;

/** The strings of `row` (depth-first, at most 4 levels deep) that are long enough to identify it. */
export function rowQuotes(row: unknown): string[] {
  const out = new Set<string>();
  const walk = (v: unknown, depth: number) => {
    if (out.size >= MAX_QUOTES) return;
    if (typeof v === "string") {
      const s = v.trim();
      if (s.length >= MIN_CHARS) out.add(s.length > 200 ? s.slice(0, 200) : s);
    } else if (v && typeof v === "object" && depth < 4)
      for (const x of Array.isArray(v) ? v : Object.values(v)) walk(x, depth + 1);
  };
  walk(row, 0);
  return [...out];
}

/** The text of a conversation, for quote look-ups. */
export const conversationText = (messages: AgentMessage[]): string => messages.map((m) => m.content ?? "").join("\n");
