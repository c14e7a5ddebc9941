/**
 * Policy losses per token, in plain numbers: the reference the tensor code is
 * tested against, and the source of the metrics forwardBackward reports.
 *
 * Notation: p learner logprob, q sampling logprob, A advantage, r = exp(p - q).
 *  - cross_entropy:        l = -p
 *  - importance_sampling:  l = -r·A
 *  - ppo (dual clip):      l = max(-r·A, -clip(r, 1-clipLow, 1+clipHigh)·A); if A < 0, l = min(l, -A·c)
 *    with log r clamped to ±20 before exp, as verl and Agent-R1 do.
 *  - KL to the reference (added as coef·kl): k1 = p - ref; k2 = ½(p - ref)²;
 *    k3 = exp(ref - p) - (ref - p) - 1, with ref - p clamped to ±20 and the result to ±10.
 */
import type { Datum, ForwardBackwardResult, KlForm, LossAggregation, LossSpec } from "./types.js";
import { InputError } from "../util/errors.js";

export const LOG_RATIO_CLAMP = 20;

export function resolvedLoss(spec: LossSpec) {
  return {
    type: spec.type,
    clipLow: spec.clipLow ?? 0.2,
    clipHigh: spec.clipHigh ?? 0.2,
    dualClip: spec.dualClip ?? 3,
    kl: spec.kl && spec.kl.coef !== 0 ? { coef: spec.kl.coef, form: spec.kl.form ?? "k3" } : undefined,
    aggregation: spec.aggregation ?? "token-mean",
    normalizer: spec.normalizer,
    temperature: spec.temperature ?? 1,
  };
}
export type ResolvedLoss = ReturnType<typeof resolvedLoss>;

export function klValue(p: number, ref: number, form: KlForm): number {
  if (form === "k1") return p - ref;
  if (form === "k2") return 0.5 * (p - ref) ** 2;
  const d = Math.max(-LOG_RATIO_CLAMP, Math.min(LOG_RATIO_CLAMP, ref - p));
  return Math.max(-10, Math.min(10, Math.exp(d) - d - 1));
}

/** The policy part of the per-token loss (no KL), and whether PPO clipped it. */
export function policyTokenLoss(loss: ResolvedLoss, p: number, q: number, a: number): { loss: number; clipped: boolean } {
  if (loss.type === "cross_entropy") return { loss: -p, clipped: false };
  const r = Math.exp(Math.max(-LOG_RATIO_CLAMP, Math.min(LOG_RATIO_CLAMP, p - q)));
  if (loss.type === "importance_sampling") return { loss: -r * a, clipped: false };
  const unclipped = -a * r;
  const clipped = -a * Math.max(1 - loss.clipLow, Math.min(1 + loss.clipHigh, r));
  let l = Math.max(unclipped, clipped);
  let wasClipped = clipped > unclipped;
  if (loss.dualClip > 0 && a < 0 && l > -a * loss.dualClip) {
    l = -a * loss.dualClip;
    wasClipped = true;
  }
  return { loss: l, clipped: wasClipped };
}

/**
 * Per-token coefficients c such that the batch loss is Σ c·l. Linear in l, so
 * micro-batches of one call add up to exactly the loss of the whole call.
 */
export function aggregationCoefficients(weights: number[][], agg: LossAggregation, normalizer?: number): number[][] {
  const nSeq = weights.length;
  const sum = (w: number[]) => w.reduce((s, x) => s + x, 0);
  switch (agg) {
    case "sum":
      return weights.map((w) => w.slice());
    case "token-mean": {
      const total = weights.reduce((s, w) => s + sum(w), 0);
      return weights.map((w) => w.map((x) => (total > 0 ? x / total : 0)));
    }
    case "seq-mean-token-sum":
      return weights.map((w) => w.map((x) => x / nSeq));
    case "seq-mean-token-mean":
      return weights.map((w) => {
        const s = sum(w);
        return w.map((x) => (s > 0 ? x / (s * nSeq) : 0));
      });
    case "seq-mean-token-sum-norm": {
      if (!normalizer || normalizer <= 0) throw new InputError("loss.normalizer must be a positive number for aggregation seq-mean-token-sum-norm");
      return weights.map((w) => w.map((x) => x / (nSeq * normalizer)));
    }
  }
}

/** Checks that every datum has consistent lengths and the fields its loss needs. */
export function validateDatums(datums: Datum[], loss: ResolvedLoss): void {
  if (datums.length === 0) throw new InputError("forwardBackward needs at least one datum");
  const need: (keyof Datum)[] = [];
  if (loss.type !== "cross_entropy") need.push("advantages", "logprobs");
  if (loss.kl) need.push("refLogprobs");
  datums.forEach((d, i) => {
    const n = d.tokens.length;
    if (n === 0) throw new InputError(`datum ${i}: tokens is empty`);
    for (const key of ["targetTokens", "weights", ...need] as (keyof Datum)[]) {
      const arr = d[key] as number[] | undefined;
      if (!arr) throw new InputError(`datum ${i}: ${key} is required by loss '${loss.type}'${key === "refLogprobs" ? " with a KL term" : ""}`);
      if (arr.length !== n) throw new InputError(`datum ${i}: ${key} has length ${arr.length}, tokens has ${n}`);
    }
    for (const key of ["weights", "advantages", "logprobs", "refLogprobs"] as const) {
      const arr = d[key];
      if (arr && arr.some((x) => !Number.isFinite(x))) throw new InputError(`datum ${i}: ${key} holds a non-finite number`);
    }
  });
}

/** Metrics of a forwardBackward call from the learner logprobs: clip fraction, sampler and reference KL, entropy. */
export function summarizeForwardBackward(datums: Datum[], loss: ResolvedLoss, logprobs: number[][], lossSum: number, entropySum: number): ForwardBackwardResult {
  let n = 0, clipped = 0, approxKl = 0, klRef = 0;
  datums.forEach((d, i) => {
    d.weights.forEach((w, t) => {
      if (w <= 0) return;
      n++;
      const p = logprobs[i][t];
      if (d.logprobs) {
        clipped += policyTokenLoss(loss, p, d.logprobs[t], d.advantages?.[t] ?? 0).clipped ? 1 : 0;
        approxKl += klValue(p, d.logprobs[t], "k3");
      }
      if (d.refLogprobs) klRef += klValue(p, d.refLogprobs[t], loss.kl?.form ?? "k3");
    });
  });
  const denom = Math.max(1, n);
  const metrics: ForwardBackwardResult["metrics"] = { loss: lossSum, tokens: n, entropy: entropySum / denom };
  if (loss.type === "ppo") metrics.clipFraction = clipped / denom;
  if (datums[0].logprobs) metrics.approxKl = approxKl / denom;
  if (datums[0].refLogprobs) metrics.klRef = klRef / denom;
  return { logprobs, metrics };
}
