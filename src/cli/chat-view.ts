/**
 * How `agent-r1 chat` shows an episode: one labelled block per event, the
 * label set apart (and colored when the output is a terminal).
 *
 *   you> What is 6*7?
 *   assistant> <think>multiply</think> <tool_call>...</tool_call>
 *   tool call> calculator {"expression":"6*7"}
 *   tool> 42
 *   assistant> <answer>42</answer>
 *   answer> 42
 *
 * Continuation lines of a multi-line text are indented under the first.
 */
import type { ToolCallRecord } from "../agent/tool-runner.js";
import type { Trajectory } from "../agent/trajectory.js";

export const LABELS = {
  you: "you>",
  assistant: "assistant>",
  call: "tool call>",
  tool: "tool>",
  answer: "answer>",
  error: "error>",
} as const;

const ANSI = { assistant: "36", call: "33", tool: "32", error: "31", answer: "1;35", you: "1", dim: "2" } as const;

export function paint(text: string, code: string, color: boolean): string {
  return color ? `\x1b[${code}m${text}\x1b[0m` : text;
}

/** `label text`, later lines of the text indented to line up under the first. */
export function block(label: string, text: string, code: string, color: boolean): string[] {
  const lines = text.replace(/\s+$/, "").split("\n");
  const pad = " ".repeat(label.length + 1);
  return lines.map((l, i) => (i === 0 ? `${paint(label, code, color)} ${l}` : `${pad}${l}`));
}

export function questionLines(question: string, color: boolean): string[] {
  return block(LABELS.you, question, ANSI.you, color);
}

/** One assistant turn's text as the model wrote it (tool calls and tags included). */
export function assistantLines(text: string, stopReason: string, color: boolean): string[] {
  const shown = text.trim() === "" ? "(empty turn)" : text;
  const lines = block(LABELS.assistant, shown, ANSI.assistant, color);
  if (stopReason === "length") lines[lines.length - 1] += ` ${paint("[cut: max tokens per turn]", ANSI.dim, color)}`;
  return lines;
}

/** A tool call (name and arguments, or what could not be parsed) and the text the model got back. */
export function toolCallLines(call: ToolCallRecord, color: boolean): string[] {
  const what =
    call.name === null
      ? `(unreadable call) ${call.raw.trim()}`
      : `${call.name} ${call.arguments === null ? call.raw.trim() : JSON.stringify(call.arguments)}`;
  const result = block(
    LABELS.tool,
    call.text === "" ? "(empty response)" : call.text,
    call.ok ? ANSI.tool : ANSI.error,
    color,
  );
  return [...block(LABELS.call, what, ANSI.call, color), ...result];
}

/** The final answer of an episode, or why there is none. */
export function answerLines(t: Trajectory, color: boolean): string[] {
  if (t.endReason === "failed")
    return block(
      LABELS.error,
      `the episode failed: ${t.error ? `${t.error.stage}: ${t.error.name}: ${t.error.message}` : "unknown error"}`,
      ANSI.error,
      color,
    );
  const answer = t.steps[t.steps.length - 1]?.info.answer;
  if (t.endReason === "done" && typeof answer === "string")
    return block(LABELS.answer, answer.trim() === "" ? "(empty answer)" : answer.trim(), ANSI.answer, color);
  const why =
    t.endReason === "done"
      ? "the model ended its turn without an <answer>...</answer>"
      : t.endReason === "max_turns"
        ? `stopped after ${t.steps.length} turns (--max-turns)`
        : "stopped at the context limit";
  return block(LABELS.answer, `(none: ${why})`, ANSI.answer, color);
}

/** A whole finished trajectory, for when it was not shown live: each turn's text, its calls and results, the answer. */
export function trajectoryLines(t: Trajectory, actionTexts: string[], color: boolean): string[] {
  const lines: string[] = [];
  t.steps.forEach((s, i) => {
    lines.push(...assistantLines(actionTexts[i] ?? "", s.stopReason, color));
    for (const c of s.toolCalls) lines.push(...toolCallLines(c, color));
  });
  return [...lines, ...answerLines(t, color)];
}
