/** Checking sampling parameters and resolving stop conditions, before a request is queued. */
import type { Tokenizer } from "../../model/tokenizer.js";
import type { DrawParams } from "../sampling.js";
import type { SamplingParams } from "../types.js";
import { InputError } from "../../util/errors.js";
import { randomSeed } from "../../util/rng.js";
import { assertTokens } from "../validate.js";

export interface StopSet {
  ids: Set<number>;
  strings: string[];
}

/** Stop ids and strings; by default the tokenizer's end-of-turn token. */
export function resolveStops(stop: (string | number)[] | undefined, tokenizer: Tokenizer): StopSet {
  const list = stop ?? (tokenizer.eosTokenId !== undefined ? [tokenizer.eosTokenId] : []);
  const ids = new Set<number>(),
    strings: string[] = [];
  for (const s of list) {
    if (typeof s === "number") ids.add(s);
    else if (s.length > 0) strings.push(s);
  }
  return { ids, strings };
}

/** Most alternatives `topLogprobs` may ask for per sampled token. */
export const MAX_TOP_LOGPROBS = 20;

export function checkSamplingParams(
  prompt: number[],
  n: number,
  maxTokens: number,
  d: DrawParams,
  vocab: number,
  topLogprobs = 0,
): void {
  assertTokens(prompt, vocab, "sample: the prompt");
  if (!Number.isInteger(n) || n < 1) throw new InputError(`sample: n must be a positive integer, got ${n}`);
  if (!Number.isInteger(maxTokens) || maxTokens < 1)
    throw new InputError(`sample: maxTokens must be a positive integer, got ${maxTokens}`);
  if (!(d.temperature >= 0 && d.temperature < Infinity))
    throw new InputError(`sample: temperature must be a finite number >= 0, got ${d.temperature}`);
  if (!(d.topP > 0 && d.topP <= 1)) throw new InputError(`sample: topP must be in (0, 1], got ${d.topP}`);
  if (!(Number.isInteger(d.topK) && d.topK >= 0))
    throw new InputError(`sample: topK must be a non-negative integer, got ${d.topK}`);
  if (!(Number.isInteger(topLogprobs) && topLogprobs >= 0 && topLogprobs <= MAX_TOP_LOGPROBS)) {
    throw new InputError(`sample: topLogprobs must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${topLogprobs}`);
  }
}

/** `onToken`, when given, must be a function; `signal` an AbortSignal; `seed` an integer. */
export function checkRequestOptions(params: SamplingParams): void {
  if (params.onToken !== undefined && typeof params.onToken !== "function") {
    throw new InputError(`sample: onToken must be a function, got ${typeof params.onToken}`);
  }
  const signal = params.signal as Partial<AbortSignal> | undefined;
  if (
    signal !== undefined &&
    !(typeof signal?.aborted === "boolean" && typeof signal.addEventListener === "function")
  ) {
    throw new InputError(
      `sample: signal must be an AbortSignal (from an AbortController), got ${signal === null ? "null" : typeof signal}`,
    );
  }
  // NaN, Infinity and 1.5 used to be floored / truncated silently (NaN and Infinity to seed 0).
  if (params.seed !== undefined && !Number.isInteger(params.seed))
    throw new InputError(`sample: seed must be an integer, got ${params.seed}`);
}

/**
 * The 32-bit seed a request's random streams start from. Seeds in [0, 2^32) are
 * used as they are; any other integer is hashed from its float64 bits, since
 * truncating to 32 bits made 2^32, 2^53 and 1e300 all draw like seed 0 and -1
 * like 2^32 - 1. (Integers above 2^53 already collapse when the number is parsed.)
 */
export function resolveSeed(seed: number | undefined): number {
  if (seed === undefined) return randomSeed();
  if (seed >= 0 && seed < 2 ** 32) return seed;
  const [lo, hi] = new Uint32Array(new Float64Array([seed]).buffer);
  return mix32(mix32(lo) ^ hi);
}

function mix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
