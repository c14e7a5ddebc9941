/**
 * Drift check: re-render the whole conversation through the chat template and
 * compare with the tokens the trajectory holds. A difference is what a
 * pipeline that re-tokenizes the chat (messages -> template -> tokens) would
 * have trained on instead of what was sampled. Reported as a metric only;
 * re-rendered tokens never reach the trainer.
 */
import type { ToolSchema } from "../model/chat-template.js";
import { renderMessages, type AgentMessage, type ChatSetup } from "./chat-setup.js";

export interface DriftReport {
  /** Index of the first differing token, -1 when the sequences are equal. */
  firstDiff: number;
  /** Tokens between the common prefix and the common suffix, on the longer side. */
  differingTokens: number;
  trajectoryTokens: number;
  renderedTokens: number;
}

export function compareTokens(trajectory: number[], rendered: number[]): DriftReport {
  const n = Math.min(trajectory.length, rendered.length);
  let prefix = 0;
  while (prefix < n && trajectory[prefix] === rendered[prefix]) prefix++;
  let suffix = 0;
  while (suffix < n - prefix && trajectory[trajectory.length - 1 - suffix] === rendered[rendered.length - 1 - suffix])
    suffix++;
  const equal = prefix === trajectory.length && prefix === rendered.length;
  return {
    firstDiff: equal ? -1 : prefix,
    differingTokens: Math.max(trajectory.length, rendered.length) - prefix - suffix,
    trajectoryTokens: trajectory.length,
    renderedTokens: rendered.length,
  };
}

export interface DriftInput {
  /** The conversation the tokens encode: first messages, then assistant and observation messages. */
  messages: AgentMessage[];
  tools?: ToolSchema[];
  /** The trajectory's tokens from its last segment's start. */
  tokens: number[];
  /** The tokens end with an observation (and so a generation prompt), not with an action. */
  endsWithObservation: boolean;
  /** The last action ends with the end-of-turn token. */
  actionClosed: boolean;
}

/** The text the template gives for the conversation, cut where the trajectory's tokens end. */
export function renderForDrift(chat: ChatSetup, input: Omit<DriftInput, "tokens">): string {
  if (input.endsWithObservation)
    return renderMessages(chat, input.messages, { tools: input.tools, addGenerationPrompt: true });
  const text = renderMessages(chat, input.messages, { tools: input.tools, addGenerationPrompt: false });
  // The last message is the final action: keep its end-of-turn token only if it was sampled.
  const k = text.lastIndexOf(chat.endOfTurn);
  if (k < 0) return text;
  return input.actionClosed ? text.slice(0, k + chat.endOfTurn.length) : text.slice(0, k);
}

export function checkDrift(chat: ChatSetup, input: DriftInput): DriftReport {
  return compareTokens(input.tokens, chat.tokenizer.encode(renderForDrift(chat, input)));
}
