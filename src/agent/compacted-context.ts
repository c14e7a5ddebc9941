/**
 * The context an episode continues from after a compaction, assembled from tokens the episode
 * already holds: its first prompt (system + task, ending with the generation prompt), the summary
 * exactly as the policy sampled it, the chat template's reopening of an assistant turn after it,
 * then the last `keepLast` env turns, each action with the observation the env gave after it (the
 * summary request is not among them). Only the reopening is rendered, once, as the observation
 * delta of no messages; nothing sampled is decoded and encoded again.
 *
 *   ChatML: <|im_start|>system…<|im_end|>\n<|im_start|>user\n{task}<|im_end|>\n<|im_start|>assistant\n
 *           {summary}<|im_end|>  \n<|im_start|>assistant\n  {action_k}{observation_k} … {action_n}{observation_n}
 */
import type { AgentMessage, ChatSetup } from "./chat-setup.js";
import type { FlowState, FlowTurn } from "./flow-state.js";
import { observationDeltaTokens } from "./observation-delta.js";

export interface CompactedContext {
  tokens: number[];
  /** The same conversation as messages: the first ones, the summary as an assistant turn, the kept turns'. */
  messages: AgentMessage[];
  /** The kept turns, for the next compaction. */
  turns: FlowTurn[];
}

/** The last `keepLast` env turns before the summary (turns the flow asked for are never kept). */
export function keptTurns(turns: readonly FlowTurn[], keepLast: number): FlowTurn[] {
  if (keepLast === 0) return [];
  return turns
    .slice(0, -1)
    .filter((t) => t.asked === undefined)
    .slice(-keepLast);
}

/** `state.turns` ends with the summary turn; `state.opening` holds the episode's first messages. */
export function compactedContext(chat: ChatSetup, state: FlowState, keepLast: number): CompactedContext {
  const summary = state.turns[state.turns.length - 1];
  if (!summary?.asked || !summary.messages || !state.opening)
    throw new Error("internal: a compaction needs the summary turn last and the conversation as messages");
  const kept = keptTurns(state.turns, keepLast);
  const reopen = observationDeltaTokens(chat, {
    history: [...state.opening],
    messages: [],
    tools: state.tools,
    actionClosed: summary.closed,
  });
  return {
    tokens: [...state.prompt, ...summary.action, ...reopen, ...kept.flatMap((t) => [...t.action, ...t.observation])],
    messages: [...state.opening, summary.messages[0], ...kept.flatMap((t) => t.messages ?? [])],
    turns: kept,
  };
}
