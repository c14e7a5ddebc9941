/**
 * POST /responses on the recording gateway (the OpenAI Responses API, as the OpenAI Agents SDK's
 * default model, the AI SDK's default `openai(model)` and `client.responses.create` call it). The
 * request is made ready as `agent-r1 serve` makes it (src/serve/responses-request.ts): its items
 * become the chat messages of the equivalent chat-completions request, after the conversation of
 * its `previous_response_id`, so the episode records it by the same rule, token for token (a
 * `function_call_output` item is a tool message, the result of the call it names). Responses are
 * kept per episode (unless `store: false`) for `previous_response_id` and `item_reference` items.
 * A stream is sent once the completion is sampled, as on the chat route.
 */
import type { ServerResponse } from "node:http";
import { ApiError } from "../serve/errors.js";
import { sendJson } from "../serve/http.js";
import { untilClosed } from "../serve/cancel-on-close.js";
import { responseBody, responseHead, responseUsage, storeResponse } from "../serve/responses-answer.js";
import { ResponseEvents } from "../serve/responses-events.js";
import { prepareResponses } from "../serve/responses-request.js";
import type { ResponseStore } from "../serve/responses-store.js";
import type { EpisodeRecorder } from "./episode-recorder.js";
import { shown } from "../util/shown.js";

export interface ResponsesEpisode {
  recorder: EpisodeRecorder;
  /** The episode's own responses. */
  store: ResponseStore;
  /** The model name the gateway serves. */
  model: string;
  /** The temperature a request without one samples at. */
  temperature: number;
}

export async function episodeResponses(
  episode: ResponsesEpisode,
  body: unknown,
  res: ServerResponse,
  userAgent?: string,
): Promise<void> {
  const call = prepareResponses(body, episode.store);
  const { req } = call;
  if (req.model !== undefined && req.model !== episode.model)
    throw new ApiError(404, `The model '${shown(req.model)}' does not exist; this gateway serves '${episode.model}'`, {
      code: "model_not_found",
      param: "model",
    });
  const out = await untilClosed(res, (signal) =>
    episode.recorder.complete({
      messages: call.messages,
      tools: call.toolSchemas,
      maxTokens: req.max_output_tokens ?? undefined,
      temperature: req.temperature ?? undefined,
      topP: req.top_p ?? undefined,
      userAgent,
      forced: call.forced || undefined,
      signal,
    }),
  );
  if (!out) return;
  const head = responseHead(episode.model, req.temperature ?? episode.temperature, req.top_p ?? 1);
  const answer = { content: out.content, toolCalls: out.toolCalls, incomplete: out.finishReason === "length" };
  const done = responseBody(head, call, { answer, usage: responseUsage(out.promptTokens, out.tokens.length) });
  storeResponse(episode.store, call, done);
  if (req.stream) return new ResponseEvents(res, responseBody(head, call), head.messageId).finish(done);
  sendJson(res, 200, done);
}
