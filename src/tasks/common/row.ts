/** Builds rows in Agent-R1's row format (data_source, prompt messages, ability, reward_model, extra_info). */
import type { TaskRow } from "../types.js";

export const AGENT_NAME = "agent_env_loop";

export interface RowSpec {
  dataSource: string;
  ability: string;
  system: string;
  question: string;
  answer: string;
  split: string;
  index: number;
  /** Tool names the env offers, for env_kwargs. */
  tools: string[];
  /** More extra_info fields (e.g. the question type). */
  extra?: Record<string, unknown>;
}

export function envKwargs(tools: string[]): string {
  return JSON.stringify({ env_type: "tool", tools, tool_format: "hermes", tools_kwargs: {} });
}

export function makeRow(s: RowSpec): TaskRow {
  return {
    data_source: s.dataSource,
    agent_name: AGENT_NAME,
    prompt: [
      { role: "system", content: s.system },
      { role: "user", content: s.question },
    ],
    ability: s.ability,
    reward_model: { style: "rule", ground_truth: s.answer },
    extra_info: { split: s.split, index: s.index, question: s.question, answer: s.answer, ...s.extra },
    env_kwargs: envKwargs(s.tools),
  };
}

/** The user question of a row: extra_info.question, else the last user message. */
export function rowQuestion(row: TaskRow): string {
  if (typeof row.extra_info.question === "string") return row.extra_info.question;
  return [...row.prompt].reverse().find((m) => m.role === "user")?.content ?? "";
}
