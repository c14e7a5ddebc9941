/** Checking sampling parameters and resolving stop conditions, before a request is queued. */
import type { Tokenizer } from "../../model/tokenizer.js";
import type { DrawParams } from "../sampling.js";
import type { SamplingParams } from "../types.js";
import { InputError } from "../../util/errors.js";
import { assertTokens } from "../validate.js";

export interface StopSet {
  ids: Set<number>;
  strings: string[];
}

/** Stop ids and strings; by default the tokenizer's end-of-turn token. */
export function resolveStops(stop: (string | number)[] | undefined, tokenizer: Tokenizer): StopSet {
  const list = stop ?? (tokenizer.eosTokenId !== undefined ? [tokenizer.eosTokenId] : []);
  const ids = new Set<number>(), strings: string[] = [];
  for (const s of list) {
    if (typeof s === "number") ids.add(s);
    else if (s.length > 0) strings.push(s);
  }
  return { ids, strings };
}

/** Most alternatives `topLogprobs` may ask for per sampled token. */
export const MAX_TOP_LOGPROBS = 20;

export function checkSamplingParams(prompt: number[], n: number, maxTokens: number, d: DrawParams, vocab: number, topLogprobs = 0): void {
  assertTokens(prompt, vocab, "sample: the prompt");
  if (!Number.isInteger(n) || n < 1) throw new InputError(`sample: n must be a positive integer, got ${n}`);
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new InputError(`sample: maxTokens must be a positive integer, got ${maxTokens}`);
  if (!(d.temperature >= 0)) throw new InputError(`sample: temperature must be >= 0, got ${d.temperature}`);
  if (!(d.topP > 0 && d.topP <= 1)) throw new InputError(`sample: topP must be in (0, 1], got ${d.topP}`);
  if (!(Number.isInteger(d.topK) && d.topK >= 0)) throw new InputError(`sample: topK must be a non-negative integer, got ${d.topK}`);
  if (!(Number.isInteger(topLogprobs) && topLogprobs >= 0 && topLogprobs <= MAX_TOP_LOGPROBS)) {
    throw new InputError(`sample: topLogprobs must be an integer in [0, ${MAX_TOP_LOGPROBS}], got ${topLogprobs}`);
  }
}

/** `onToken`, when given, must be a function. */
export function checkOnToken(params: SamplingParams): void {
  if (params.onToken !== undefined && typeof params.onToken !== "function") {
    throw new InputError(`sample: onToken must be a function, got ${typeof params.onToken}`);
  }
}
