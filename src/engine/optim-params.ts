/**
 * The AdamW settings an optimizer step takes (AdamParams), checked before any step: every field a
 * finite number in the range where the update is a number. Outside it the step writes NaN or
 * infinite weights (beta1 5 or beta2 1 make the bias corrections 0 or negative, eps 0 divides by
 * zero where a moment is 0, lr 1e308 overflows) or undoes training (a negative weight decay or
 * learning rate). Shared by both engines' optimizers; an InputError naming the field.
 */
import { InputError } from "../util/errors.js";
import type { AdamParams } from "./types.js";

/** AdamParams with every default filled in. */
export interface ResolvedAdamParams {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  gradClipNorm: number;
}

/** Each field's range: [lowest, highest], and whether each end is included. */
const RANGES: Record<keyof ResolvedAdamParams, { lo: number; hi: number; loOpen?: boolean; hiOpen?: boolean }> = {
  lr: { lo: 0, hi: 1 },
  beta1: { lo: 0, hi: 1, hiOpen: true },
  beta2: { lo: 0, hi: 1, hiOpen: true },
  eps: { lo: 0, hi: 1, loOpen: true },
  weightDecay: { lo: 0, hi: 1 },
  gradClipNorm: { lo: 0, hi: Number.MAX_VALUE },
};

const DEFAULTS: Omit<ResolvedAdamParams, "lr"> = {
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  weightDecay: 0,
  gradClipNorm: 0,
};

/** "a number in [0, 1)" when `v` is outside `key`'s range (or not a finite number); undefined when it is fine. */
export function adamFieldProblem(key: keyof ResolvedAdamParams, v: unknown): string | undefined {
  const r = RANGES[key];
  const ok =
    typeof v === "number" &&
    Number.isFinite(v) &&
    (r.loOpen ? v > r.lo : v >= r.lo) &&
    (r.hiOpen ? v < r.hi : v <= r.hi);
  return ok ? undefined : rangeWords(r);
}

const rangeWords = (r: (typeof RANGES)[keyof typeof RANGES]) =>
  r.hi === Number.MAX_VALUE
    ? `a finite number >= ${r.lo}`
    : `a number in ${r.loOpen ? "(" : "["}${r.lo}, ${r.hi}${r.hiOpen ? ")" : "]"}`;

/** `p` with its defaults, every field checked; an InputError "optimStep: beta1 must be ..., got 5" otherwise. */
export function checkAdamParams(p: AdamParams, fn = "optimStep"): ResolvedAdamParams {
  if (typeof p !== "object" || p === null) throw new InputError(`${fn}: the optimizer settings must be an object`);
  const out = { ...DEFAULTS, lr: p.lr } as ResolvedAdamParams;
  for (const key of Object.keys(RANGES) as (keyof ResolvedAdamParams)[]) {
    const v: unknown = p[key];
    if (v === undefined && key !== "lr") continue;
    const wrong = adamFieldProblem(key, v);
    if (wrong) {
      const got = typeof v === "string" ? JSON.stringify(v.slice(0, 40)) : String(v);
      throw new InputError(`${fn}: ${key} must be ${wrong}, got ${got}`);
    }
    out[key] = v as number;
  }
  return out;
}
