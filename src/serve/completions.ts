/**
 * POST /v1/completions: the token-in / token-out path. The prompt is text or
 * token ids (or a batch of either); every choice returns its text plus the raw
 * sampled ids (`token_ids`) and the prompt's ids (`prompt_token_ids`), so a
 * client can build training data from exactly what was sampled. `logprobs`
 * (an integer k) reports every sampled token's logprob, aligned with
 * `token_ids`, and the k most likely alternatives when k > 0.
 */
import type { ServerResponse } from "node:http";
import type { SampledSequence, SampleResult } from "../engine/types.js";
import { IncrementalDecoder } from "../model/tokenizer.js";
import { newId, unixNow, type ServeContext } from "./context.js";
import { badRequest } from "./errors.js";
import { sendChoices } from "./http.js";
import { completionLogprobs, type CompletionLogprobs } from "./logprobs.js";
import { decodeSequence, TokenStrings, type DecodedSequence } from "./output-text.js";
import { rejectUnsupported, resolveStops, roomAfter, samplingParams } from "./sampling-options.js";
import { completionRequestSchema, parseRequest, type CompletionRequest } from "./schemas.js";
import { SseWriter } from "./sse.js";
import { checkRequestTokens, checkSequences, type RequestLimits } from "./request-limits.js";
import { LiveText } from "./live-text.js";
import type { Tokenizer } from "../model/tokenizer.js";
import type { Stops } from "./sampling-options.js";

/** OpenAI's default for this endpoint. */
const DEFAULT_MAX_TOKENS = 16;

interface Prompt {
  ids: number[];
  /** The prompt as echoed: the text sent, or the ids decoded. */
  text: string;
}

interface Choice {
  index: number;
  prompt: Prompt;
  out: DecodedSequence;
  /** Logprobs of the prompt's tokens (echo + logprobs only); entry 0 is null. */
  promptLogprobs?: (number | null)[];
}

export async function completions(served: ServeContext, body: unknown, res: ServerResponse): Promise<void> {
  const req = parseRequest(completionRequestSchema, body);
  const ctx = served.forModel(req.model); // the base model, or a loaded LoRA adapter
  rejectUnsupported(req);
  if (req.suffix) throw badRequest("suffix is not supported by this server", "suffix");
  const n = req.n ?? 1;
  if (req.best_of != null && req.best_of !== n)
    throw badRequest("best_of is not supported by this server (leave it unset or equal to n)", "best_of");

  const tokenizer = ctx.engine.tokenizer;
  const prompts = promptList(ctx, req.prompt);
  checkSequences(ctx.limits, prompts.length, n);
  const maxTokens = req.max_tokens ?? DEFAULT_MAX_TOKENS;
  const stops = resolveStops(req, [tokenizer.eosTokenId]);
  const wantLogprobs = req.logprobs != null;
  const temperature = req.temperature ?? 1;

  // Check every prompt before any is sampled.
  const window = ctx.engine.config.maxPositionEmbeddings;
  const budgets = prompts.map((p, i) => {
    const param = prompts.length > 1 ? `prompt.${i}` : "prompt";
    if (maxTokens > 0) return Math.min(maxTokens, roomAfter(ctx, p.ids.length, param));
    if (p.ids.length > window)
      throw badRequest(
        `the prompt is ${p.ids.length} tokens; this model's context window is ${window} tokens`,
        param,
        "context_length_exceeded",
      );
    return 0;
  });
  const promptTokens = prompts.reduce((s, p) => s + p.ids.length, 0);
  const newTokens = n * budgets.reduce((s, b) => s + b, 0);
  checkRequestTokens(
    ctx.limits,
    { promptTokens, newTokens, scoredTokens: req.echo && wantLogprobs ? promptTokens : 0 },
    "max_tokens",
  );
  const head = {
    id: newId("cmpl-"),
    object: "text_completion",
    created: unixNow(),
    model: ctx.modelId,
    system_fingerprint: null,
  };
  // Streaming sends text as it is sampled; with logprobs it waits for the whole answer.
  const live =
    req.stream && !wantLogprobs
      ? new LiveCompletions(res, req, head, prompts, n, tokenizer, stops, ctx.limits)
      : undefined;
  // A response that closes before sampling is done (the client left, or a stream was cut at
  // maxResponseBytes) cancels the sampling; nothing more is written or logged then.
  const gone = new AbortController();
  let sampled = false;
  res.on("close", () => sampled || gone.abort());
  const results = await Promise.all(
    prompts.map((p, i): Promise<SampleResult> => {
      if (budgets[i] === 0)
        return Promise.resolve({
          sequences: Array.from({ length: n }, (): SampledSequence => ({
            tokens: [],
            logprobs: [],
            stopReason: "length",
          })),
        });
      const params = samplingParams(req, stops, budgets[i], req.logprobs ?? 0);
      if (live) params.onToken = (e) => live.token(i * n + e.index, e.token);
      params.signal = gone.signal;
      return ctx.engine.sample(p.ids, params);
    }),
  ).catch((e: unknown) => (gone.signal.aborted ? undefined : Promise.reject(e)));
  sampled = true;
  if (!results || res.writableEnded) return;
  // Echoed prompt tokens are scored at the sampling temperature (the model's own distribution when greedy).
  const promptLogprobs =
    req.echo && wantLogprobs
      ? await ctx.engine.computeLogprobs(
          prompts.map((p) => p.ids),
          { temperature: temperature > 0 ? temperature : 1 },
        )
      : undefined;

  const choices: Choice[] = results.flatMap((r, p) =>
    r.sequences.map((seq, i) => ({
      index: p * n + i,
      prompt: prompts[p],
      out: decodeSequence(tokenizer, seq, stops),
      promptLogprobs: promptLogprobs?.[p],
    })),
  );
  const completionTokens = choices.reduce((s, c) => s + c.out.seq.tokens.length, 0);
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
  const strings = new TokenStrings(tokenizer);

  if (live) return live.finish(choices, usage);
  if (req.stream) return streamChoices(res, req, head, choices, usage, strings, ctx.limits);

  // Choice by choice, so logprobs + echo cannot build a response past maxResponseBytes.
  sendChoices(
    res,
    ctx.limits,
    head,
    choices,
    (c) => ({
      index: c.index,
      text: (req.echo ? c.prompt.text : "") + c.out.text,
      logprobs: wantLogprobs ? choiceLogprobs(strings, req, c) : null,
      finish_reason: c.out.finishReason,
      token_ids: c.out.seq.tokens,
      prompt_token_ids: c.prompt.ids,
    }),
    usage,
  );
}

function promptList(ctx: ServeContext, prompt: CompletionRequest["prompt"]): Prompt[] {
  const tokenizer = ctx.engine.tokenizer;
  const vocab = ctx.engine.config.vocabSize;
  const list: (string | number[])[] =
    typeof prompt === "string"
      ? [prompt]
      : typeof prompt[0] === "number"
        ? [prompt as number[]]
        : (prompt as (string | number[])[]);
  return list.map((p, i) => {
    const param = list.length > 1 ? `prompt.${i}` : "prompt";
    if (typeof p === "string") {
      const ids = tokenizer.encode(p);
      if (ids.length === 0) throw badRequest("the prompt is empty", param);
      return { ids, text: p };
    }
    const bad = p.find((t) => t >= vocab);
    if (bad !== undefined) throw badRequest(`token id ${bad} is outside the vocabulary [0, ${vocab})`, param);
    return { ids: p, text: tokenizer.decode(p) };
  });
}

/** Logprobs over (echoed prompt +) every sampled token, aligned with prompt_token_ids + token_ids. */
function choiceLogprobs(strings: TokenStrings, req: CompletionRequest, c: Choice): CompletionLogprobs {
  const seq = c.out.seq;
  const k = req.logprobs ?? 0;
  const echo = req.echo === true;
  const promptIds = echo ? c.prompt.ids : [];
  return completionLogprobs(
    strings,
    [...promptIds, ...seq.tokens],
    [...(echo ? (c.promptLogprobs ?? promptIds.map(() => null)) : []), ...seq.logprobs],
    k > 0 ? [...promptIds.map(() => null), ...(seq.topLogprobs ?? seq.tokens.map(() => null))] : null,
    [...(echo ? promptPieces(strings, c.prompt) : []), ...c.out.pieces],
    0,
  );
}

/** The echoed prompt's text split by token (for text offsets). */
function promptPieces(strings: TokenStrings, prompt: Prompt): string[] {
  const decoder = new IncrementalDecoder(strings.tokenizer);
  const pieces = prompt.ids.map((t) => decoder.push(t));
  pieces[pieces.length - 1] += decoder.flush();
  return pieces;
}

type CompletionHead = { id: string; object: string; created: number; model: string; system_fingerprint: null };
type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/**
 * Streaming while sampling (no logprobs): the response starts with the first
 * token (or at the end when there is none), with the echoed prompts if asked;
 * then one chunk per sampled token, carrying its id and the text it releases
 * (see LiveText: text that could start a stop string waits, so a chunk's text
 * need not be its token's). At the end each choice gets the rest of its text
 * and its finish reason. The ids and the texts concatenate to the non-streamed ones.
 */
class LiveCompletions {
  private sse?: SseWriter;
  private readonly texts: LiveText[];
  private readonly includeUsage: boolean;

  constructor(
    private readonly res: ServerResponse,
    private readonly req: CompletionRequest,
    private readonly head: CompletionHead,
    private readonly prompts: Prompt[],
    private readonly n: number,
    tokenizer: Tokenizer,
    stops: Stops,
    private readonly limits: RequestLimits,
  ) {
    this.includeUsage = req.stream_options?.include_usage === true;
    this.texts = Array.from({ length: prompts.length * n }, () => new LiveText(tokenizer, stops, false));
  }

  private send(choice: object): void {
    if (!this.sse) {
      this.sse = new SseWriter(this.res, this.limits);
      if (this.req.echo) {
        this.prompts.forEach((p, i) => {
          for (let j = 0; j < this.n; j++)
            this.send({
              index: i * this.n + j,
              text: p.text,
              logprobs: null,
              finish_reason: null,
              token_ids: [],
              prompt_token_ids: p.ids,
            });
        });
      }
    }
    this.sse.send({ ...this.head, choices: [choice], ...(this.includeUsage ? { usage: null } : {}) });
  }

  token(index: number, token: number): void {
    const text = this.texts[index];
    if (!text) return;
    this.send({ index, text: text.push(token), logprobs: null, finish_reason: null, token_ids: [token] });
  }

  finish(choices: Choice[], usage: Usage): void {
    for (const c of choices) {
      const text = this.texts[c.index];
      // Tokens the engine did not report one by one (none, normally) go out here.
      const ids = c.out.seq.tokens.slice(text.tokens);
      const rest = text.rest(c.out.text);
      if (rest !== "" || ids.length > 0)
        this.send({ index: c.index, text: rest, logprobs: null, finish_reason: null, token_ids: ids });
      this.send({ index: c.index, text: "", logprobs: null, finish_reason: c.out.finishReason, token_ids: [] });
    }
    if (this.includeUsage) this.sse!.send({ ...this.head, choices: [], usage });
    this.sse!.done();
  }
}

/** The same answers as chunks, after sampling (streaming with logprobs). */
function streamChoices(
  res: ServerResponse,
  req: CompletionRequest,
  head: { id: string; object: string; created: number; model: string; system_fingerprint: null },
  choices: Choice[],
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number },
  strings: TokenStrings,
  limits: RequestLimits,
): void {
  const sse = new SseWriter(res, limits);
  const includeUsage = req.stream_options?.include_usage === true;
  const send = (choice: object) => sse.send({ ...head, choices: [choice], ...(includeUsage ? { usage: null } : {}) });
  const k = req.logprobs ?? 0;
  const wantLogprobs = req.logprobs != null;

  for (const c of choices) {
    let offset = 0;
    if (req.echo) {
      const pieces = promptPieces(strings, c.prompt);
      const lp = wantLogprobs
        ? completionLogprobs(
            strings,
            c.prompt.ids,
            c.promptLogprobs ?? c.prompt.ids.map(() => null),
            k > 0 ? c.prompt.ids.map(() => null) : null,
            pieces,
            0,
          )
        : null;
      send({
        index: c.index,
        text: c.prompt.text,
        logprobs: lp,
        finish_reason: null,
        token_ids: [],
        prompt_token_ids: c.prompt.ids,
      });
      offset = c.prompt.text.length;
    }
    const seq = c.out.seq;
    seq.tokens.forEach((id, i) => {
      const piece = c.out.pieces[i];
      const lp = wantLogprobs
        ? completionLogprobs(
            strings,
            [id],
            [seq.logprobs[i]],
            k > 0 ? [seq.topLogprobs?.[i] ?? null] : null,
            [piece],
            offset,
          )
        : null;
      send({ index: c.index, text: piece, logprobs: lp, finish_reason: null, token_ids: [id] });
      offset += piece.length;
    });
    send({ index: c.index, text: "", logprobs: null, finish_reason: c.out.finishReason, token_ids: [] });
  }
  if (includeUsage) sse.send({ ...head, choices: [], usage });
  sse.done();
}
