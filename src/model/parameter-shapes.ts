/**
 * A model's parameters as Hugging Face checkpoints name and shape them, and seeded random weights
 * in that layout: plain arrays, no compute library, so either engine (and `initModel`) uses them.
 */
import type { ModelConfig } from "./config.js";
import type { HostTensor } from "./safetensors.js";
import { Rng } from "../util/rng.js";

/** Hugging Face names and shapes (as stored on disk) of every parameter. */
export function parameterShapes(c: ModelConfig, head: "lm" | "value" = "lm"): Map<string, number[]> {
  const h = c.hiddenSize,
    q = c.numHeads * c.headDim,
    kv = c.numKvHeads * c.headDim,
    f = c.intermediateSize;
  const m = new Map<string, number[]>();
  m.set("model.embed_tokens.weight", [c.vocabSize, h]);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}.`;
    m.set(p + "input_layernorm.weight", [h]);
    m.set(p + "self_attn.q_proj.weight", [q, h]);
    m.set(p + "self_attn.k_proj.weight", [kv, h]);
    m.set(p + "self_attn.v_proj.weight", [kv, h]);
    if (c.qkvBias) {
      m.set(p + "self_attn.q_proj.bias", [q]);
      m.set(p + "self_attn.k_proj.bias", [kv]);
      m.set(p + "self_attn.v_proj.bias", [kv]);
    }
    if (c.qkNorm) {
      m.set(p + "self_attn.q_norm.weight", [c.headDim]);
      m.set(p + "self_attn.k_norm.weight", [c.headDim]);
    }
    m.set(p + "self_attn.o_proj.weight", [h, q]);
    m.set(p + "post_attention_layernorm.weight", [h]);
    m.set(p + "mlp.gate_proj.weight", [f, h]);
    m.set(p + "mlp.up_proj.weight", [f, h]);
    m.set(p + "mlp.down_proj.weight", [h, f]);
  }
  m.set("model.norm.weight", [h]);
  if (head === "value") m.set("score.weight", [1, h]);
  else if (!c.tieWordEmbeddings) m.set("lm_head.weight", [c.vocabSize, h]);
  return m;
}

/**
 * Random weights in Hugging Face names and layout, seeded: matrices normal with std 0.02
 * truncated at 2 std; norms at 1; biases and the value head at 0. Drawn with our own RNG
 * (tfjs treats seed 0 as "no seed"), so a seed gives the same weights anywhere, on either engine.
 */
export function randomHostWeights(
  config: ModelConfig,
  seed: number,
  head: "lm" | "value" = "lm",
): Map<string, HostTensor> {
  const weights = new Map<string, HostTensor>();
  let stream = 0;
  for (const [name, shape] of parameterShapes(config, head)) {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    if (name.endsWith("norm.weight")) data.fill(1);
    else if (!name.endsWith(".bias") && name !== "score.weight") {
      const rng = new Rng(seed, stream++);
      for (let i = 0; i < data.length; i++) {
        let x = rng.normal();
        while (Math.abs(x) > 2) x = rng.normal();
        data[i] = 0.02 * x;
      }
    }
    weights.set(name, { shape, data });
  }
  return weights;
}
