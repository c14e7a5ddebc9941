/**
 * POST /v1/responses on `agent-r1 serve` (the OpenAI Responses API): the request's items are
 * rendered with the model's chat template as the equivalent chat messages (responses-request.ts),
 * sampled on the engine, and answered as a `response` object, or, with `stream`, as response
 * events sent while sampling (responses-events.ts). Tool calls are read from the answer's text
 * (Hermes format) as on the chat route and come back as `function_call` items. Finished responses
 * are kept in a bounded store (unless `store: false`) for `previous_response_id`, `item_reference`
 * items and GET /v1/responses/{id}.
 */
import { sampleUntilClosed } from "./cancel-on-close.js";
import type { ServerResponse } from "node:http";
import { renderMessages } from "../agent/chat-setup.js";
import type { ServeContext } from "./context.js";
import { ApiError } from "./errors.js";
import { sendJson } from "./http.js";
import { LiveText } from "./live-text.js";
import { decodeSequence } from "./output-text.js";
import { checkRequestTokens, newTokensThatFit, responseTooLarge } from "./request-limits.js";
import { responseBody, responseHead, responseUsage, storeResponse } from "./responses-answer.js";
import { ResponseEvents } from "./responses-events.js";
import { prepareResponses } from "./responses-request.js";
import type { ResponseStore } from "./responses-store.js";
import { resolveStops, roomAfter, samplingParams } from "./sampling-options.js";
import { extractToolCalls } from "./tool-calls.js";

export async function responses(
  served: ServeContext,
  store: ResponseStore,
  body: unknown,
  res: ServerResponse,
): Promise<void> {
  const call = prepareResponses(body, store);
  const { req } = call;
  const ctx = served.forModel(req.model); // the base model, or a loaded LoRA adapter
  const tokenizer = ctx.engine.tokenizer;
  const chat = ctx.chat();
  const prompt = tokenizer.encode(
    renderMessages(chat, call.messages, { tools: call.toolSchemas, addGenerationPrompt: true }) + call.forced,
  );
  const room = roomAfter(ctx, prompt.length, "input");
  // Left to the server, the answer gets what fits the request token budget; asked for, it must fit.
  const maxTokens = Math.min(
    req.max_output_tokens ?? Math.min(ctx.defaultMaxTokens ?? room, newTokensThatFit(ctx.limits, prompt.length, 1)),
    room,
  );
  checkRequestTokens(
    ctx.limits,
    { promptTokens: prompt.length, newTokens: Math.max(maxTokens, 1) },
    req.max_output_tokens != null ? "max_output_tokens" : "input",
  );
  const stops = resolveStops({}, [chat.endOfTurnId, tokenizer.eosTokenId]);
  const params = samplingParams({ temperature: req.temperature, top_p: req.top_p }, stops, maxTokens, 0);
  const head = responseHead(ctx.modelId, params.temperature ?? 1, params.topP ?? 1);

  const events = req.stream ? new ResponseEvents(res, responseBody(head, call), head.messageId, ctx.limits) : undefined;
  // Text deltas as sampled; a forced call is not text, and comes whole with the finish.
  if (events && !call.forced) {
    const live = new LiveText(tokenizer, stops, call.toolSchemas !== undefined);
    params.onToken = (e) => events.text(live.push(e.token));
  }
  // A client that leaves before sampling is done cancels it; nothing more is written then.
  const result = await sampleUntilClosed(ctx.engine, prompt, params, res);
  if (!result) return;

  const decoded = decodeSequence(tokenizer, result.sequences[0], stops);
  const out = call.forced ? { ...decoded, text: call.forced + decoded.text } : decoded;
  const calls = call.toolSchemas ? extractToolCalls(out.text) : undefined;
  const answer = calls
    ? { content: calls.content, toolCalls: calls.toolCalls, incomplete: false }
    : { content: out.text, incomplete: out.finishReason === "length" };
  const done = responseBody(head, call, { answer, usage: responseUsage(prompt.length, out.seq.tokens.length) });
  storeResponse(store, call, done);
  if (events) return events.finish(done);
  const json = JSON.stringify(done);
  const bytes = Buffer.byteLength(json);
  if (bytes > ctx.limits.maxResponseBytes) throw responseTooLarge(ctx.limits);
  res.writeHead(200, { "Content-Type": "application/json", "Content-Length": bytes }).end(json);
}

/** GET /v1/responses/{id}: a stored response as it was answered. */
export function retrieveResponse(store: ResponseStore, id: string, res: ServerResponse): void {
  const stored = store.get(id);
  if (!stored) throw notFound(id);
  sendJson(res, 200, stored.body);
}

/** DELETE /v1/responses/{id}: forgets a stored response. */
export function deleteResponse(store: ResponseStore, id: string, res: ServerResponse): void {
  if (!store.delete(id)) throw notFound(id);
  sendJson(res, 200, { id, object: "response.deleted", deleted: true });
}

function notFound(id: string): ApiError {
  return new ApiError(404, `Response with id '${id}' not found`, { code: "response_not_found" });
}
