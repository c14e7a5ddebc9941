/**
 * Per-request bounds of the serve endpoints, so one request cannot take the engine, or the
 * server's memory, from everyone else. Sequences and tokens are checked before anything is
 * sampled (a 400 naming the limit); the response size where the response is written (a 413,
 * or an error event once a stream has started).
 */
import { InputError } from "../util/errors.js";
import { ApiError, badRequest } from "./errors.js";

export interface RequestLimits {
  /** Sequences one request samples: prompts × n. Default 64 (the engine's batch). */
  maxSequences: number;
  /**
   * Tokens one request may make the engine process: its prompt tokens, plus, per sequence, the
   * new tokens it may get (max_tokens, capped by the context window), plus the prompt tokens it
   * asks to score (echo with logprobs). Default 262,144.
   */
  maxRequestTokens: number;
  /** Bytes of one response body, streamed or not. Default 16 MiB. */
  maxResponseBytes: number;
}

export const DEFAULT_REQUEST_LIMITS: RequestLimits = {
  maxSequences: 64,
  maxRequestTokens: 262_144,
  maxResponseBytes: 16 << 20,
};

/** How each limit is changed, for the messages. */
const HOW: Record<keyof RequestLimits, string> = {
  maxSequences: "agent-r1 serve --max-sequences N (startServer option maxSequences)",
  maxRequestTokens: "agent-r1 serve --max-request-tokens N (startServer option maxRequestTokens)",
  maxResponseBytes: "agent-r1 serve --max-response-bytes N (startServer option maxResponseBytes)",
};

/** The defaults with `given` applied; each must be a positive integer. */
export function requestLimits(given: Partial<RequestLimits>): RequestLimits {
  const out = { ...DEFAULT_REQUEST_LIMITS };
  for (const key of Object.keys(HOW) as (keyof RequestLimits)[]) {
    const v = given[key];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 1) throw new InputError(`serve: ${key} must be a positive integer, got ${v}`);
    out[key] = v;
  }
  return out;
}

/** 400 when prompts × n passes maxSequences. */
export function checkSequences(limits: RequestLimits, prompts: number, n: number): void {
  const sequences = prompts * n;
  if (sequences <= limits.maxSequences) return;
  const what = prompts > 1 ? `${prompts} prompts × n ${n}` : `n ${n}`;
  throw badRequest(
    `this request asks for ${sequences} sequences (${what}); this server samples at most ${limits.maxSequences} per request (maxSequences). Send fewer prompts or a smaller n, or raise the limit with ${HOW.maxSequences}`,
    prompts > 1 ? "prompt" : "n",
    "too_many_sequences",
  );
}

export interface RequestWork {
  promptTokens: number;
  /** Σ over sequences of the new tokens each may get. */
  newTokens: number;
  /** Prompt tokens scored for echo + logprobs. */
  scoredTokens?: number;
}

/** 400 when the tokens a request may cost pass maxRequestTokens. */
export function checkRequestTokens(limits: RequestLimits, work: RequestWork, param: string): void {
  const scored = work.scoredTokens ?? 0;
  const total = work.promptTokens + work.newTokens + scored;
  if (total <= limits.maxRequestTokens) return;
  const parts = `${work.promptTokens} prompt + ${work.newTokens} new (sequences × max_tokens)${scored ? ` + ${scored} echoed and scored` : ""}`;
  throw badRequest(
    `this request may take up to ${total} tokens (${parts}); this server allows at most ${limits.maxRequestTokens} per request (maxRequestTokens). Lower max_tokens or n, or send fewer or shorter prompts, or raise the limit with ${HOW.maxRequestTokens}`,
    param,
    "too_many_tokens",
  );
}

/** New tokens per sequence that still fit maxRequestTokens (for requests that leave max_tokens to the server). */
export function newTokensThatFit(limits: RequestLimits, promptTokens: number, n: number): number {
  return Math.max(0, Math.floor((limits.maxRequestTokens - promptTokens) / n));
}

/** The error for a response that would pass maxResponseBytes. */
export function responseTooLarge(limits: RequestLimits): ApiError {
  return new ApiError(
    413,
    `the response would be larger than ${limits.maxResponseBytes} bytes, this server's limit (maxResponseBytes). Ask for fewer tokens, choices or logprobs (echo with logprobs repeats the prompt in every choice), or raise the limit with ${HOW.maxResponseBytes}`,
    { code: "response_too_large" },
  );
}
