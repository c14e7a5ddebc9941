/**
 * A trajectory as the text a judge reads: each turn's assistant text, the tools it called with
 * their arguments and what came back (or, for an env that reports no tool calls, the observation),
 * and how the episode ended; the last assistant turn is the answer. Special tokens are left out. A
 * text over its budget keeps its start and its end (where the answer is) with a marker between, so
 * the judge always sees the question's first moves and the final answer.
 */
import type { Trajectory, TrajectoryStep } from "../agent/trajectory.js";
import type { ToolCallRecord } from "../agent/tool-runner.js";
import type { ChatMessage } from "../model/chat-template.js";

/** What rendering needs of a tokenizer. */
export interface TextDecoderLike {
  decode(ids: number[], opts?: { skipSpecialTokens?: boolean }): string;
}

/** `text` within `maxChars`: as it is, or its start and end around a marker saying how much was cut. */
export function truncateMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const marker = (cut: number) => `\n[... ${cut} characters cut ...]\n`;
  const room = maxChars - marker(text.length).length;
  if (room <= 0) return text.slice(text.length - maxChars);
  const head = Math.floor(room * 0.4);
  const tail = room - head;
  return `${text.slice(0, head)}${marker(text.length - room)}${text.slice(text.length - tail)}`;
}

function toolLine(c: ToolCallRecord): string {
  const args = c.arguments === null ? c.raw : JSON.stringify(c.arguments);
  const head = `tool ${c.name ?? "(unreadable call)"} ${args}`;
  return c.ok ? `${head} ->\n${c.text}` : `${head} -> error (${c.error?.kind ?? "tool_error"}):\n${c.text}`;
}

function stepLines(s: TrajectoryStep, i: number, last: boolean, tokenizer: TextDecoderLike): string[] {
  const turn = `[turn ${i + 1}]`;
  const said = tokenizer.decode(s.action, { skipSpecialTokens: true }).trim();
  const lines = [`${turn} assistant${last ? " (final turn)" : ""}:`, said === "" ? "(nothing)" : said];
  if (s.toolCalls.length > 0) for (const c of s.toolCalls) lines.push(`${turn} ${toolLine(c)}`);
  else if (s.observation.length > 0) {
    const seen = tokenizer.decode(s.observation, { skipSpecialTokens: true }).trim();
    if (seen !== "") lines.push(`${turn} observation:`, seen);
  }
  return lines;
}

/** One trajectory as text, at most `maxChars` characters. */
export function renderTrajectory(t: Trajectory, tokenizer: TextDecoderLike, maxChars: number): string {
  const lines = t.steps.flatMap((s, i) => stepLines(s, i, i === t.steps.length - 1, tokenizer));
  lines.push(`[end] ${t.endReason === "done" ? "the episode ended with the final turn" : `cut off (${t.endReason})`}`);
  return truncateMiddle(lines.join("\n"), maxChars);
}

/** The task a group of trajectories answered: its prompt's messages except the system's, at most `maxChars`. */
export function renderTask(prompt: readonly ChatMessage[], maxChars: number): string {
  const text = prompt
    .filter((m) => m.role !== "system")
    .map((m) => `${m.role}: ${m.content}`)
    .join("\n");
  return truncateMiddle(text === "" ? "(no prompt besides the system message)" : text, maxChars);
}
