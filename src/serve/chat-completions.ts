/**
 * POST /v1/chat/completions: messages rendered with the model's own chat
 * template (tools included unless tool_choice is "none"), sampled on the
 * engine, and answered as a chat.completion, or as chat.completion.chunk
 * events when `stream` is set. Tool calls are read from the answer's text
 * (Hermes format); the text outside them stays the message content.
 */
import { forcedOpening, parseToolChoice } from "./tool-choice.js";
import { sampleUntilClosed } from "./cancel-on-close.js";
import type { ServerResponse } from "node:http";
import { renderMessages, withTemplateVars } from "../agent/chat-setup.js";
import { newId, unixNow, type ServeContext } from "./context.js";
import { badRequest } from "./errors.js";
import { sendChoices } from "./http.js";
import { chatLogprobEntries, type ChatTokenLogprob } from "./logprobs.js";
import { decodeSequence, TokenStrings, type DecodedSequence } from "./output-text.js";
import { rejectUnsupported, resolveStops, roomAfter, samplingParams } from "./sampling-options.js";
import { chatRequestSchema, parseRequest, type ChatRequest } from "./schemas.js";
import { SseWriter } from "./sse.js";
import { checkRequestTokens, checkSequences, newTokensThatFit, type RequestLimits } from "./request-limits.js";
import { LiveText } from "./live-text.js";
import type { Tokenizer } from "../model/tokenizer.js";
import type { Stops } from "./sampling-options.js";
import { extractToolCalls, templateMessages, toolSchemas, type AnswerWithCalls } from "./tool-calls.js";

type FinishReason = "stop" | "length" | "tool_calls";

interface Choice {
  index: number;
  out: DecodedSequence;
  /** Set when the answer holds tool calls (and tools were offered). */
  calls?: AnswerWithCalls;
  finishReason: FinishReason;
}

/** The request, parsed and checked against what this server supports. */
function checkChatRequest(body: unknown): ChatRequest {
  const req = parseRequest(chatRequestSchema, body);
  rejectUnsupported(req);
  if (req.response_format && req.response_format.type !== "text")
    throw badRequest(
      `response_format '${req.response_format.type}' is not supported by this server`,
      "response_format",
    );
  if (req.top_logprobs && !req.logprobs) throw badRequest("top_logprobs requires logprobs: true", "top_logprobs");
  return req;
}

/** The prompt's tokens: the rendered conversation, then a forced tool call's opening (which starts each answer). */
function chatPrompt(ctx: ServeContext, req: ChatRequest): { prompt: number[]; forced: string; useTools: boolean } {
  const choice = parseToolChoice(
    req.tool_choice,
    (req.tools ?? []).map((t) => t.function.name),
  );
  const useTools = (req.tools?.length ?? 0) > 0 && choice !== "none";
  const forced = forcedOpening(choice);
  const chat = withTemplateVars(ctx.chat(), req.chat_template_kwargs ?? undefined);
  const text = renderMessages(chat, templateMessages(req.messages), {
    tools: useTools ? toolSchemas(req.tools!) : undefined,
    addGenerationPrompt: true,
  });
  return { prompt: ctx.engine.tokenizer.encode(text + forced), forced, useTools };
}

/** New tokens per answer: left to the server, what fits the request token budget; asked for, it must fit. */
function chatMaxTokens(ctx: ServeContext, req: ChatRequest, promptTokens: number, n: number): number {
  const room = roomAfter(ctx, promptTokens, "messages");
  checkSequences(ctx.limits, 1, n);
  const asked = req.max_completion_tokens ?? req.max_tokens;
  const maxTokens = Math.min(
    asked ?? Math.min(ctx.defaultMaxTokens ?? room, newTokensThatFit(ctx.limits, promptTokens, n)),
    room,
  );
  const param =
    req.max_completion_tokens != null ? "max_completion_tokens" : req.max_tokens != null ? "max_tokens" : "messages";
  checkRequestTokens(ctx.limits, { promptTokens, newTokens: n * Math.max(maxTokens, 1) }, param);
  return maxTokens;
}

export async function chatCompletions(served: ServeContext, body: unknown, res: ServerResponse): Promise<void> {
  const req = checkChatRequest(body);
  const ctx = served.forModel(req.model); // the base model, or a loaded LoRA adapter
  const tokenizer = ctx.engine.tokenizer;
  const chat = ctx.chat();
  const { prompt, forced, useTools } = chatPrompt(ctx, req);
  const n = req.n ?? 1;
  const maxTokens = chatMaxTokens(ctx, req, prompt.length, n);
  const stops = resolveStops(req, [chat.endOfTurnId, tokenizer.eosTokenId]);
  const topLogprobs = req.logprobs ? (req.top_logprobs ?? 0) : 0;

  const head = { id: newId("chatcmpl-"), created: unixNow(), model: ctx.modelId, system_fingerprint: null };
  // Streaming sends text as it is sampled; with logprobs it waits for the whole answer (the alternatives come with it).
  const live =
    req.stream && !req.logprobs && !forced
      ? new LiveChat(res, req, head, n, tokenizer, stops, useTools, ctx.limits)
      : undefined;
  const params = samplingParams(req, stops, maxTokens, topLogprobs);
  if (live) params.onToken = (e) => live.token(e.index, e.token);
  // A response that closes before sampling is done (the client left, or a stream was cut at
  // maxResponseBytes) cancels the sampling; nothing more is written or logged then.
  const result = await sampleUntilClosed(ctx.engine, prompt, params, res);
  if (!result) return;
  const { sequences } = result;

  const choices: Choice[] = sequences.map((seq, index) => {
    const decoded = decodeSequence(tokenizer, seq, stops);
    const out = forced ? { ...decoded, text: forced + decoded.text } : decoded;
    const calls = useTools ? extractToolCalls(out.text) : undefined;
    return { index, out, calls, finishReason: calls ? "tool_calls" : out.finishReason };
  });
  const completionTokens = sequences.reduce((s, q) => s + q.tokens.length, 0);
  const usage = {
    prompt_tokens: prompt.length,
    completion_tokens: completionTokens,
    total_tokens: prompt.length + completionTokens,
  };
  const strings = new TokenStrings(tokenizer);
  const logprobsOf = (c: Choice) => (req.logprobs ? chatLogprobEntries(strings, c.out.seq, 0, c.out.kept) : undefined);

  if (live) return live.finish(choices, usage);
  if (req.stream) return streamChoices(res, req, head, choices, usage, logprobsOf, strings, ctx.limits);

  // Choice by choice, so logprobs cannot build a response past maxResponseBytes.
  sendChoices(
    res,
    ctx.limits,
    { ...head, object: "chat.completion" },
    choices,
    (c) => {
      const entries = logprobsOf(c);
      const message = c.calls
        ? { role: "assistant", content: c.calls.content, tool_calls: c.calls.toolCalls, refusal: null }
        : { role: "assistant", content: c.out.text, refusal: null };
      return {
        index: c.index,
        message,
        logprobs: entries ? { content: entries, refusal: null } : null,
        finish_reason: c.finishReason,
      };
    },
    usage,
  );
}

type ChatHead = { id: string; created: number; model: string; system_fingerprint: null };
type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/**
 * Streaming while sampling: the response starts with the first token (so
 * errors before it are still plain JSON errors), with a role delta per choice;
 * each token's releasable text (see LiveText) goes out as a content delta at
 * once, choices interleaved. At the end each choice gets the rest of its
 * content, its tool calls (if any) and its finish reason.
 */
class LiveChat {
  private sse?: SseWriter;
  private readonly texts: LiveText[];
  private readonly includeUsage: boolean;

  constructor(
    private readonly res: ServerResponse,
    req: ChatRequest,
    private readonly head: ChatHead,
    private readonly n: number,
    tokenizer: Tokenizer,
    stops: Stops,
    tools: boolean,
    private readonly limits: RequestLimits,
  ) {
    this.includeUsage = req.stream_options?.include_usage === true;
    this.texts = Array.from({ length: n }, () => new LiveText(tokenizer, stops, tools));
  }

  private send(choice: object): void {
    if (!this.sse) {
      this.sse = new SseWriter(this.res, this.limits);
      for (let i = 0; i < this.n; i++)
        this.send({ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null });
    }
    this.sse.send({
      ...this.head,
      object: "chat.completion.chunk",
      choices: [choice],
      ...(this.includeUsage ? { usage: null } : {}),
    });
  }

  token(index: number, token: number): void {
    const text = this.texts[index];
    if (!text) return;
    const piece = text.push(token);
    if (piece !== "") this.send({ index, delta: { content: piece }, logprobs: null, finish_reason: null });
  }

  finish(choices: Choice[], usage: Usage): void {
    for (const c of choices) {
      const text = this.texts[c.index];
      const rest = text.rest(c.calls ? (c.calls.content ?? "") : c.out.text);
      if (rest !== "") this.send({ index: c.index, delta: { content: rest }, logprobs: null, finish_reason: null });
      c.calls?.toolCalls.forEach((call, j) => {
        this.send({
          index: c.index,
          delta: { tool_calls: [{ index: j, id: call.id, type: "function", function: call.function }] },
          logprobs: null,
          finish_reason: null,
        });
      });
      this.send({ index: c.index, delta: {}, logprobs: null, finish_reason: c.finishReason });
    }
    if (this.includeUsage) this.sse!.send({ ...this.head, object: "chat.completion.chunk", choices: [], usage });
    this.sse!.done();
  }
}

/**
 * The same answers as chunks, after sampling (streaming with logprobs): per
 * choice a role delta, then the content one token's text at a time (or, for tool calls, the content and one delta per
 * call), then the finish reason.
 */
function streamChoices(
  res: ServerResponse,
  req: ChatRequest,
  head: { id: string; created: number; model: string; system_fingerprint: null },
  choices: Choice[],
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number },
  logprobsOf: (c: Choice) => ChatTokenLogprob[] | undefined,
  strings: TokenStrings,
  limits: RequestLimits,
): void {
  const sse = new SseWriter(res, limits);
  const includeUsage = req.stream_options?.include_usage === true;
  const send = (choice: object) =>
    sse.send({ ...head, object: "chat.completion.chunk", choices: [choice], ...(includeUsage ? { usage: null } : {}) });
  const lp = (entries: ChatTokenLogprob[] | undefined) => (entries ? { content: entries, refusal: null } : null);

  for (const c of choices) {
    send({ index: c.index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null });
    if (c.calls) {
      let entries = logprobsOf(c);
      if (c.calls.content !== null) {
        send({ index: c.index, delta: { content: c.calls.content }, logprobs: lp(entries), finish_reason: null });
        entries = undefined;
      }
      c.calls.toolCalls.forEach((call, j) => {
        send({
          index: c.index,
          delta: { tool_calls: [{ index: j, id: call.id, type: "function", function: call.function }] },
          logprobs: lp(entries),
          finish_reason: null,
        });
        entries = undefined;
      });
    } else {
      // Tokens that add no text yet (part of a character) ride along with the next one that does.
      let from = 0;
      for (let i = 0; i < c.out.kept; i++) {
        const piece = c.out.pieces[i];
        if (piece === "" && i < c.out.kept - 1) continue;
        const entries = req.logprobs ? chatLogprobEntries(strings, c.out.seq, from, i + 1) : undefined;
        send({ index: c.index, delta: { content: piece }, logprobs: lp(entries), finish_reason: null });
        from = i + 1;
      }
    }
    send({ index: c.index, delta: {}, logprobs: null, finish_reason: c.finishReason });
  }
  if (includeUsage) sse.send({ ...head, object: "chat.completion.chunk", choices: [], usage });
  sse.done();
}
