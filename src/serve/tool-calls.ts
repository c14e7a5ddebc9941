/**
 * Tool calls in a chat answer, read from the model's text in the Hermes
 * format (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`), and
 * OpenAI tool_calls turned back into messages the chat template can render.
 */
import { hermesFormat } from "../agent/formats/hermes.js";
import { isOk } from "../agent/formats/types.js";
import type { AgentMessage } from "../agent/chat-setup.js";
import type { ToolSchema } from "../model/chat-template.js";
import { newId } from "./context.js";
import { badRequest } from "./errors.js";
import type { RequestMessage, RequestTool } from "./schemas.js";

export interface OpenAiToolCall {
  id: string;
  type: "function";
  /** arguments: a JSON object as a string, as the OpenAI API sends it. */
  function: { name: string; arguments: string };
}

export interface AnswerWithCalls {
  /** The text outside the tool-call blocks, trimmed; null when there is none. */
  content: string | null;
  toolCalls: OpenAiToolCall[];
}

/**
 * The tool calls in `text`, or undefined when it holds none, or when any block
 * cannot be read (then the whole text stays the answer's content, as written).
 */
export function extractToolCalls(
  text: string,
  makeId: () => string = () => newId("call_"),
): AnswerWithCalls | undefined {
  const { content, calls } = hermesFormat.parse(text);
  if (calls.length === 0 || !calls.every(isOk)) return undefined;
  return {
    content: content.length > 0 ? content : null,
    toolCalls: calls.filter(isOk).map((c) => ({
      id: makeId(),
      type: "function",
      function: { name: c.name, arguments: JSON.stringify(c.arguments) },
    })),
  };
}

export function toolSchemas(tools: RequestTool[]): ToolSchema[] {
  return tools.map((t) => ({
    type: "function",
    function: {
      name: t.function.name,
      ...(t.function.description !== undefined ? { description: t.function.description } : {}),
      parameters: t.function.parameters ?? { type: "object", properties: {} },
    },
  }));
}

/** Request messages as the chat template takes them (developer -> system, text parts joined, tool-call arguments as objects). */
export function templateMessages(messages: RequestMessage[]): AgentMessage[] {
  // A tool result names its tool through tool_call_id; templates that show the name get it from the call.
  const callNames = new Map<string, string>();
  return messages.map((m, i) => {
    const content = contentText(m.content, `messages.${i}.content`);
    const role = m.role === "developer" ? "system" : m.role;
    const out: AgentMessage = { role, content };
    if (m.name !== undefined) out.name = m.name;
    if (m.role === "tool" && m.tool_call_id !== undefined) {
      out.tool_call_id = m.tool_call_id;
      out.name ??= callNames.get(m.tool_call_id);
      if (out.name === undefined) delete out.name;
    }
    if (m.role === "assistant" && m.tool_calls && m.tool_calls.length > 0) {
      out.tool_calls = m.tool_calls.map((c, j) => {
        if (c.id !== undefined) callNames.set(c.id, c.function.name);
        return {
          type: "function",
          function: {
            name: c.function.name,
            arguments: callArguments(c.function.arguments, `messages.${i}.tool_calls.${j}.function.arguments`),
          },
        };
      });
    }
    return out;
  });
}

function contentText(content: RequestMessage["content"], param: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  return content
    .map((part, j) => {
      if (part.type !== "text" || part.text === undefined)
        throw badRequest(`only text content parts are supported, got '${part.type}'`, `${param}.${j}`);
      return part.text;
    })
    .join("");
}

/** Templates render an arguments object with tojson; a string that is not a JSON object is refused. */
function callArguments(args: string, param: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(args);
  } catch {
    throw badRequest("tool call arguments must be a JSON object encoded as a string", param);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw badRequest("tool call arguments must be a JSON object encoded as a string", param);
  return value as Record<string, unknown>;
}
