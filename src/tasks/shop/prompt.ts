/**
 * The prompt, rebuilt from the shop's state at every step (nothing of the
 * earlier turns is kept but what the prompt shows):
 *   system  what to do: pick one available action, call env_step with it; a thought, then one call
 *   user    the instruction, the last two steps (the observation each acted on, cut to about
 *           220 characters, and its action), the current page, the available actions
 *           (with a note first when the last action was invalid)
 * The state alone (instruction, page, available actions; no history, no note
 * about an invalid action) is the anchor state GiGPO groups steps by.
 */
import { z } from "zod";
import { defineTool, toolSchema } from "../../agent/tool.js";
import type { ChatMessage, ToolSchema } from "../../model/chat-template.js";

export const SHOP_SYSTEM_PROMPT =
  "Shop for the user. Pick one available action and call env_step with it: a short <think>...</think>, then one <tool_call>.";

export const HISTORY_STEPS = 2;
export const HISTORY_OBSERVATION_CHARS = 220;
/**
 * The user message's length cap: past it the history's observations are cut
 * shorter (20 characters at a time, down to 40), as Agent-R1's HotpotQA
 * recipe shrinks its passages until the prompt fits. 1,100 characters keep
 * the whole prompt (system, tool schema, chat markup) under 1,024 tokens of
 * the default tokenizer, which spends at least 1.4 characters per token on
 * this text.
 */
export const MAX_USER_CHARS = 1100;
const MIN_OBSERVATION_CHARS = 40;

export const envStepTool = defineTool({
  name: "env_step",
  description: "One shop action: search[query] or click[label].",
  inputSchema: z.object({ command: z.string() }),
  execute: () => {
    throw new Error("env_step runs inside ShopEnv");
  },
});

export const SHOP_TOOLS: ToolSchema[] = [toolSchema(envStepTool)];

export interface HistoryEntry {
  observation: string;
  action: string;
}

export function cutText(s: string, max: number): string {
  const flat = s.replace(/\s*\n\s*/g, " / ");
  return flat.length <= max ? flat : `${flat.slice(0, max - 3).trimEnd()}...`;
}

export function renderState(instruction: string, page: string, actions: readonly string[]): string {
  return `Instruction: ${instruction}\n\nCurrent page:\n${page}\n\nAvailable actions: ${actions.join(", ")}`;
}

export function renderPrompt(
  instruction: string,
  page: string,
  actions: readonly string[],
  history: readonly HistoryEntry[],
  note?: string,
): ChatMessage[] {
  const recent = history.slice(-HISTORY_STEPS);
  const user = (cut: number) => {
    const parts = [`Instruction: ${instruction}`];
    if (recent.length > 0)
      parts.push(
        `Last steps:\n${recent.map((h) => `Observation: ${cutText(h.observation, cut)}\nAction: ${h.action}`).join("\n")}`,
      );
    parts.push(`${note ? `${note}\n` : ""}Current page:\n${page}`, `Available actions: ${actions.join(", ")}`);
    return parts.join("\n\n");
  };
  let cut = HISTORY_OBSERVATION_CHARS,
    content = user(cut);
  while (content.length > MAX_USER_CHARS && cut > MIN_OBSERVATION_CHARS) content = user((cut -= 20));
  return [
    { role: "system", content: SHOP_SYSTEM_PROMPT },
    { role: "user", content },
  ];
}
