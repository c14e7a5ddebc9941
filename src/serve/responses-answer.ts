/**
 * The answer of POST /responses: the `response` object the OpenAI clients read (id, status,
 * output items, usage, and the request's settings echoed back), its in-progress form (the first
 * streaming events carry it), and storing it for `previous_response_id`.
 */
import { newId, unixNow } from "./context.js";
import { chatMessages, asInputItem, outputItems, outputText, type Answer, type OutputItem } from "./responses-items.js";
import type { ResponsesCall } from "./responses-request.js";
import type { ResponseStore } from "./responses-store.js";

export interface ResponseHead {
  id: string;
  createdAt: number;
  model: string;
  /** The message item's id, known before the answer (a stream announces it while sampling). */
  messageId: string;
  /** The sampling settings used (the request's, or the server's defaults). */
  temperature: number;
  topP: number;
}

export function responseHead(model: string, temperature: number, topP: number): ResponseHead {
  return { id: newId("resp_"), createdAt: unixNow(), model, messageId: newId("msg_"), temperature, topP };
}

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function responseUsage(inputTokens: number, outputTokens: number): ResponseUsage {
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  };
}

export type ResponseBody = { output: OutputItem[] } & Record<string, unknown>;

/** The response object: in progress (no output yet) when `done` is not given. */
export function responseBody(
  head: ResponseHead,
  call: ResponsesCall,
  done?: { answer: Answer; usage: ResponseUsage },
): ResponseBody {
  const { req } = call;
  const output = done ? outputItems(done.answer, head.messageId) : [];
  const status = !done ? "in_progress" : done.answer.incomplete ? "incomplete" : "completed";
  return {
    id: head.id,
    object: "response",
    created_at: head.createdAt,
    status,
    background: false,
    completed_at: status === "completed" ? unixNow() : null,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    max_tool_calls: null,
    model: head.model,
    output,
    output_text: outputText(output),
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: req.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    service_tier: "default",
    store: req.store !== false,
    temperature: head.temperature,
    text: { format: { type: "text" }, verbosity: req.text?.verbosity ?? "medium" },
    tool_choice: req.tool_choice ?? "auto",
    tools: call.tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: t.strict ?? true,
    })),
    top_logprobs: 0,
    top_p: head.topP,
    truncation: "disabled",
    usage: done?.usage ?? null,
    user: req.user ?? null,
    metadata: req.metadata ?? {},
  };
}

/** Keeps a finished response (unless the request said store: false) for previous_response_id. */
export function storeResponse(store: ResponseStore, call: ResponsesCall, body: ResponseBody): void {
  if (call.req.store === false) return;
  const reply = chatMessages(body.output.map(asInputItem));
  store.put({ id: body.id as string, body, conversation: [...call.conversation, ...reply] });
}
