/**
 * The Qwen2 / Qwen3 / Llama decoder on TensorFlow.js: RMSNorm, grouped-query attention
 * with rotary embeddings (rotate-half form), Qwen3's per-head q/k RMSNorm before them, and
 * an optional KV cache, SwiGLU MLP, tied or separate LM head. Computed in float32.
 *
 * Parameters are named as in Hugging Face checkpoints. Linear weights are held
 * transposed, (in, out), so the forward pass is `x @ W` with no transpose;
 * `toHostWeights` writes them back in Hugging Face's (out, in) layout.
 *
 * Shapes: B batch, T new tokens, S keys (cache + new), H hidden, nh query heads,
 * kv key/value heads, G = nh / kv, hd head dim, F ffn size, V vocab.
 */
import { recordingGradients, tf } from "./tf-backend.js";
import { attentionSoftmax, biasAdd, rmsNorm, rope, swiglu } from "./ops.js";
import type { ModelConfig } from "../../../model/config.js";
import type { HostTensor } from "../../../model/safetensors.js";
import { ModelFormatError } from "../../../util/errors.js";
import { ropeInverseFrequencies } from "../../../model/rope.js";
import { checkModelFits } from "../../../model/model-limits.js";
import { parameterShapes, randomHostWeights } from "../../../model/parameter-shapes.js";

/** Keys and values of every layer for the tokens seen so far: (B, kv, S, hd) each. */
export interface KVCache {
  k: tf.Tensor4D[];
  v: tf.Tensor4D[];
  length: number;
}

/** Per-row positions and key mask for batched decoding over a padded cache. */
export interface DecodeRows {
  positions: number[];
  /** (B, S) additive: 0 where row b sees key s, -1e9 elsewhere. */
  keyMask: tf.Tensor2D;
}

export function disposeCache(c: KVCache | undefined): void {
  if (!c) return;
  tf.dispose([...c.k, ...c.v]);
}

/** Linear weights are stored (out, in) on disk and (in, out) in memory. */
const isLinear = (name: string) =>
  name.endsWith("_proj.weight") || name === "lm_head.weight" || name === "score.weight";

export class Transformer {
  readonly params: Map<string, tf.Variable>;
  private readonly invFreq: Float64Array;
  private headT?: tf.Tensor2D;
  private transposes = new Map<tf.Variable, { t: tf.Tensor2D; for: object }>();
  private headTFor?: object;

  private constructor(
    readonly config: ModelConfig,
    params: Map<string, tf.Variable>,
    readonly head: "lm" | "value",
  ) {
    this.params = params;
    this.invFreq = ropeInverseFrequencies(config);
  }

  /** Random initialization, seeded (see randomHostWeights). */
  static random(config: ModelConfig, seed: number, head: "lm" | "value" = "lm"): Transformer {
    checkModelFits(config, "(random init)");
    return Transformer.fromHostWeights(config, randomHostWeights(config, seed, head), "(random init)", head);
  }

  /** Builds the model from host weights in Hugging Face layout, checking every name and shape. */
  static fromHostWeights(
    config: ModelConfig,
    weights: Map<string, HostTensor>,
    file: string,
    head: "lm" | "value" = "lm",
  ): Transformer {
    const params = new Map<string, tf.Variable>();
    try {
      for (const [name, shape] of parameterShapes(config, head)) {
        let w = weights.get(name);
        if (!w && name === "score.weight") w = { shape, data: new Float32Array(shape[0] * shape[1]) };
        if (!w) throw new ModelFormatError(file, name, "tensor missing from the checkpoint");
        if (w.shape.length !== shape.length || w.shape.some((d, i) => d !== shape[i])) {
          throw new ModelFormatError(
            file,
            name,
            `shape [${w.shape}] disagrees with config.json, which implies [${shape}]`,
          );
        }
        const t = tf.tidy(() => {
          const x = tf.tensor(w!.data, w!.shape, "float32");
          return isLinear(name) ? x.transpose() : x;
        });
        params.set(name, tf.variable(t, true));
        t.dispose();
      }
    } catch (e) {
      tf.dispose([...params.values()]);
      throw e;
    }
    return new Transformer(config, params, head);
  }

  /** Weights in Hugging Face names and layout. */
  toHostWeights(): Map<string, HostTensor> {
    const out = new Map<string, HostTensor>();
    for (const [name, v] of this.params) {
      const t = isLinear(name) ? tf.tidy(() => v.transpose()) : v;
      out.set(name, { shape: t.shape.slice(), data: t.dataSync() as Float32Array });
      if (t !== v) t.dispose();
    }
    return out;
  }

  dispose(): void {
    this.weightsChanged();
    tf.dispose([...this.params.values()]);
  }

  private p(name: string): tf.Variable {
    const v = this.params.get(name);
    if (!v) throw new Error(`internal: parameter ${name} missing`);
    return v;
  }

  /**
   * Runs the decoder over `tokens` (B, T) at positions start..start+T-1.
   * With `cache` (length = start), attends to the cached keys too and returns
   * the extended cache (the caller disposes the old one). Returns the final
   * hidden states (B, T, H), after the last norm.
   *
   * `rows` serves batched decoding over a padded cache (T = 1): row b's new
   * token sits at position `rows.positions[b]`, and `rows.keyMask` (B, S) is
   * 0 on the keys row b may see (its own cached keys and the new one) and
   * -1e9 on padding.
   */
  forward(tokens: tf.Tensor2D, cache?: KVCache, rows?: DecodeRows): { hidden: tf.Tensor3D; cache: KVCache } {
    const c = this.config;
    const [B, T] = tokens.shape;
    const start = cache?.length ?? 0;
    let cos: tf.Tensor, sin: tf.Tensor, mask: tf.Tensor;
    if (rows) {
      if (T !== 1) throw new Error("internal: per-row positions are for single-token decoding");
      ({ cos, sin } = this.ropeTables(rows.positions, 1)); // (B, 1, 1, hd/2)
      mask = rows.keyMask.reshape([B, 1, 1, start + 1]); // (B, 1, 1, S)
    } else {
      ({ cos, sin } = this.ropeTables([start], T)); // (1, T, 1, hd/2)
      mask = causalMask(T, start, c.numHeads / c.numKvHeads); // (G*T, S)
    }
    let x = tf
      .gather(this.p("model.embed_tokens.weight"), tokens.reshape([B * T]))
      .reshape([B, T, c.hiddenSize]) as tf.Tensor3D;
    const ks: tf.Tensor4D[] = [],
      vs: tf.Tensor4D[] = [];
    for (let i = 0; i < c.numLayers; i++) {
      const p = `model.layers.${i}.`;
      const h = this.rmsNorm(x, p + "input_layernorm.weight");
      const { out, k, v } = this.attention(h, p, cos, sin, mask, cache?.k[i], cache?.v[i]);
      ks.push(k);
      vs.push(v);
      x = x.add(out);
      x = x.add(this.mlp(this.rmsNorm(x, p + "post_attention_layernorm.weight"), p));
    }
    return { hidden: this.rmsNorm(x, "model.norm.weight"), cache: { k: ks, v: vs, length: start + T } };
  }

  /** Logits (N, V) for hidden states (N, H). */
  logits(hidden: tf.Tensor2D): tf.Tensor2D {
    if (this.head !== "lm") throw new Error("internal: logits() on a value model");
    return this.config.tieWordEmbeddings
      ? tf.matMul(hidden, this.p("model.embed_tokens.weight"), false, true)
      : tf.matMul(hidden, this.p("lm_head.weight"));
  }

  /**
   * Logits (N, V) off the gradient tape (sampling, scoring): a tied head uses a
   * pre-transposed copy of the embedding, which the wasm matmul runs about 4x
   * faster than the transposed product. `weightsChanged()` drops the copy.
   */
  inferenceLogits(hidden: tf.Tensor2D): tf.Tensor2D {
    if (!this.config.tieWordEmbeddings) return this.logits(hidden);
    const embed = this.p("model.embed_tokens.weight");
    // Variable.assign swaps the data id, so a stale copy is detected even without weightsChanged().
    if (this.headTFor !== embed.dataId) {
      this.weightsChanged();
      this.headT = tf.keep(embed.transpose() as tf.Tensor2D); // (H, V)
      this.headTFor = embed.dataId;
    }
    return tf.matMul(hidden, this.headT!);
  }

  /** Call after the weights change in place (optimizer step). */
  weightsChanged(): void {
    this.headT?.dispose();
    this.headT = undefined;
    this.headTFor = undefined;
    for (const { t } of this.transposes.values()) t.dispose();
    this.transposes.clear();
  }

  /** Scalar values (N) for hidden states (N, H). */
  values(hidden: tf.Tensor2D): tf.Tensor1D {
    return tf.matMul(hidden, this.p("score.weight")).reshape([-1]);
  }

  /** x (B, T, H) normalized (./ops.ts rmsNorm). */
  private rmsNorm(x: tf.Tensor3D, weight: string): tf.Tensor3D {
    return rmsNorm(x, this.p(weight), this.config.rmsNormEps);
  }

  private linear(x: tf.Tensor3D, name: string, bias = false): tf.Tensor3D {
    const [B, T, I] = x.shape;
    const w = this.p(name + ".weight");
    const x2 = x.reshape([B * T, I]) as tf.Tensor2D;
    // The backward pass multiplies by a cached transpose (see transposed()): wasm's product is fast
    // only without a transposed input.
    const cached = recordingGradients();
    let y = cached ? matMulWithCachedTranspose(x2, w, this.transposed(w)) : tf.matMul(x2, w);
    if (bias) y = biasAdd(y, this.p(name + ".bias"));
    return y.reshape([B, T, -1]);
  }

  /**
   * A kept (out, in) copy of a weight for the backward pass, rebuilt when the
   * weight's data changes (after an optimizer step). The wasm matmul caches its
   * packed right operand per tensor, so multiplying by a persistent transpose
   * saves both the transpose and the re-packing on every micro-batch.
   */
  private transposed(w: tf.Variable): tf.Tensor2D {
    const hit = this.transposes.get(w);
    if (hit && hit.for === w.dataId) return hit.t;
    hit?.t.dispose();
    const t = tf.keep(tf.transpose(w) as tf.Tensor2D);
    this.transposes.set(w, { t, for: w.dataId });
    return t;
  }

  private mlp(x: tf.Tensor3D, p: string): tf.Tensor3D {
    const gate = this.linear(x, p + "mlp.gate_proj"); // (B, T, F)
    const up = this.linear(x, p + "mlp.up_proj"); // (B, T, F)
    return this.linear(swiglu(gate, up), p + "mlp.down_proj"); // silu(gate)·up (B, T, F) → (B, T, H)
  }

  private attention(
    x: tf.Tensor3D,
    p: string,
    cos: tf.Tensor,
    sin: tf.Tensor,
    mask: tf.Tensor,
    pastK?: tf.Tensor4D,
    pastV?: tf.Tensor4D,
  ) {
    const c = this.config;
    const [B, T] = x.shape;
    const nh = c.numHeads,
      kv = c.numKvHeads,
      hd = c.headDim,
      G = nh / kv;
    const bias = c.qkvBias;
    let q = this.linear(x, p + "self_attn.q_proj", bias).reshape([B, T, nh, hd]) as tf.Tensor4D;
    let k = this.linear(x, p + "self_attn.k_proj", bias).reshape([B, T, kv, hd]) as tf.Tensor4D;
    const vNew = this.linear(x, p + "self_attn.v_proj", bias).reshape([B, T, kv, hd]);
    if (c.qkNorm) {
      // Qwen3: each head's query and key vector is RMS-normalized (weights (hd)) before RoPE
      q = rmsNorm(q, this.p(p + "self_attn.q_norm.weight"), c.rmsNormEps);
      k = rmsNorm(k, this.p(p + "self_attn.k_norm.weight"), c.rmsNormEps);
    }
    q = rope(q, cos, sin); // (B, T, nh, hd)
    k = rope(k, cos, sin); // (B, T, kv, hd)
    let kAll = k.transpose([0, 2, 1, 3]) as tf.Tensor4D; // (B, kv, T, hd)
    let vAll = vNew.transpose([0, 2, 1, 3]) as tf.Tensor4D; // (B, kv, T, hd)
    if (pastK && pastV) {
      kAll = tf.concat([pastK, kAll], 2); // (B, kv, S, hd)
      vAll = tf.concat([pastV, vAll], 2); // (B, kv, S, hd)
    }
    // Query head j*G+g uses key/value head j, so group the queries under their kv head.
    const qg = q.transpose([0, 2, 1, 3]).reshape([B, kv, G * T, hd]); // (B, kv, G*T, hd)
    // softmax(q·kᵀ / √hd + mask) over the keys
    const probs = attentionSoftmax(tf.matMul(qg, kAll, false, true), mask, 1 / Math.sqrt(hd)); // (B, kv, G*T, S)
    const ctx = tf
      .matMul(probs, vAll) // (B, kv, G*T, hd)
      .reshape([B, nh, T, hd])
      .transpose([0, 2, 1, 3]) // (B, T, nh, hd)
      .reshape([B, T, nh * hd]) as tf.Tensor3D;
    return { out: this.linear(ctx, p + "self_attn.o_proj"), k: kAll, v: vAll };
  }

  /**
   * cos and sin of position x frequency, (R, T, 1, hd/2) each, for R rows whose
   * T positions start at starts[r].
   */
  private ropeTables(starts: number[], T: number): { cos: tf.Tensor; sin: tf.Tensor } {
    const half = this.invFreq.length,
      R = starts.length;
    const cos = new Float32Array(R * T * half),
      sin = new Float32Array(R * T * half);
    for (let r = 0; r < R; r++) {
      for (let t = 0; t < T; t++) {
        const o = (r * T + t) * half;
        for (let i = 0; i < half; i++) {
          const a = (starts[r] + t) * this.invFreq[i];
          cos[o + i] = Math.cos(a);
          sin[o + i] = Math.sin(a);
        }
      }
    }
    return { cos: tf.tensor(cos, [R, T, 1, half]), sin: tf.tensor(sin, [R, T, 1, half]) };
  }
}

/** x (N, I) @ w (I, O), whose gradient for x multiplies by the given wT (O, I) instead of transposing w. */
function matMulWithCachedTranspose(x: tf.Tensor2D, w: tf.Variable, wT: tf.Tensor2D): tf.Tensor2D {
  const op = tf.customGrad(((xIn: tf.Tensor, wIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn]);
    return {
      value: tf.matMul(xIn as tf.Tensor2D, wIn as tf.Tensor2D),
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const g = dy as tf.Tensor2D;
        return [tf.matMul(g, wT), tf.matMul(saved[0] as tf.Tensor2D, g, true, false)];
      },
    };
  }) as unknown as Parameters<typeof tf.customGrad>[0]);
  return op(x, w) as tf.Tensor2D;
}

/** Additive causal mask (G*T, S): row g*T+t is query position start+t, which sees keys 0..start+t. */
function causalMask(T: number, start: number, G: number): tf.Tensor2D {
  const S = start + T;
  const m = new Float32Array(G * T * S);
  for (let g = 0; g < G; g++) {
    for (let t = 0; t < T; t++) {
      const row = (g * T + t) * S;
      for (let s = start + t + 1; s < S; s++) m[row + s] = -1e9;
    }
  }
  return tf.tensor2d(m, [G * T, S]);
}
