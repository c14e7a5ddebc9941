/**
 * Training ops of the TF.js engine, as TF.js compositions:
 *  - tokenLogprobs: the policy loss's log-softmax of the logits, the target's entry and the entropy;
 *  - adamwUpdate: AdamW's update of one parameter and its moments;
 *  - squaredNorm: Σ g² of the gradients;
 *  - sumFlat: the replicas' flat gradients summed into one tensor, left to right in float32.
 */
import { tf } from "./tf-backend.js";

/**
 * Per-token log-probabilities (N) of `targets` (N) under softmax(logits / temperature),
 * logits (N, V), and the entropies (N) of those distributions. Differentiable in logits
 * through both outputs.
 */
export function tokenLogprobs(
  logits: tf.Tensor2D,
  targets: Int32Array,
  temperature: number,
): { picked: tf.Tensor1D; entropy: tf.Tensor1D } {
  const [N, V] = logits.shape;
  if (targets.length !== N) throw new Error(`tokenLogprobs: ${targets.length} targets for ${N} rows of logits`);
  const scaled = temperature === 1 ? logits : logits.div(temperature);
  const logp = tf.logSoftmax(scaled, -1); // (N, V)
  const flat = new Int32Array(N);
  for (let i = 0; i < N; i++) flat[i] = i * V + targets[i];
  const picked = tf.gather(logp.reshape([N * V]), tf.tensor1d(flat, "int32")) as tf.Tensor1D; // (N)
  const entropy = logp.exp().mul(logp).sum(-1).neg() as tf.Tensor1D; // (N)
  return { picked, entropy };
}

/** AdamW's hyperparameters for one step, with the bias corrections and the clipping scale. */
export interface AdamWStep {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** 0 for parameters that are not decayed. */
  weightDecay: number;
  /** 1 - beta1^t and 1 - beta2^t. */
  bc1: number;
  bc2: number;
  /** Gradient scale from global-norm clipping (1 = none). */
  gradScale: number;
}

/**
 * One AdamW update of w with gradient g and moments m, v (one shape): returns the new
 * [w, m, v]. TF.js composition: m' = m·β1 + g·(1-β1), v' = v·β2 + g²·(1-β2),
 * w' = w - lr·((m'/bc1) / (sqrt(v'/bc2) + ε) + wd·w), with g scaled first.
 */
export function adamwUpdate(
  w: tf.Tensor,
  g0: tf.Tensor,
  m: tf.Tensor,
  v: tf.Tensor,
  h: AdamWStep,
): [tf.Tensor, tf.Tensor, tf.Tensor] {
  return tf.tidy(() => {
    const g = h.gradScale === 1 ? g0 : g0.mul(h.gradScale);
    const m2 = m.mul(h.beta1).add(g.mul(1 - h.beta1));
    const v2 = v.mul(h.beta2).add(g.square().mul(1 - h.beta2));
    let update = m2.div(h.bc1).div(v2.div(h.bc2).sqrt().add(h.eps));
    if (h.weightDecay > 0) update = update.add(w.mul(h.weightDecay));
    return [w.sub(update.mul(h.lr)), m2, v2] as [tf.Tensor, tf.Tensor, tf.Tensor];
  });
}

/** Σ over tensors of Σ t² (the squared global norm), in TF.js's float32 sums. */
export function squaredNorm(ts: tf.Tensor[]): number {
  const sq = tf.tidy(() => tf.addN(ts.map((g) => g.square().sum())));
  const out = sq.dataSync()[0];
  sq.dispose();
  return out;
}

/**
 * A float32 tensor of `shape` holding Σ_s sources[s][offset .. offset + size), added left to right
 * in float32 (the replicas' flat gradients).
 */
export function sumFlat(sources: Float32Array[], offset: number, shape: number[]): tf.Tensor {
  const size = shape.reduce((a, b) => a * b, 1);
  const sum = sources[0].slice(offset, offset + size);
  for (const src of sources.slice(1)) for (let i = 0, j = offset; i < size; i++, j++) sum[i] += src[j];
  return tf.tensor(sum, shape);
}
