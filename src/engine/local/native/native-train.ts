/**
 * forwardBackward, computeLogprobs and the critic's passes on the native decoder. Datums are
 * packed into micro-batches by tokens (no padding: a pass takes sequences of any lengths); the
 * loss is Σ c·l with the aggregation coefficients c of the whole call, as on the TF.js engine
 * (../tfjs/policy-train.ts), and its derivative in each logprob (src/rl tokenLossGrad) is where
 * the native backward starts.
 */
import type { Datum } from "../../types.js";
import type { ValueDatum } from "../../types.js";
import { aggregationCoefficients } from "../../../rl/aggregation.js";
import { tokenLossGrad, type ResolvedLoss } from "../../../rl/policy-loss.js";
import { clipCounts, valueLossAt } from "../../../rl/value-loss.js";
import type { RawForwardBackward, RawValuePass } from "../replica-api.js";
import type { MicroBatchPlanner } from "../../micro-batches.js";
import type { NativeDecoder } from "./decoder.js";
import type { NativeTrainable } from "./native-trainable.js";

/** Consecutive sequences whose total tokens stay within `maxTokens` (a longer one goes alone). */
export function tokenPlanner(maxTokens: number): MicroBatchPlanner {
  return (lengths) => {
    const out: number[][] = [];
    let cur: number[] = [],
      sum = 0;
    lengths.forEach((len, i) => {
      if (cur.length > 0 && sum + len > maxTokens) {
        out.push(cur);
        cur = [];
        sum = 0;
      }
      cur.push(i);
      sum += len;
    });
    if (cur.length) out.push(cur);
    return out;
  };
}

export function nativePolicyPass(
  tr: NativeTrainable,
  datums: Datum[],
  loss: ResolvedLoss,
  plan: MicroBatchPlanner,
  coef?: number[][],
): RawForwardBackward {
  coef ??= aggregationCoefficients(datums, loss.aggregation, loss.normalizer);
  const logprobs: number[][] = new Array(datums.length);
  let lossSum = 0,
    entropySum = 0;
  for (const idx of plan(datums.map((d) => d.tokens.length))) {
    const group = idx.map((i) => datums[i]);
    const targets = Int32Array.from(group.flatMap((d) => d.targetTokens));
    const pass = tr.model.forward(
      group.map((d) => d.tokens),
      true,
      tr.nextPassSeed(),
    );
    try {
      const { logp, entropy } = pass.logprobs(targets, loss.temperature);
      const dlogp = new Float32Array(logp.length);
      let o = 0;
      group.forEach((d, b) => {
        const c = coef![idx[b]];
        for (let t = 0; t < d.tokens.length; t++, o++) {
          if (c[t] === 0) continue;
          const { loss: l, grad } = tokenLossGrad(
            loss,
            logp[o],
            d.logprobs?.[t] ?? 0,
            d.advantages?.[t] ?? 0,
            d.refLogprobs?.[t] ?? 0,
          );
          lossSum += c[t] * l;
          dlogp[o] = c[t] * grad;
        }
        logprobs[idx[b]] = Array.from(logp.subarray(o - d.tokens.length, o));
        for (let t = 0; t < d.tokens.length; t++) if (d.weights[t] > 0) entropySum += entropy[o - d.tokens.length + t];
      });
      pass.backward(dlogp);
      tr.accumulated = true;
    } finally {
      pass.free();
    }
  }
  return { logprobs, lossSum, entropySum };
}

/** Logprobs of each token given the ones before it (entry 0 null). */
export function nativeLogprobs(
  model: NativeDecoder,
  sequences: number[][],
  temperature: number,
  plan: MicroBatchPlanner,
): (number | null)[][] {
  const out: (number | null)[][] = new Array(sequences.length);
  for (const idx of plan(sequences.map((s) => s.length))) {
    const group = idx.map((i) => sequences[i]);
    // row t predicts token t + 1; the last row of each sequence predicts nothing (target 0)
    const targets = Int32Array.from(group.flatMap((s) => s.map((_, t) => (t + 1 < s.length ? s[t + 1] : 0))));
    const pass = model.forward(group, false);
    try {
      const { logp } = pass.logprobs(targets, temperature);
      let o = 0;
      group.forEach((s, b) => {
        out[idx[b]] = [null, ...Array.from(logp.subarray(o, o + s.length - 1))];
        o += s.length;
      });
    } finally {
      pass.free();
    }
  }
  return out;
}

export function nativeCriticValues(model: NativeDecoder, sequences: number[][], plan: MicroBatchPlanner): number[][] {
  const out: number[][] = new Array(sequences.length);
  for (const idx of plan(sequences.map((s) => s.length))) {
    const group = idx.map((i) => sequences[i]);
    const pass = model.forward(group, false);
    try {
      const v = pass.values();
      let o = 0;
      group.forEach((s, b) => {
        out[idx[b]] = Array.from(v.subarray(o, o + s.length));
        o += s.length;
      });
    } finally {
      pass.free();
    }
  }
  return out;
}

/**
 * The value loss (src/rl/value-loss.ts), ½ · Σ_t w_t / total · max((V - R)², (clip(V) - R)²),
 * and its gradient, accumulated into `tr`.
 */
export function nativeCriticPass(
  tr: NativeTrainable,
  datums: ValueDatum[],
  clip: number,
  total: number,
  plan: MicroBatchPlanner,
): RawValuePass {
  const values: number[][] = new Array(datums.length);
  let lossSum = 0;
  const norm = Math.max(total, 1e-12);
  for (const idx of plan(datums.map((d) => d.tokens.length))) {
    const group = idx.map((i) => datums[i]);
    const pass = tr.model.forward(
      group.map((d) => d.tokens),
      true,
      tr.nextPassSeed(),
    );
    try {
      const v = pass.values();
      const dv = new Float32Array(v.length);
      let o = 0;
      group.forEach((d, b) => {
        values[idx[b]] = Array.from(v.subarray(o, o + d.tokens.length));
        for (let t = 0; t < d.tokens.length; t++, o++) {
          const at = valueLossAt(v[o], d.returns[t], d.weights[t] / norm, clip, d.oldValues?.[t]);
          lossSum += at.loss;
          dv[o] = at.grad;
        }
      });
      pass.backwardValues(dv);
      tr.accumulated = true;
    } finally {
      pass.free();
    }
  }
  return { values, lossSum, ...clipCounts(datums, values, clip) };
}
