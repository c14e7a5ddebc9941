/**
 * Batch whitening, as verl's `masked_whiten` (used by Agent-R1 for token GAE,
 * REINFORCE++ and REINFORCE++-baseline) and StepPO's step-level whitening.
 *
 * Variance is the unbiased (Bessel-corrected) one by default, because both
 * references use it: verl's `masked_var(unbiased=True)` and `torch.std` in
 * StepPO's step GAE. The notes do not say; this follows the code they cite.
 * Two places for epsilon, one per reference:
 *  - "variance" (verl masked_whiten): (x − μ) / sqrt(var + eps)
 *  - "std"      (StepPO step GAE, GRPO): (x − μ) / (sqrt(var) + eps)
 * The mean is subtracted and not added back (verl's default shift_mean=True).
 *
 * Departure: with one value the unbiased variance is undefined (verl raises,
 * torch.std gives NaN); here it is taken as 0, so the single value whitens to 0.
 */
import { mean } from "./groups.js";

export interface WhitenOptions {
  /** Bessel-corrected variance. Default true. */
  unbiased?: boolean;
  /** Default 1e-8. */
  eps?: number;
  /** Where eps goes: inside the square root ("variance", default) or added to the std ("std"). */
  epsOn?: "variance" | "std";
}

export interface Moments {
  mean: number;
  variance: number;
  count: number;
}

export function moments(values: readonly number[], unbiased = true): Moments {
  const n = values.length;
  if (n === 0) return { mean: 0, variance: 0, count: 0 };
  const mu = mean(values);
  let ss = 0;
  for (const x of values) ss += (x - mu) ** 2;
  const denom = unbiased ? n - 1 : n;
  return { mean: mu, variance: denom > 0 ? ss / denom : 0, count: n };
}

/** The affine map x ↦ (x − μ)·scale that whitens `values`. */
function whitener(values: readonly number[], opts: WhitenOptions): (x: number) => number {
  const { mean: mu, variance } = moments(values, opts.unbiased ?? true);
  const eps = opts.eps ?? 1e-8;
  const denom = (opts.epsOn ?? "variance") === "variance" ? Math.sqrt(variance + eps) : Math.sqrt(variance) + eps;
  return (x) => (x - mu) / denom;
}

export function whiten(values: readonly number[], opts: WhitenOptions = {}): number[] {
  const f = whitener(values, opts);
  return values.map(f);
}

/**
 * Whitens ragged rows (datum × position) with one mean and variance
 * over every entry of the batch whose mask is > 0; masked-out entries come
 * back as 0 (verl multiplies by the mask afterwards). Shape is preserved.
 */
export function whitenBatch(
  rows: readonly (readonly number[])[],
  opts: WhitenOptions & { masks?: readonly (readonly number[])[] } = {},
): number[][] {
  const { masks } = opts;
  const kept: number[] = [];
  rows.forEach((row, i) =>
    row.forEach((x, t) => {
      if (!masks || masks[i][t] > 0) kept.push(x);
    }),
  );
  const f = whitener(kept, opts);
  return rows.map((row, i) => row.map((x, t) => (!masks || masks[i][t] > 0 ? f(x) : 0)));
}
