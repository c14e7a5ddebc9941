/**
 * POST /chat/completions on the recording gateway: the request is checked as `agent-r1 serve` checks
 * it (src/serve/schemas.ts), the episode's recorder samples and records the completion
 * (episode-recorder.ts), and the answer goes back as a chat.completion, or as chunks when streamed
 * (sent once the completion is sampled).
 */
import type { ServerResponse } from "node:http";
import type { ChatSetup } from "../agent/chat-setup.js";
import { ApiError, badRequest } from "../serve/errors.js";
import { sendJson } from "../serve/http.js";
import { newId } from "../serve/context.js";
import { untilClosed } from "../serve/cancel-on-close.js";
import { chatRequestSchema, parseRequest } from "../serve/schemas.js";
import { templateMessages, toolSchemas } from "../serve/tool-calls.js";
import { forcedOpening, parseToolChoice } from "../serve/tool-choice.js";
import type { Completion, EpisodeRecorder } from "./episode-recorder.js";
import { shown } from "../util/shown.js";

export interface ChatEpisode {
  recorder: EpisodeRecorder;
  /** The model name the gateway serves. */
  model: string;
  chat: ChatSetup;
}

export async function episodeChat(
  episode: ChatEpisode,
  raw: unknown,
  res: ServerResponse,
  userAgent?: string,
): Promise<void> {
  const body = parseRequest(chatRequestSchema, raw);
  if (body.model !== undefined && body.model !== episode.model)
    throw new ApiError(404, `The model '${shown(body.model)}' does not exist; this gateway serves '${episode.model}'`, {
      code: "model_not_found",
      param: "model",
    });
  if ((body.n ?? 1) !== 1) throw badRequest("n must be 1: an episode is one conversation", "n");
  // Never ignored in silence: an agent that parses the answer as JSON would fail for a reason it cannot see.
  if (body.response_format && body.response_format.type !== "text")
    throw badRequest(
      `response_format '${body.response_format.type}' is not supported by the gateway (no constrained decoding yet); ask for JSON in the prompt instead`,
      "response_format",
    );
  const choice = parseToolChoice(
    body.tool_choice,
    (body.tools ?? []).map((t) => t.function.name),
  );
  const tools = body.tools && body.tools.length > 0 && choice !== "none" ? toolSchemas(body.tools) : undefined;
  const out = await untilClosed(res, (signal) =>
    episode.recorder.complete({
      messages: templateMessages(body.messages),
      tools,
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
      temperature: body.temperature ?? undefined,
      topP: body.top_p ?? undefined,
      userAgent,
      forced: forcedOpening(choice) || undefined,
      stop: typeof body.stop === "string" ? [body.stop] : (body.stop ?? undefined),
      templateVars: body.chat_template_kwargs ?? undefined,
      signal,
    }),
  );
  if (!out) return;
  const head = {
    id: newId("chatcmpl-"),
    created: Math.floor(Date.now() / 1000),
    model: episode.model,
  };
  const usage = {
    prompt_tokens: out.promptTokens,
    completion_tokens: out.tokens.length,
    total_tokens: out.promptTokens + out.tokens.length,
  };
  if (body.stream) return stream(res, head, out, usage, body.stream_options?.include_usage === true);
  const message = {
    role: "assistant",
    content: out.content,
    ...(out.toolCalls ? { tool_calls: out.toolCalls } : {}),
    refusal: null,
  };
  sendJson(res, 200, {
    ...head,
    object: "chat.completion",
    choices: [
      {
        index: 0,
        message,
        logprobs: body.logprobs ? { content: logprobEntries(out, episode.chat), refusal: null } : null,
        finish_reason: out.finishReason,
      },
    ],
    usage,
  });
}

function logprobEntries(out: Completion, chat: ChatSetup) {
  return out.tokens.map((t, i) => {
    const token = chat.tokenizer.decode([t]);
    return { token, logprob: out.logprobs[i], bytes: [...Buffer.from(token, "utf8")], top_logprobs: [] };
  });
}

/** The whole answer as chat.completion.chunk events: the role, the content, each tool call, the finish. */
function stream(
  res: ServerResponse,
  head: Record<string, unknown>,
  out: Completion,
  usage: Record<string, number>,
  includeUsage: boolean,
): void {
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" });
  const send = (delta: Record<string, unknown>, finish: string | null) =>
    res.write(
      `data: ${JSON.stringify({ ...head, object: "chat.completion.chunk", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) })}\n\n`,
    );
  send({ role: "assistant", content: "" }, null);
  if (out.content) send({ content: out.content }, null);
  out.toolCalls?.forEach((c, index) => send({ tool_calls: [{ index, ...c }] }, null));
  send({}, out.finishReason);
  if (includeUsage)
    res.write(`data: ${JSON.stringify({ ...head, object: "chat.completion.chunk", choices: [], usage })}\n\n`);
  res.end("data: [DONE]\n\n");
}
