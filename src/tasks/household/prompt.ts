/**
 * The prompt, rebuilt from the env's state at every step (Agent-R1's ALFWorld
 * recipe): a system message with the instructions, and a user message with
 *   Your task is to: <goal>
 *   Your actions so far:          (left out before the first action)
 *   [Action 1] go to fridge 1
 *   [Action 2] take apple 1 from fridge 1 (invalid)
 *   [Action 3] no tool call (invalid)
 *   Observation: <what the last action showed, or why it was refused>
 *   Admissible commands:
 *   <one command a line>
 * The history holds the commands only (a refused one marked, the reason is
 * in the observation that follows it), so the
 * prompt of step 20 still fits a small model's context. The state text
 * (`info.state`, GiGPO's anchor) is the task, the last observation of the
 * world and the admissible commands: the same state renders the same text.
 */
export const HOUSEHOLD_SYSTEM_PROMPT =
  "Complete the task in the house. Each turn: a short thought in <think>...</think>, then one env_step call with exactly one of the admissible commands.";

export interface HistoryEntry {
  /** The command as read (or what was wrong with a call that could not be read: "no tool call"). */
  command: string;
  /** The step was refused and changed nothing. */
  invalid: boolean;
}

export function historyLines(history: readonly HistoryEntry[]): string[] {
  return history.map((h, i) => `[Action ${i + 1}] ${h.command}${h.invalid ? " (invalid)" : ""}`);
}

export function userPrompt(o: {
  task: string;
  observation: string;
  history: readonly HistoryEntry[];
  admissible: readonly string[];
}): string {
  const lines = [`Your task is to: ${o.task}`];
  if (o.history.length > 0) lines.push("Your actions so far:", ...historyLines(o.history));
  lines.push(`Observation: ${o.observation}`, "Admissible commands:", ...o.admissible);
  return lines.join("\n");
}

/** The anchor state: equal states (task, last observation of the world, admissible commands) give equal text. */
export function stateText(task: string, observation: string, admissible: readonly string[]): string {
  return [`Your task is to: ${task}`, `Observation: ${observation}`, "Admissible commands:", ...admissible].join("\n");
}
