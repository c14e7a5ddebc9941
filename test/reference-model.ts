/**
 * An independent float64 reference of the decoder family (Qwen2, Qwen3, Llama), one sequence at a
 * time, in plain TypeScript over weights in Hugging Face names and layout (linear weights
 * (out, in)): what the engines' logits are checked against.
 */
import assert from "node:assert/strict";
import type { ModelConfig } from "../src/model/config.js";
import type { HostTensor } from "../src/model/safetensors.js";

export type Weights = Map<string, HostTensor>;
type Mat = Float64Array[]; // rows

export interface RefOptions {
  /** Inverse frequencies to use; default: theta^(-2i/hd). */
  invFreq?: number[];
  /** Which kv head query head h reads; default floor(h / (nh / kv)). */
  kvHeadOf?: (h: number, nh: number, kv: number) => number;
}

function get(w: Weights, name: string): HostTensor {
  const t = w.get(name);
  if (!t) throw new Error(`reference: missing ${name}`);
  return t;
}

/** y = x W^T + b with W (out, in) row-major, HF layout. */
function linear(x: Mat, w: HostTensor, b?: HostTensor): Mat {
  const [out, inp] = w.shape;
  return x.map((row) => {
    assert.equal(row.length, inp);
    const y = new Float64Array(out);
    for (let o = 0; o < out; o++) {
      let s = b ? b.data[o] : 0;
      for (let i = 0; i < inp; i++) s += w.data[o * inp + i] * row[i];
      y[o] = s;
    }
    return y;
  });
}

function rmsNorm(x: Mat, w: HostTensor, eps: number): Mat {
  return x.map((row) => {
    let ms = 0;
    for (const v of row) ms += v * v;
    ms /= row.length;
    const r = 1 / Math.sqrt(ms + eps);
    return row.map((v, i) => v * r * w.data[i]);
  });
}

const silu = (z: number) => z / (1 + Math.exp(-z));

export function plainInvFreq(theta: number, hd: number): number[] {
  return Array.from({ length: hd / 2 }, (_, i) => Math.pow(theta, (-2 * i) / hd));
}

/** Rotate-half RoPE on one head vector at position pos. */
function rope(v: Float64Array, pos: number, invFreq: number[]): Float64Array {
  const half = v.length / 2;
  const out = new Float64Array(v.length);
  for (let i = 0; i < half; i++) {
    const a = pos * invFreq[i];
    const c = Math.cos(a),
      s = Math.sin(a);
    const x1 = v[i],
      x2 = v[i + half];
    out[i] = x1 * c - x2 * s;
    out[i + half] = x2 * c + x1 * s;
  }
  return out;
}

/** Logits (T, V) of one sequence. */
export function referenceLogits(c: ModelConfig, w: Weights, tokens: number[], o: RefOptions = {}): Mat {
  const H = c.hiddenSize,
    nh = c.numHeads,
    kv = c.numKvHeads,
    hd = c.headDim,
    T = tokens.length;
  const invFreq = o.invFreq ?? plainInvFreq(c.ropeTheta, hd);
  const kvHeadOf = o.kvHeadOf ?? ((h, nh_, kv_) => Math.floor(h / (nh_ / kv_)));
  const emb = get(w, "model.embed_tokens.weight");
  let x: Mat = tokens.map((t) => Float64Array.from(emb.data.subarray(t * H, (t + 1) * H)));
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}.`;
    const h = rmsNorm(x, get(w, p + "input_layernorm.weight"), c.rmsNormEps);
    const bias = (n: string) => (c.qkvBias ? get(w, p + `self_attn.${n}.bias`) : undefined);
    let q = linear(h, get(w, p + "self_attn.q_proj.weight"), bias("q_proj"));
    let k = linear(h, get(w, p + "self_attn.k_proj.weight"), bias("k_proj"));
    const v = linear(h, get(w, p + "self_attn.v_proj.weight"), bias("v_proj"));
    const head = (m: Float64Array, j: number) => m.subarray(j * hd, (j + 1) * hd);
    if (c.qkNorm) {
      // Qwen3: RMSNorm of each head's vector (weights (hd)) before RoPE
      const perHead = (m: Mat, heads: number, wn: HostTensor): Mat =>
        m.map((row) => {
          const out = new Float64Array(row.length);
          for (let j = 0; j < heads; j++) out.set(rmsNorm([head(row, j)], wn, c.rmsNormEps)[0], j * hd);
          return out;
        });
      q = perHead(q, nh, get(w, p + "self_attn.q_norm.weight"));
      k = perHead(k, kv, get(w, p + "self_attn.k_norm.weight"));
    }
    const ctx: Mat = tokens.map(() => new Float64Array(nh * hd));
    for (let qh = 0; qh < nh; qh++) {
      const kh = kvHeadOf(qh, nh, kv);
      const ks = k.map((row, s) => rope(head(row, kh), s, invFreq));
      for (let t = 0; t < T; t++) {
        const qv = rope(head(q[t], qh), t, invFreq);
        const scores: number[] = [];
        for (let s = 0; s <= t; s++) {
          let dot = 0;
          for (let d = 0; d < hd; d++) dot += qv[d] * ks[s][d];
          scores.push(dot / Math.sqrt(hd));
        }
        const m = Math.max(...scores);
        const e = scores.map((z) => Math.exp(z - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let s = 0; s <= t; s++) {
          const vv = head(v[s], kh);
          for (let d = 0; d < hd; d++) ctx[t][qh * hd + d] += (e[s] / z) * vv[d];
        }
      }
    }
    const attn = linear(ctx, get(w, p + "self_attn.o_proj.weight"));
    x = x.map((row, t) => row.map((val, i) => val + attn[t][i]));
    const h2 = rmsNorm(x, get(w, p + "post_attention_layernorm.weight"), c.rmsNormEps);
    const gate = linear(h2, get(w, p + "mlp.gate_proj.weight"));
    const up = linear(h2, get(w, p + "mlp.up_proj.weight"));
    const act = gate.map((g, t) => g.map((z, i) => silu(z) * up[t][i]));
    const down = linear(act, get(w, p + "mlp.down_proj.weight"));
    x = x.map((row, t) => row.map((val, i) => val + down[t][i]));
  }
  const fin = rmsNorm(x, get(w, "model.norm.weight"), c.rmsNormEps);
  return linear(fin, c.tieWordEmbeddings ? emb : get(w, "lm_head.weight"));
}
