/** Chat prompts for a model: its own template from tokenizer_config.json, rendered then tokenized once. */
import { renderChatTemplate, type ChatMessage, type ToolSchema } from "./chat-template.js";
import type { Tokenizer } from "./tokenizer.js";
import { ModelFormatError } from "../util/errors.js";

export function renderChat(
  tokenizer: Tokenizer,
  messages: ChatMessage[],
  opts: { tools?: ToolSchema[]; addGenerationPrompt?: boolean } = {},
): string {
  const template = tokenizer.chatTemplate;
  if (!template) throw new ModelFormatError("tokenizer_config.json", "chat_template", "the model has no chat template");
  return renderChatTemplate(template, {
    messages,
    tools: opts.tools,
    addGenerationPrompt: opts.addGenerationPrompt ?? true,
    bosToken: tokenizer.bosToken,
    eosToken: tokenizer.eosToken,
  });
}

export function encodeChat(
  tokenizer: Tokenizer,
  messages: ChatMessage[],
  opts: { tools?: ToolSchema[]; addGenerationPrompt?: boolean } = {},
): number[] {
  return tokenizer.encode(renderChat(tokenizer, messages, opts));
}
