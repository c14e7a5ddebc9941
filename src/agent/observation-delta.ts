/**
 * The tokens appended after an action for an observation given as messages,
 * derived from any chat template. Render the conversation with the assistant
 * turn's content set to a sentinel, once alone (A) and once followed by the
 * new messages and the generation prompt (B). After the sentinel, A holds the
 * template's close of the assistant turn (ChatML: "<|im_end|>\n"), and B that
 * close followed by the observation. The delta is B after the end-of-turn
 * token when the action already ends with it (the usual stop), and otherwise
 * the end-of-turn token text first, so the turn is closed:
 *   closed: "\n<|im_start|>user\n<tool_response>\n...\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
 *   open:   "<|im_end|>" + the same
 * The delta is tokenized once; it is never re-derived from the whole conversation.
 */
import type { ToolSchema } from "../model/chat-template.js";
import { renderMessages, type AgentMessage, type ChatSetup } from "./chat-setup.js";
import { ChatTemplateError } from "./errors.js";

/** Stands for the assistant turn's content; plain ASCII so no template trims or escapes it. */
export const ASSISTANT_SENTINEL = "AGENT_R1_SENTINEL_7d1f0c";

export interface DeltaInput {
  /** The conversation before the action (it shapes how some templates render what follows). */
  history: AgentMessage[];
  /** The observation's messages. */
  messages: AgentMessage[];
  tools?: ToolSchema[];
  /** True when the action's last token is the end-of-turn token. */
  actionClosed: boolean;
}

function afterSentinel(text: string, which: string): string {
  const at = text.indexOf(ASSISTANT_SENTINEL);
  if (at < 0 || text.indexOf(ASSISTANT_SENTINEL, at + 1) >= 0) {
    throw new ChatTemplateError(
      `the chat template (${which}) must render the assistant turn's content exactly once; it rendered it ${at < 0 ? "not at all" : "more than once"}`,
    );
  }
  return text.slice(at + ASSISTANT_SENTINEL.length);
}

export function observationDeltaText(chat: ChatSetup, input: DeltaInput): string {
  const turn: AgentMessage = { role: "assistant", content: ASSISTANT_SENTINEL };
  const alone = afterSentinel(
    renderMessages(chat, [...input.history, turn], { tools: input.tools, addGenerationPrompt: false }),
    "assistant turn last",
  );
  const next = afterSentinel(
    renderMessages(chat, [...input.history, turn, ...input.messages], {
      tools: input.tools,
      addGenerationPrompt: true,
    }),
    "assistant turn followed by the observation",
  );
  if (!next.startsWith(alone)) {
    throw new ChatTemplateError(
      `the chat template closes the assistant turn as ${JSON.stringify(alone)} when it is last but as ${JSON.stringify(next.slice(0, alone.length))} when messages follow`,
      "give the env text or token observations, or use a template that renders history the same way as it grows",
    );
  }
  const k = alone.indexOf(chat.endOfTurn);
  if (k < 0) {
    throw new ChatTemplateError(
      `the chat template does not end an assistant turn with '${chat.endOfTurn}' (it renders ${JSON.stringify(alone)})`,
      "set chatSetup(..., { endOfTurn }) to the token the template uses",
    );
  }
  const close = alone.slice(0, k + chat.endOfTurn.length);
  const rest = next.slice(close.length);
  return input.actionClosed ? rest : close + rest;
}

export function observationDeltaTokens(chat: ChatSetup, input: DeltaInput): number[] {
  return chat.tokenizer.encode(observationDeltaText(chat, input));
}
