/**
 * The element-wise pieces of the TF.js decoder (./transformer.ts) as TF.js compositions: RMSNorm,
 * the rotary embedding, the attention softmax (scale + additive mask + softmax), SwiGLU and the
 * q/k/v bias add. TF.js differentiates them; they are the reference the C engine's kernels are
 * tested against.
 */
import { tf } from "./tf-backend.js";

/** RMSNorm over the last axis: x (..., H) · rsqrt(mean(x², -1) + eps) · weight (H). */
export function rmsNorm<T extends tf.Tensor>(x: T, weight: tf.Tensor, eps: number): T {
  const ms = x.square().mean(-1, true); // (..., 1)
  return x.mul(ms.add(eps).rsqrt()).mul(weight) as T;
}

/**
 * Rotate-half rotary embedding of x (B, T, heads, hd) with cos, sin (R, T, 1, hd/2),
 * R = 1 (every row at the same positions) or B (per-row positions).
 */
export function rope(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  const half = x.shape[3] / 2;
  const [x1, x2] = tf.split(x, [half, half], 3);
  return tf.concat([x1.mul(cos).sub(x2.mul(sin)), x2.mul(cos).add(x1.mul(sin))], 3) as tf.Tensor4D;
}

/**
 * Attention probabilities: softmax over the last axis of scores · scale + mask, where the
 * additive mask broadcasts against scores (..., R, S).
 */
export function attentionSoftmax<T extends tf.Tensor>(scores: T, mask: tf.Tensor, scale: number): T {
  return tf.softmax(scores.mul(scale).add(mask), -1) as T;
}

/** SwiGLU: silu(gate) · up = gate · sigmoid(gate) · up, for gate and up of one shape. */
export function swiglu<T extends tf.Tensor>(gate: T, up: T): T {
  return gate.mul(gate.sigmoid()).mul(up) as T;
}

/** x (..., n) + bias (n). */
export function biasAdd<T extends tf.Tensor>(x: T, bias: tf.Tensor): T {
  return x.add(bias) as T;
}
