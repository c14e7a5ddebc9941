/**
 * Drawing one token from a row of logits: temperature, then top-k, then top-p
 * (on the top-k-renormalized distribution), then an inverse-CDF draw. The
 * reported logprob is that of the token under the distribution it was drawn
 * from; greedy (temperature 0) reports the untempered logprob. A row holding
 * NaN or +Infinity, or no finite logit, is a NonFiniteLogitsError: no token.
 */
import type { Rng } from "../util/rng.js";

export interface TokenDraw {
  token: number;
  logprob: number;
}

export interface DrawParams {
  temperature: number;
  topK: number;
  topP: number;
}

/**
 * log-softmax of logits / temperature, in float64. The max logit is subtracted
 * before dividing: logits / 1e-300 would overflow to Infinity (and NaN logprobs),
 * (logits - max) / 1e-300 only underflows to -Infinity away from the argmax.
 */
export function logSoftmax(logits: ArrayLike<number>, temperature = 1): Float64Array {
  const n = logits.length;
  const out = new Float64Array(n);
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[i]);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    out[i] = (logits[i] - max) / temperature; // <= 0, and 0 at the argmax
    sum += Math.exp(out[i]);
  }
  const lse = Math.log(sum); // sum >= 1
  for (let i = 0; i < n; i++) out[i] -= lse;
  return out;
}

/** log of the total probability of `kept` (most likely first); exactly lp[kept[0]] when it is the only one. */
function logMass(lp: Float64Array, kept: number[]): number {
  const top = lp[kept[0]];
  let sum = 0;
  for (const i of kept) sum += Math.exp(lp[i] - top);
  return top + Math.log(sum);
}

/** Whether drawToken draws over the whole vocabulary: a temperature, and no top-k / top-p cut. */
export function untruncated(p: DrawParams, vocab: number): boolean {
  return p.temperature > 0 && !((p.topK > 0 && p.topK < vocab) || p.topP < 1);
}

/**
 * Logits no token can be drawn from: `what` names them (a sequence, a row), `reason` says what is
 * wrong ("NaN at token 17", "+Infinity at token 3", "no finite value (every one is -Infinity)").
 * The addon's drawTokens throws an Error with the same `reason` and the row's index as `row`.
 * The model is at fault, not the request: a plain Error (a server answers 500), not an AgentR1Error.
 */
export class NonFiniteLogitsError extends Error {
  constructor(
    readonly what: string,
    readonly reason: string,
  ) {
    super(`${what}: ${reason}; no token can be drawn from logits that are not finite`);
    this.name = "NonFiniteLogitsError";
  }
}

/** Why no token can be drawn from `logits` (see NonFiniteLogitsError), or undefined when one can. */
export function nonFiniteReason(logits: ArrayLike<number>): string | undefined {
  let finite = false;
  for (let i = 0; i < logits.length; i++) {
    const x = logits[i];
    if (x - x === 0) finite = true;
    else if (x !== -Infinity) return `${Number.isNaN(x) ? "NaN" : "+Infinity"} at token ${i}`;
  }
  return finite ? undefined : "no finite value (every one is -Infinity)";
}

/** Throws a NonFiniteLogitsError naming `what` when no token can be drawn from `logits`. */
export function checkLogits(logits: ArrayLike<number>, what = "logits"): void {
  const reason = nonFiniteReason(logits);
  if (reason !== undefined) throw new NonFiniteLogitsError(what, reason);
}

/** `what` names the row in the error when its logits are not finite (default "logits"). */
export function drawToken(logits: ArrayLike<number>, p: DrawParams, rng: Rng, what?: string): TokenDraw {
  checkLogits(logits, what);
  if (p.temperature <= 0) {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    return { token: best, logprob: logSoftmax(logits)[best] };
  }
  if (untruncated(p, logits.length)) return drawUntruncated(logits, p.temperature, rng);
  const lp = logSoftmax(logits, p.temperature);
  const kept = keptTokens(lp, p.topK, p.topP);
  const log = logMass(lp, kept);
  const u = rng.next() * Math.exp(log);
  let acc = 0;
  for (const i of kept) {
    acc += Math.exp(lp[i]);
    if (u < acc) return { token: i, logprob: lp[i] - log };
  }
  const i = kept[kept.length - 1];
  return { token: i, logprob: lp[i] - log };
}

/**
 * The inverse-CDF draw over the whole vocabulary, with logSoftmax's arithmetic term by term (the
 * same logprobs, bit for bit) but without materializing them: a vocabulary of 150k tokens is
 * drawn from in two passes over the logits and no allocation.
 */
function drawUntruncated(logits: ArrayLike<number>, temperature: number, rng: Rng): TokenDraw {
  const n = logits.length;
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[i]);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp((logits[i] - max) / temperature);
  const lse = Math.log(sum);
  const u = rng.next();
  let acc = 0;
  for (let i = 0; i < n; i++) {
    const lp = (logits[i] - max) / temperature - lse;
    acc += Math.exp(lp);
    if (u < acc) return { token: i, logprob: lp };
  }
  const lp = logSoftmax(logits, temperature);
  const last = lastWithMass(lp);
  return { token: last, logprob: lp[last] };
}

/**
 * The k most likely tokens (most likely first, ties by lower id) under the
 * distribution `drawToken` draws from with the same parameters, with the same
 * logprobs it reports: untempered for greedy, renormalized over the kept
 * tokens when top-k / top-p truncate. Tokens that cannot be drawn (cut by
 * top-k / top-p, or logprob -Infinity at a tiny temperature) are left out, so
 * there may be fewer than k.
 */
export function topAlternatives(logits: ArrayLike<number>, p: DrawParams, k: number): TokenDraw[] {
  if (k <= 0) return [];
  const greedy = p.temperature <= 0;
  const lp = logSoftmax(logits, greedy ? 1 : p.temperature);
  if (!greedy && ((p.topK > 0 && p.topK < lp.length) || p.topP < 1)) {
    const kept = keptTokens(lp, p.topK, p.topP);
    const log = logMass(lp, kept);
    return kept
      .slice(0, k)
      .filter((i) => lp[i] > -Infinity)
      .map((i) => ({ token: i, logprob: lp[i] - log }));
  }
  // Partial selection: keep the best k seen so far, sorted.
  const best: number[] = [];
  const before = (a: number, b: number) => lp[a] > lp[b] || (lp[a] === lp[b] && a < b);
  for (let i = 0; i < lp.length; i++) {
    if (!(lp[i] > -Infinity) || (best.length === k && !before(i, best[k - 1]))) continue;
    let at = best.length === k ? k - 1 : best.length;
    while (at > 0 && before(i, best[at - 1])) {
      best[at] = best[at - 1];
      at--;
    }
    best[at] = i;
  }
  return best.map((i) => ({ token: i, logprob: lp[i] }));
}

/** Token ids kept by top-k then top-p, most likely first (ties by lower id). */
export function keptTokens(lp: Float64Array, topK: number, topP: number): number[] {
  const order = Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a] || a - b);
  const k = topK > 0 ? Math.min(topK, order.length) : order.length;
  const top = order.slice(0, k);
  if (topP >= 1) return top;
  let mass = 0;
  for (const i of top) mass += Math.exp(lp[i]);
  const kept: number[] = [];
  let acc = 0;
  for (const i of top) {
    kept.push(i);
    acc += Math.exp(lp[i]) / mass;
    if (acc >= topP) break;
  }
  return kept;
}

// Rounding can leave the cumulative sum a hair under u; fall back to the last token with mass
// (exp, not lp > -Infinity: at a tiny temperature lp is -1e300 away from the argmax).
function lastWithMass(lp: Float64Array): number {
  for (let i = lp.length - 1; i >= 0; i--) if (Math.exp(lp[i]) > 0) return i;
  return 0;
}
