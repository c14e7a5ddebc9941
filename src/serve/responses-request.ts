/**
 * A POST /responses body made ready to render, the same way on `agent-r1 serve` and on the
 * recording gateway: checked (responses-schema.ts), its previous response and item references
 * looked up in the store, its items turned into chat messages (responses-items.ts) after the
 * previous response's conversation, `instructions` as a system message first, and its function
 * tools as the chat route's tool schemas. The template messages are then exactly those of the
 * equivalent chat-completions request.
 */
import { forcedOpening, parseToolChoice } from "./tool-choice.js";
import type { AgentMessage } from "../agent/chat-setup.js";
import type { ToolSchema } from "../model/chat-template.js";
import { ApiError, badRequest } from "./errors.js";
import { chatMessages, asInputItem, type ResolvedItem } from "./responses-items.js";
import {
  checkTools,
  parseInputItem,
  refuseUnsupported,
  responsesRequestSchema,
  type InputItem,
  type ResponsesRequest,
  type ResponsesTool,
} from "./responses-schema.js";
import type { ResponseStore } from "./responses-store.js";
import { parseRequest, type RequestMessage } from "./schemas.js";
import { templateMessages, toolSchemas } from "./tool-calls.js";

export interface ResponsesCall {
  req: ResponsesRequest;
  /** The function tools as given. */
  tools: ResponsesTool[];
  /** The tools the template renders: undefined when there are none, or tool_choice is "none". */
  toolSchemas?: ToolSchema[];
  /** A forced tool call's opening (tool_choice "required" or a function by name), else "". */
  forced: string;
  /** The conversation before this response's output, without instructions (what the store keeps). */
  conversation: RequestMessage[];
  /** What the chat template renders: the instructions as a system message, then the conversation. */
  messages: AgentMessage[];
}

export function prepareResponses(body: unknown, store: ResponseStore): ResponsesCall {
  const req = parseRequest(responsesRequestSchema, body);
  refuseUnsupported(req);
  const tools = checkTools(req.tools);
  const previous = previousConversation(req.previous_response_id, store);
  const items: InputItem[] =
    typeof req.input === "string"
      ? [{ type: "message", role: "user", text: req.input }]
      : req.input.map((item, i) => parseInputItem(item, i));
  const conversation = [...previous, ...chatMessages(items.map((item, i) => resolve(item, i, store)))];
  if (conversation.length === 0)
    throw badRequest("input has no messages: send a string or at least one input item", "input");
  const chat: RequestMessage[] = req.instructions
    ? [{ role: "system", content: req.instructions }, ...conversation]
    : conversation;
  const choice = parseToolChoice(
    req.tool_choice,
    tools.map((t) => t.name),
  );
  const useTools = tools.length > 0 && choice !== "none";
  return {
    req,
    tools,
    toolSchemas: useTools ? toolSchemas(tools.map(asChatTool)) : undefined,
    forced: forcedOpening(choice),
    conversation,
    messages: templateMessages(chat),
  };
}

function previousConversation(id: string | null | undefined, store: ResponseStore): RequestMessage[] {
  if (id == null) return [];
  const previous = store.get(id);
  if (!previous)
    throw new ApiError(
      404,
      `Previous response with id '${id}' not found (it was not stored, was stored with store: false, or is gone)`,
      { code: "previous_response_not_found", param: "previous_response_id" },
    );
  return previous.conversation;
}

/** An item reference as the output item it names. */
function resolve(item: InputItem, index: number, store: ResponseStore): ResolvedItem {
  if (item.type !== "item_reference") return item;
  const found = store.item(item.id);
  if (!found)
    throw new ApiError(404, `Item with id '${item.id}' not found (only the output items of stored responses are)`, {
      code: "item_not_found",
      param: `input.${index}.id`,
    });
  return asInputItem(found);
}

/** A Responses function tool in the chat-completions shape, so toolSchemas renders it identically. */
function asChatTool(t: ResponsesTool) {
  return {
    type: "function" as const,
    function: {
      name: t.name,
      ...(t.description != null ? { description: t.description } : {}),
      ...(t.parameters != null ? { parameters: t.parameters } : {}),
    },
  };
}
