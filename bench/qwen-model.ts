/**
 * The real-size models of `bench/engine.ts --model NAME`: a published config.json (Qwen2.5-0.5B,
 * Qwen2.5-1.5B, Qwen3-4B: REAL_MODELS) and random bf16 weights under the names and shapes the
 * loader expects (src/model/parameter-shapes.ts): 988 MB, 3.1 GB and 8.0 GB of model.safetensors.
 *
 * The weights are drawn tensor by tensor straight into bf16 bit patterns (a Uint16Array each),
 * never as float32: every value is an entry of a 65536-entry table of normal draws (std 0.02,
 * truncated at 2 std) picked by 16 random bits, so 494M values take a few seconds. Norms (Qwen3's
 * q/k norms too) are 1.
 *
 * bench/engine.ts runs this file as its own process (`node [loader flags] bench/qwen-model.(ts|js) DIR NAME`),
 * so that what the writer holds does not count in the benchmark's peak RSS.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseModelConfig } from "../src/model/config.js";
import { f32BitsToBF16, saveModelWeights, type RawTensor } from "../src/model/safetensors.js";
import { parameterShapes } from "../src/model/parameter-shapes.js";
import { Rng } from "../src/util/rng.js";

/** Qwen/Qwen2.5-0.5B's config.json, as published. */
export const QWEN25_05B_CONFIG = {
  architectures: ["Qwen2ForCausalLM"],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151643,
  hidden_act: "silu",
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 24,
  model_type: "qwen2",
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.40.1",
  use_cache: true,
  use_mrope: false,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** Qwen/Qwen2.5-1.5B's config.json, as published. */
export const QWEN25_15B_CONFIG = {
  ...QWEN25_05B_CONFIG,
  hidden_size: 1536,
  intermediate_size: 8960,
  max_position_embeddings: 131072,
  max_window_layers: 28,
  num_attention_heads: 12,
  num_hidden_layers: 28,
  num_key_value_heads: 2,
  sliding_window: 131072,
};

/** Qwen/Qwen3-4B's config.json, as published. */
export const QWEN3_4B_CONFIG = {
  architectures: ["Qwen3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: "silu",
  hidden_size: 2560,
  initializer_range: 0.02,
  intermediate_size: 9728,
  max_position_embeddings: 40960,
  max_window_layers: 36,
  model_type: "qwen3",
  num_attention_heads: 32,
  num_hidden_layers: 36,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.51.0",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** The models `--model` names: the key of their figures in the bench's lines, and their config.json. */
export const REAL_MODELS = {
  "qwen2.5-0.5b": { key: "qwen05b", config: QWEN25_05B_CONFIG },
  "qwen2.5-1.5b": { key: "qwen15b", config: QWEN25_15B_CONFIG },
  "qwen3-4b": { key: "qwen3_4b", config: QWEN3_4B_CONFIG },
} as const;
export type RealModelName = keyof typeof REAL_MODELS;

const BF16_ONE = 0x3f80;

/** 65536 bf16 bit patterns of std * N(0, 1) truncated at 2 std. */
function normalTable(rng: Rng, std: number): Uint16Array {
  const bits = new Uint32Array(1),
    f = new Float32Array(bits.buffer);
  const table = new Uint16Array(65536);
  for (let i = 0; i < table.length; i++) {
    let x = rng.normal();
    while (Math.abs(x) > 2) x = rng.normal();
    f[0] = std * x;
    table[i] = f32BitsToBF16(bits[0]);
  }
  return table;
}

/** config.json and model.safetensors (random bf16) of a real model's shape in `dir`. */
export function writeRealModel(
  dir: string,
  name: RealModelName,
  seed = 0,
  std = 0.02,
): { bytes: number; tensors: number } {
  const raw = REAL_MODELS[name].config;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify(raw, null, 2) + "\n");
  const config = parseModelConfig(raw);
  const table = normalTable(new Rng(seed, 0xffff), std);
  const weights = new Map<string, RawTensor>();
  let stream = 0,
    bytes = 0;
  for (const [name, shape] of parameterShapes(config)) {
    const data = new Uint16Array(shape.reduce((a, b) => a * b, 1));
    if (name.endsWith("norm.weight")) data.fill(BF16_ONE);
    else {
      // Matrices and the q/k/v biases alike.
      const rng = new Rng(seed, stream++);
      const n = data.length & ~1;
      for (let i = 0; i < n; i += 2) {
        const r = (rng.next() * 4294967296) >>> 0;
        data[i] = table[r & 0xffff];
        data[i + 1] = table[r >>> 16];
      }
      if (n < data.length) data[n] = table[rng.int(65536)];
    }
    weights.set(name, { dtype: "BF16", shape, data });
    bytes += data.byteLength;
  }
  saveModelWeights(dir, weights);
  return { bytes, tensors: weights.size };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [dir, name] = process.argv.slice(2);
  if (!dir || !Object.hasOwn(REAL_MODELS, name ?? "")) {
    console.error(`usage: qwen-model DIR ${Object.keys(REAL_MODELS).join("|")} [SEED]`);
    process.exit(2);
  }
  const t0 = performance.now();
  const { bytes, tensors } = writeRealModel(dir, name as RealModelName, Number(process.argv[4] ?? 0));
  console.log(
    JSON.stringify({
      wrote: dir,
      tensors,
      mb: Math.round(bytes / 1e6),
      seconds: Math.round((performance.now() - t0) / 100) / 10,
      rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
    }),
  );
}
