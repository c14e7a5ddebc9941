/**
 * Responses API items ⇄ the chat messages the chat-completions route builds, so an item list is
 * rendered by the chat template exactly as the equivalent chat request is (and the gateway records
 * it token for token as it records chat completions):
 *  - a message item is a chat message of its role (developer becomes system in templateMessages);
 *  - a `function_call` item is a tool call of an assistant turn: consecutive calls are one turn,
 *    joined to the assistant message item directly before them, if there is one;
 *  - a `function_call_output` item is a `role: "tool"` message answering `call_id`;
 *  - a `reasoning` item is dropped (the models served here produce none).
 * And back: an answer (content and Hermes tool calls) as output items, a message item first when
 * there is text, then one `function_call` item per call.
 */
import { newId } from "./context.js";
import type { InputItem } from "./responses-schema.js";
import type { RequestMessage } from "./schemas.js";
import type { OpenAiToolCall } from "./tool-calls.js";

/** An item after item references are resolved. */
export type ResolvedItem = Exclude<InputItem, { type: "item_reference" }>;

export interface MessageOutputItem {
  type: "message";
  id: string;
  status: "completed" | "incomplete";
  role: "assistant";
  content: { type: "output_text"; text: string; annotations: never[]; logprobs: never[] }[];
}

export interface FunctionCallOutputItem {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: "completed";
}

export type OutputItem = MessageOutputItem | FunctionCallOutputItem;

/** Items as chat messages (see the header for the rules). */
export function chatMessages(items: ResolvedItem[]): RequestMessage[] {
  const out: RequestMessage[] = [];
  // Whether a function_call item joins the last message (an assistant turn still being read).
  let joinable = false;
  for (const item of items) {
    switch (item.type) {
      case "message":
        out.push({ role: item.role, content: item.text });
        joinable = item.role === "assistant";
        break;
      case "function_call": {
        const call = {
          id: item.callId,
          type: "function" as const,
          function: { name: item.name, arguments: item.arguments },
        };
        const last = out[out.length - 1];
        if (joinable && last?.role === "assistant") last.tool_calls = [...(last.tool_calls ?? []), call];
        else out.push({ role: "assistant", content: null, tool_calls: [call] });
        joinable = true;
        break;
      }
      case "function_call_output":
        out.push({ role: "tool", tool_call_id: item.callId, content: item.output });
        joinable = false;
        break;
      case "reasoning":
        break;
    }
  }
  return out;
}

export interface Answer {
  /** The text outside tool calls; null when the answer is only tool calls. */
  content: string | null;
  toolCalls?: OpenAiToolCall[];
  /** The answer ran out of tokens (max_output_tokens or the context window). */
  incomplete: boolean;
}

/** The answer as output items; `messageId` is the id the message item gets (a stream announces it first). */
export function outputItems(answer: Answer, messageId: string = newId("msg_")): OutputItem[] {
  const calls = answer.toolCalls ?? [];
  const items: OutputItem[] = [];
  if (answer.content !== null || calls.length === 0)
    items.push({
      type: "message",
      id: messageId,
      status: answer.incomplete ? "incomplete" : "completed",
      role: "assistant",
      content: [{ type: "output_text", text: answer.content ?? "", annotations: [], logprobs: [] }],
    });
  for (const c of calls)
    items.push({
      type: "function_call",
      id: newId("fc_"),
      call_id: c.id,
      name: c.function.name,
      arguments: c.function.arguments,
      status: "completed",
    });
  return items;
}

/** An output item as the input item a client sends back (what an item_reference to it stands for). */
export function asInputItem(item: OutputItem): ResolvedItem {
  if (item.type === "message")
    return { type: "message", role: "assistant", text: item.content.map((p) => p.text).join("") };
  return { type: "function_call", callId: item.call_id, name: item.name, arguments: item.arguments };
}

/** The text of the output's message items (the `output_text` convenience field). */
export function outputText(items: OutputItem[]): string {
  return items
    .filter((i): i is MessageOutputItem => i.type === "message")
    .flatMap((i) => i.content.map((p) => p.text))
    .join("");
}
