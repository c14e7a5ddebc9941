/**
 * Per-request bounds of `agent-r1 serve --tinker`, as `serve` has (src/serve/request-limits.ts), so
 * one request cannot take the engine or the server's memory from everyone else: sequences one
 * asample draws, tokens one request may make the engine process, datums per forward_backward or
 * forward. Each is checked before any work, with a 400 naming the field and the limit. The client
 * config the server hands out keeps a well-behaved SDK's chunks of datums within them.
 */
import { InputError } from "../../util/errors.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { DEFAULT_REQUEST_LIMITS } from "../request-limits.js";

export interface TinkerLimits {
  /** Sequences one asample may draw (num_samples). Default 64, as serve's --max-sequences. */
  maxSequences: number;
  /**
   * Tokens one request may make the engine process: an asample's prompt (twice with
   * prompt_logprobs) plus num_samples × max_tokens; a forward_backward's or forward's tokens over
   * all its datums. Default 262,144, as serve's --max-request-tokens.
   */
  maxRequestTokens: number;
  /** Datums one forward_backward or forward may carry. Default 1024 (the chunk the client config asks for). */
  maxDatums: number;
}

export const DEFAULT_TINKER_LIMITS: TinkerLimits = {
  maxSequences: DEFAULT_REQUEST_LIMITS.maxSequences,
  maxRequestTokens: DEFAULT_REQUEST_LIMITS.maxRequestTokens,
  maxDatums: 1024,
};

/** How each limit is raised, for the messages. */
const HOW: Record<keyof TinkerLimits, string> = {
  maxSequences: "agent-r1 serve --tinker --max-sequences N (option maxSequences)",
  maxRequestTokens: "agent-r1 serve --tinker --max-request-tokens N (option maxRequestTokens)",
  maxDatums: "startTinkerServer option maxDatums",
};

/** The defaults with `given` applied; each must be a positive integer. */
export function tinkerLimits(given: Partial<TinkerLimits>): TinkerLimits {
  const out = { ...DEFAULT_TINKER_LIMITS };
  for (const key of Object.keys(HOW) as (keyof TinkerLimits)[]) {
    const v = given[key];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 1)
      throw new InputError(`serve --tinker: ${key} must be a positive integer, got ${v}`);
    out[key] = v;
  }
  return out;
}

/** Bytes the SDK counts per datum token at least (an int32 token and its int64 target), for chunking. */
const MIN_BYTES_PER_TOKEN = 12;

/** The chunking the client config asks for: no chunk past maxDatums, nor (by its byte count) past maxRequestTokens. */
export function chunkConfig(limits: TinkerLimits): {
  fwdbwd_max_chunk_len: number;
  fwdbwd_max_chunk_bytes_count: number;
} {
  return {
    fwdbwd_max_chunk_len: limits.maxDatums,
    fwdbwd_max_chunk_bytes_count: Math.min(5_000_000, limits.maxRequestTokens * MIN_BYTES_PER_TOKEN),
  };
}

/** 400 when `n` passes maxSequences. */
export function checkSamples(limits: TinkerLimits, n: number): void {
  if (n > limits.maxSequences)
    throw new TinkerError(
      `num_samples ${n} is over this server's limit of ${limits.maxSequences} sequences per request (maxSequences); ask for fewer, or raise it with ${HOW.maxSequences}`,
    );
}

/** 400 when `count` datums pass maxDatums. */
export function checkDatumCount(limits: TinkerLimits, count: number, field: string): void {
  if (count > limits.maxDatums)
    throw new TinkerError(
      `${field} holds ${count} datums; this server takes at most ${limits.maxDatums} per request (maxDatums): send them in chunks, or raise it with ${HOW.maxDatums}`,
    );
}

/** 400 when a request's tokens pass maxRequestTokens; `what` says how they were counted. */
export function checkRequestTokens(limits: TinkerLimits, total: number, field: string, what: string): void {
  if (total > limits.maxRequestTokens)
    throw new TinkerError(
      `${field}: this request may take up to ${total} tokens (${what}); this server allows at most ${limits.maxRequestTokens} per request (maxRequestTokens): send less, or raise it with ${HOW.maxRequestTokens}`,
    );
}
