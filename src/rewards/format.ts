/**
 * The format component and how it combines with correctness. A variant of
 * Agent-R1's legacy qa_em_and_format (notes §5), kept in [0, 1]:
 *
 *   tool turn   (every turn but the last): <think>..</think> then one or more
 *               <tool_call>{"name": .., "arguments": {..}}</tool_call>, nothing else
 *   answer turn (the last turn):           <think>..</think> then <answer>..</answer>, nothing else
 *   format = 0.5 * [every tool turn well-formed] + 0.5 * [answer turn well-formed]
 *
 *   reward = correct ? 0.5 + 0.5 * format : 0.1 * format
 *
 *   | correct | format | reward |
 *   | yes     | 1      | 1.0    |   the only way to 1
 *   | yes     | 0.5    | 0.75   |
 *   | yes     | 0      | 0.5    |
 *   | no      | 1      | 0.1    |   a small shaping signal for structure
 *   | no      | 0.5    | 0.05   |
 *   | no      | 0      | 0      |
 *
 * Departures from legacy: legacy gives +0.5 per well-formed tool turn (capped
 * at 1, so longer episodes earn more format credit) and a reward in [-1, 1];
 * here the format is all-or-nothing per kind of turn, and any correct answer
 * beats any wrong one. Tags inside <think> or <answer> (other than text) make
 * a turn ill-formed; whitespace around blocks is allowed.
 */

/** The answer: group 1 of the first match (the same pattern ToolEnv uses by default). */
export const ANSWER_PATTERN = /<answer>([\s\S]*?)<\/answer>/;

const TAG = String.raw`<\/?(?:think|tool_call|answer)>`;
const PLAIN = String.raw`(?:(?!${TAG})[\s\S])*`; // text holding none of our tags
const TOOL_TURN = new RegExp(String.raw`^\s*<think>${PLAIN}<\/think>\s*((?:<tool_call>${PLAIN}<\/tool_call>\s*)+)$`);
const ANSWER_TURN = new RegExp(String.raw`^\s*<think>${PLAIN}<\/think>\s*<answer>(${PLAIN})<\/answer>\s*$`);
const CALL = /<tool_call>([\s\S]*?)<\/tool_call>/g;

export function extractAnswer(text: string): string | undefined {
  return ANSWER_PATTERN.exec(text)?.[1];
}

function isCallJson(body: string): boolean {
  try {
    const v: unknown = JSON.parse(body);
    if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
    const { name, arguments: args } = v as Record<string, unknown>;
    return (
      typeof name === "string" && name.length > 0 && typeof args === "object" && args !== null && !Array.isArray(args)
    );
  } catch {
    return false;
  }
}

/** <think>..</think> then one or more tool calls whose JSON is {"name": string, "arguments": object}. */
export function isToolTurn(text: string): boolean {
  const m = TOOL_TURN.exec(text);
  if (!m) return false;
  return [...m[1].matchAll(CALL)].every((c) => isCallJson(c[1]));
}

/** <think>..</think> then a non-empty <answer>..</answer>. */
export function isAnswerTurn(text: string): boolean {
  const m = ANSWER_TURN.exec(text);
  return m !== null && m[1].trim().length > 0;
}

/** 0, 0.5 or 1 for an episode's action texts in order (the last one is the answer turn). */
export function formatScore(actions: readonly string[]): number {
  if (actions.length === 0) return 0;
  const tools = actions.slice(0, -1).every(isToolTurn) ? 0.5 : 0;
  return tools + (isAnswerTurn(actions[actions.length - 1]) ? 0.5 : 0);
}

/** The outcome reward from correctness (0/1) and the format score (see the table above). */
export function rewardWithFormat(correct: number, format: number): number {
  return correct >= 1 ? 0.5 + 0.5 * format : 0.1 * format;
}
