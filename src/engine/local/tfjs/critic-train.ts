/**
 * The critic's compute: the decoder with a scalar value head (`score.weight`,
 * as in Hugging Face's token-classification heads). Value loss, clipped as in
 * PPO implementations:
 *   ½ · Σ_t w_t / Σ w · max((V - R)², (clip(V, V_old - ε, V_old + ε) - R)²)
 * The normalizer Σ w is over the whole call, so passes split across
 * micro-batches or replicas add up.
 */
import { tf } from "./tf-backend.js";
import type { Trainable } from "./trainable.js";
import type { Transformer } from "./transformer.js";
import { padRows, padTokenRows } from "./padding.js";
import type { MicroBatchPlanner } from "../../micro-batches.js";
import type { ValueDatum } from "../../types.js";
import type { RawValuePass } from "../replica-api.js";
import { clipCounts } from "../../../rl/value-loss.js";

function run(m: Transformer, tokens: Int32Array, B: number, T: number): tf.Tensor1D {
  const { hidden } = m.forward(tf.tensor2d(tokens, [B, T], "int32"));
  return m.values(hidden.reshape([B * T, -1]) as tf.Tensor2D); // (B*T)
}

export function criticValues(m: Transformer, sequences: number[][], plan: MicroBatchPlanner): number[][] {
  const out: number[][] = new Array(sequences.length);
  for (const idx of plan(sequences.map((s) => s.length))) {
    const group = idx.map((i) => sequences[i]);
    const B = group.length,
      T = Math.max(...group.map((s) => s.length));
    const v = tf.tidy(() => run(m, padTokenRows(group, T), B, T));
    const data = v.dataSync();
    v.dispose();
    group.forEach((s, b) => (out[idx[b]] = Array.from(data.subarray(b * T, b * T + s.length))));
  }
  return out;
}

/** Accumulates the value-loss gradient (src/rl/value-loss.ts, here on tensors); `total` is Σ w over the whole call. */
export function criticPass(
  tr: Trainable,
  datums: ValueDatum[],
  clip: number,
  total: number,
  plan: MicroBatchPlanner,
): RawValuePass {
  const values: number[][] = new Array(datums.length);
  let lossSum = 0;
  for (const idx of plan(datums.map((d) => d.tokens.length))) {
    const group = idx.map((i) => datums[i]);
    const B = group.length,
      T = Math.max(...group.map((d) => d.tokens.length));
    const w = padRows(
      group.map((d) => d.weights.map((x) => x / Math.max(total, 1e-12))),
      T,
    );
    const R = padRows(
      group.map((d) => d.returns),
      T,
    );
    const old = padRows(
      group.map((d) => d.oldValues ?? []),
      T,
    );
    let kept: tf.Tensor1D | undefined;
    const { value, grads } = tf.variableGrads(() => {
      const V = run(
        tr.model,
        padTokenRows(
          group.map((d) => d.tokens),
          T,
        ),
        B,
        T,
      );
      kept = tf.keep(V);
      const Rt = tf.tensor1d(R);
      let sq = V.sub(Rt).square();
      if (clip > 0) {
        const oldT = tf.tensor1d(old);
        const Vc = oldT.add(V.sub(oldT).clipByValue(-clip, clip));
        sq = tf.maximum(sq, Vc.sub(Rt).square());
      }
      return sq.mul(tf.tensor1d(w)).sum().mul(0.5) as tf.Scalar;
    }, [...tr.model.params.values()]);
    lossSum += value.dataSync()[0];
    value.dispose();
    tr.accumulate(grads as Record<string, tf.Tensor>);
    const v = kept!.dataSync();
    kept!.dispose();
    group.forEach((d, b) => (values[idx[b]] = Array.from(v.subarray(b * T, b * T + d.tokens.length))));
  }
  return { values, lossSum, ...clipCounts(datums, values, clip) };
}
