/**
 * Assistant turns and tool results as the scripted expert writes them, in the
 * exact text a policy would sample (so a demonstration renders to the same
 * tokens a rollout would hold):
 *   <think>{thought}</think>\n<tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>
 *   <think>{thought}</think>\n<answer>{answer}</answer>
 */
import { hermesFormat } from "../../agent/formats/hermes.js";
import { truncateResponse, type AnyTool } from "../../agent/tool.js";
import type { ChatMessage } from "../../model/chat-template.js";

export function toolTurn(thought: string, name: string, args: Record<string, unknown>): ChatMessage {
  return { role: "assistant", content: `<think>${thought}</think>\n${hermesFormat.write({ name, arguments: args })}` };
}

export function answerTurn(thought: string, answer: string): ChatMessage {
  return { role: "assistant", content: `<think>${thought}</think>\n<answer>${answer}</answer>` };
}

/** The message ToolEnv (Hermes format) answers a successful call with, cut as the runtime cuts it. */
export function toolResult(tool: AnyTool, text: string): ChatMessage {
  const [m] = hermesFormat.resultMessages([{ name: tool.name, text: truncateResponse(text, tool.maxResponseChars) }]);
  return { role: "tool", name: tool.name, content: m.content };
}
