/**
 * What the runtime needs from a model's chat format: the tokenizer, the Jinja
 * chat template, and the token that ends an assistant turn. Messages may use
 * roles beyond ChatRole (Llama 3's `ipython`), so rendering goes through here.
 */
import { renderChatTemplate, type ChatMessage, type ToolSchema } from "../model/chat-template.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { InputError } from "../util/errors.js";
import { ChatTemplateError } from "./errors.js";

/** A chat message whose role is whatever the template understands ("ipython" included). */
export type AgentMessage = Omit<ChatMessage, "role"> & { role: string };

export interface ChatSetup {
  readonly tokenizer: Tokenizer;
  readonly template: string;
  /** Text of the token that ends an assistant turn (ChatML `<|im_end|>`, Llama 3 `<|eot_id|>`). */
  readonly endOfTurn: string;
  readonly endOfTurnId: number;
  /** Extra template variables, such as enable_thinking. */
  readonly extra?: Record<string, unknown>;
}

export interface ChatSetupOptions {
  /** Default: the tokenizer's chat template. */
  template?: string;
  /** Default: the tokenizer's eos token. */
  endOfTurn?: string;
  extra?: Record<string, unknown>;
}

export function chatSetup(tokenizer: Tokenizer, opts: ChatSetupOptions = {}): ChatSetup {
  const template = opts.template ?? tokenizer.chatTemplate;
  if (!template)
    throw new InputError(
      "the tokenizer has no chat template",
      "pass chatSetup(tokenizer, { template }) or add chat_template to tokenizer_config.json",
    );
  const endOfTurn = opts.endOfTurn ?? tokenizer.eosToken;
  if (!endOfTurn)
    throw new InputError(
      "the tokenizer has no eos token to end assistant turns",
      "pass chatSetup(tokenizer, { endOfTurn: '<|im_end|>' })",
    );
  const ids = tokenizer.encode(endOfTurn);
  if (ids.length !== 1) {
    throw new InputError(
      `end-of-turn '${endOfTurn}' encodes to ${ids.length} tokens, expected 1`,
      "use a special token of the tokenizer (see added_tokens in tokenizer.json)",
    );
  }
  return { tokenizer, template, endOfTurn, endOfTurnId: ids[0], extra: opts.extra };
}

export interface RenderOptions {
  tools?: ToolSchema[];
  addGenerationPrompt: boolean;
}

/** The setup with more template variables (a request's chat_template_kwargs) over its own. */
export function withTemplateVars(chat: ChatSetup, vars: Record<string, unknown> | undefined): ChatSetup {
  return vars && Object.keys(vars).length > 0 ? { ...chat, extra: { ...chat.extra, ...vars } } : chat;
}

export function renderMessages(chat: ChatSetup, messages: AgentMessage[], opts: RenderOptions): string {
  try {
    return renderChatTemplate(chat.template, {
      // Roles are passed through to the template as-is; ChatRole is narrower than what templates accept.
      messages: messages as ChatMessage[],
      tools: opts.tools,
      addGenerationPrompt: opts.addGenerationPrompt,
      bosToken: chat.tokenizer.bosToken,
      eosToken: chat.tokenizer.eosToken,
      extra: chat.extra,
    });
  } catch (err) {
    throw new ChatTemplateError(
      `cannot render ${messages.length} messages (roles: ${messages.map((m) => m.role).join(", ")}): ${(err as Error).message}`,
    );
  }
}
