/**
 * Whether a task's tools leave room for the episode: the tool schemas are rendered into the prompt
 * by the chat template (as the rollout renders them), and their tokens are counted against the
 * episode's context, the smaller of rollout.maxTotalTokens and the model's window. Over half of it
 * is worth one warning line when training starts: an MCP server can list many long schemas.
 */
import { chatSetup, renderMessages } from "../agent/chat-setup.js";
import type { ToolSchema } from "../model/chat-template.js";
import type { Tokenizer } from "../model/tokenizer.js";

/** Tokens the tools add to a prompt, as the chat template renders them (0 when it does not list tools). */
export function toolPromptTokens(tokenizer: Tokenizer, tools: ToolSchema[]): number {
  const chat = chatSetup(tokenizer);
  const messages = [{ role: "user", content: "?" }];
  const count = (withTools: boolean) =>
    tokenizer.encode(
      renderMessages(chat, messages, { tools: withTools ? tools : undefined, addGenerationPrompt: true }),
    ).length;
  return Math.max(0, count(true) - count(false));
}

/** The warning line, when the task's tools take more than half the episode's context; undefined otherwise or when it cannot tell. */
export function toolBudgetWarning(
  task: { name: string; tools?: ToolSchema[] },
  tokenizer: Tokenizer,
  limits: { maxTotalTokens: number; maxPositionEmbeddings: number },
): string | undefined {
  if (!task.tools?.length) return undefined;
  let used: number;
  try {
    used = toolPromptTokens(tokenizer, task.tools);
  } catch {
    return undefined; // no chat template: the rollout says so itself
  }
  const fromRecipe = limits.maxTotalTokens <= limits.maxPositionEmbeddings;
  const window = fromRecipe ? limits.maxTotalTokens : limits.maxPositionEmbeddings;
  if (used * 2 <= window) return undefined;
  return `warning: task '${task.name}': its ${task.tools.length} tool schemas take ${used} tokens of every prompt, more than half of the ${window}-token context (${fromRecipe ? "rollout.maxTotalTokens" : "the model's max_position_embeddings"}); keep fewer tools (task.mcp[i].include) or give episodes more room`;
}
