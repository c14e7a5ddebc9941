/**
 * What a sampling or training server answers, checked against what was asked before anything uses
 * it (the Tinker client and the `engine.sampler` clients). Each failure is the caller's `fault`
 * for the field, which names the server and the request:
 *  - sampled sequences: as many as were asked for, each at most max_tokens integer token ids inside
 *    the vocabulary, with one logprob per token that is a finite number not above 0 (a sampled token
 *    had a probability above 0, so -Infinity is refused too);
 *  - scored (prompt) logprobs: one per token, a number not above 0 after the first; -Infinity passes
 *    (a token the model rules out), NaN does not;
 *  - forward_backward logprobs: not above 0; NaN and -Infinity pass, as the training numerics they
 *    are (a NaN step is the trainer's to skip, as with a local engine).
 * "Not above 0" allows LOGPROB_SLACK for float rounding.
 */
import type { Fault } from "./tinker-error.js";
import { shownValue } from "./tinker-answer.js";

/** How far above 0 a logprob may come back: a float32 log-softmax of a near-certain token rounds a hair above 0. */
export const LOGPROB_SLACK = 1e-4;

/** What a sampling request asked for. */
export interface SampleBounds {
  /** Sequences asked for (num_samples, n). */
  n: number;
  maxTokens: number;
  /** Token ids must be below this (when known). */
  vocabSize?: number;
}

/** A sequence as a server sent it, before it is trusted. */
export interface UncheckedSequence {
  tokens: unknown;
  logprobs: unknown;
}

/**
 * Why `x` cannot be a logprob, or undefined when it can. `-Infinity` passes where `impossibleOk`,
 * `NaN` where `nanOk`.
 */
export function logprobProblem(x: unknown, o: { impossibleOk?: boolean; nanOk?: boolean } = {}): string | undefined {
  if (typeof x !== "number") return "not a number";
  if (Number.isNaN(x)) return o.nanOk ? undefined : "not a number";
  if (x === -Infinity) return o.impossibleOk ? undefined : "a sampled token cannot have probability 0";
  if (x > LOGPROB_SLACK) return "above 0, a probability over 1";
  return undefined;
}

/** Token ids: integers in [0, vocabSize). */
export function checkTokenIds(tokens: readonly unknown[], vocabSize: number | undefined, field: string, fault: Fault) {
  tokens.forEach((t, p) => {
    if (!Number.isInteger(t)) throw fault(`${field}[${p}]`, `is ${shownValue(t)}, not an integer token id`);
    if ((t as number) < 0 || (vocabSize !== undefined && (t as number) >= vocabSize))
      throw fault(`${field}[${p}]`, `is ${t as number}, outside the vocabulary [0, ${vocabSize ?? "vocab_size"})`);
  });
}

/** Checks sampled sequences against what was asked; the fields are named `sequences[i].tokens[p]` and so on. */
export function checkSampledSequences(
  sequences: UncheckedSequence[],
  b: SampleBounds,
  fault: Fault,
): { tokens: number[]; logprobs: number[] }[] {
  if (sequences.length !== b.n)
    throw fault("sequences", `holds ${sequences.length} sequences; ${b.n} were asked for (num_samples)`);
  return sequences.map((s, i) => {
    const at = `sequences[${i}]`;
    if (!Array.isArray(s.tokens)) throw fault(`${at}.tokens`, `is ${shownValue(s.tokens)}, not a list of token ids`);
    const tokens = s.tokens as unknown[];
    if (tokens.length > b.maxTokens)
      throw fault(`${at}.tokens`, `holds ${tokens.length} tokens, over max_tokens ${b.maxTokens}`);
    checkTokenIds(tokens, b.vocabSize, `${at}.tokens`, fault);
    const logprobs = Array.isArray(s.logprobs) ? (s.logprobs as unknown[]) : [];
    if (logprobs.length !== tokens.length)
      throw fault(`${at}.logprobs`, `holds ${logprobs.length} logprobs for ${tokens.length} tokens`);
    logprobs.forEach((x, p) => {
      const problem = logprobProblem(x);
      if (problem) throw fault(`${at}.logprobs[${p}]`, `is ${shownValue(x)}: ${problem}`);
    });
    return { tokens: tokens as number[], logprobs: logprobs as number[] };
  });
}

/** Checks the logprobs a server scored for a sequence of `length` tokens: one each, the first ignored. */
export function checkScoredLogprobs(logprobs: unknown, length: number, field: string, fault: Fault): number[] {
  if (!Array.isArray(logprobs)) throw fault(field, `is ${shownValue(logprobs)}, not a list of logprobs`);
  const lp = logprobs as unknown[];
  if (lp.length !== length) throw fault(field, `holds ${lp.length} logprobs for a ${length}-token sequence`);
  lp.forEach((x, p) => {
    const problem = p === 0 ? undefined : logprobProblem(x, { impossibleOk: true });
    if (problem) throw fault(`${field}[${p}]`, `is ${shownValue(x)}: ${problem}`);
  });
  return lp.slice(1) as number[];
}

/** Checks one datum's forward_backward logprobs. */
export function checkTrainingLogprobs(row: readonly number[], field: string, fault: Fault): void {
  row.forEach((x, p) => {
    const problem = logprobProblem(x, { impossibleOk: true, nanOk: true });
    if (problem) throw fault(`${field}[${p}]`, `is ${shownValue(x)}: ${problem}`);
  });
}
