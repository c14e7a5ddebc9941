/**
 * Hugging Face `config.json` for the Qwen2 / Qwen3 / Llama decoder family, parsed once
 * into the few numbers the transformer needs, plus the presets `init-model` uses.
 * Qwen3 is Qwen2's layout without the q/k/v bias and with a per-head RMSNorm on queries
 * and keys (`q_norm`, `k_norm`, weights of head_dim) before the rotary embedding.
 */
import { z } from "zod";
import { ModelFormatError } from "../util/errors.js";

export const SUPPORTED_MODEL_TYPES = ["qwen2", "qwen3", "llama"] as const;
export type ModelType = (typeof SUPPORTED_MODEL_TYPES)[number];

const posInt = z.number().int().positive();
const ropeScaling = z
  .object({
    rope_type: z.string().optional(),
    type: z.string().optional(),
    factor: z.number().positive().optional(),
    low_freq_factor: z.number().positive().optional(),
    high_freq_factor: z.number().positive().optional(),
    original_max_position_embeddings: posInt.optional(),
  })
  .passthrough()
  .nullable()
  .optional();

const hfConfigSchema = z
  .object({
    model_type: z.string(),
    vocab_size: posInt,
    hidden_size: posInt,
    num_hidden_layers: posInt,
    num_attention_heads: posInt,
    num_key_value_heads: posInt.optional(),
    head_dim: posInt.nullable().optional(),
    intermediate_size: posInt,
    rms_norm_eps: z.number().positive().default(1e-6),
    rope_theta: z.number().positive().default(10000),
    rope_scaling: ropeScaling,
    max_position_embeddings: posInt.default(2048),
    tie_word_embeddings: z.boolean().optional(),
    attention_bias: z.boolean().optional(),
    hidden_act: z.string().default("silu"),
    bos_token_id: z.number().int().nullable().optional(),
    eos_token_id: z
      .union([z.number().int(), z.array(z.number().int())])
      .nullable()
      .optional(),
    torch_dtype: z.string().optional(),
    use_sliding_window: z.boolean().optional(),
    layer_types: z.array(z.string()).optional(),
    num_experts: z.number().int().nonnegative().nullable().optional(),
  })
  .passthrough();

/** The normalized configuration the model code reads. */
export interface ModelConfig {
  modelType: ModelType;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  intermediateSize: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** Llama 3 style frequency scaling, when the config asks for it. */
  ropeScaling?: { factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPosition: number };
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry a bias (always for Qwen2; `attention_bias` for Llama and Qwen3). */
  qkvBias: boolean;
  /** Per-head RMSNorm of queries and keys before RoPE (`self_attn.q_norm` / `k_norm`, Qwen3). */
  qkNorm: boolean;
  /** The raw config.json, written back unchanged on save. */
  raw: Record<string, unknown>;
}

/**
 * Largest size each field may declare: far above any real model, so a hostile or mistyped
 * config.json fails here, before anything is sized by it (1e9 layers would otherwise build a
 * billion-entry parameter map). Whether the model fits in memory is checked separately, where
 * weights are loaded (./model-limits.ts).
 */
const SIZE_BOUNDS = {
  num_hidden_layers: { max: 1024, real: "Llama 3.1 405B has 126" },
  hidden_size: { max: 65536, real: "Llama 3.1 405B has 16384" },
  num_attention_heads: { max: 1024, real: "Llama 3.1 405B has 128" },
  num_key_value_heads: { max: 1024, real: "Llama 3.1 405B has 8" },
  head_dim: { max: 8192, real: "most models use 64 to 256" },
  intermediate_size: { max: 2 ** 20, real: "Llama 3.1 405B has 53248" },
  vocab_size: { max: 2 ** 24, real: "Llama 3 has 128256, Gemma 3 262144" },
  max_position_embeddings: { max: 2 ** 24, real: "Llama 4 Scout has 10485760" },
};
type Bound = { max: number; real: string };

function checkSizeBounds(c: z.infer<typeof hfConfigSchema>, file: string): void {
  const check = (field: string, value: number | null | undefined, { max, real }: Bound) => {
    if (value != null && value > max)
      throw new ModelFormatError(file, field, `${value} is out of range: at most ${max} is accepted (${real})`);
  };
  for (const k of Object.keys(SIZE_BOUNDS) as (keyof typeof SIZE_BOUNDS)[]) check(k, c[k], SIZE_BOUNDS[k]);
  check(
    "rope_scaling.original_max_position_embeddings",
    c.rope_scaling?.original_max_position_embeddings,
    SIZE_BOUNDS.max_position_embeddings,
  );
}

export function parseModelConfig(json: unknown, file = "config.json"): ModelConfig {
  const res = hfConfigSchema.safeParse(json);
  if (!res.success) {
    const issue = res.error.issues[0];
    throw new ModelFormatError(file, issue.path.join(".") || undefined, issue.message);
  }
  const c = res.data;
  checkSizeBounds(c, file);
  if (!(SUPPORTED_MODEL_TYPES as readonly string[]).includes(c.model_type)) {
    throw new ModelFormatError(
      file,
      "model_type",
      `unsupported model_type '${c.model_type}'; supported: ${SUPPORTED_MODEL_TYPES.join(", ")}`,
    );
  }
  checkUnimplemented(c, file);
  if (c.hidden_act !== "silu")
    throw new ModelFormatError(file, "hidden_act", `unsupported activation '${c.hidden_act}'; supported: silu`);
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0) {
    throw new ModelFormatError(
      file,
      "num_key_value_heads",
      `${numKvHeads} does not divide num_attention_heads ${c.num_attention_heads}`,
    );
  }
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new ModelFormatError(file, "head_dim", `head dimension ${headDim} must be an even integer`);
  }
  const modelType = c.model_type as ModelType;
  return {
    modelType,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    numLayers: c.num_hidden_layers,
    numHeads: c.num_attention_heads,
    numKvHeads,
    headDim,
    intermediateSize: c.intermediate_size,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta: c.rope_theta,
    ropeScaling: parseRopeScaling(c.rope_scaling, file),
    maxPositionEmbeddings: c.max_position_embeddings,
    tieWordEmbeddings: c.tie_word_embeddings ?? modelType === "qwen2",
    qkvBias: modelType === "qwen2" ? true : (c.attention_bias ?? false),
    qkNorm: modelType === "qwen3",
    raw: json as Record<string, unknown>,
  };
}

/** Options of the family the engine does not implement, refused by name rather than run wrongly. */
function checkUnimplemented(c: z.infer<typeof hfConfigSchema>, file: string): void {
  if (c.use_sliding_window)
    throw new ModelFormatError(
      file,
      "use_sliding_window",
      "sliding-window attention is not implemented; set it to false",
    );
  const other = c.layer_types?.find((t) => t !== "full_attention");
  if (other !== undefined)
    throw new ModelFormatError(file, "layer_types", `'${other}' layers are not implemented; only full_attention`);
  if (c.num_experts) throw new ModelFormatError(file, "num_experts", "mixture-of-experts layers are not implemented");
}

function parseRopeScaling(s: z.infer<typeof ropeScaling>, file: string): ModelConfig["ropeScaling"] {
  if (!s) return undefined;
  const kind = s.rope_type ?? s.type;
  if (kind === "default" || kind === undefined) return undefined;
  if (kind !== "llama3")
    throw new ModelFormatError(file, "rope_scaling.rope_type", `unsupported rope scaling '${kind}'; supported: llama3`);
  return {
    factor: s.factor ?? 8,
    lowFreqFactor: s.low_freq_factor ?? 1,
    highFreqFactor: s.high_freq_factor ?? 4,
    originalMaxPosition: s.original_max_position_embeddings ?? 8192,
  };
}

export const PRESETS = {
  tiny: {
    hidden_size: 64,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    intermediate_size: 192,
  },
  small: {
    hidden_size: 256,
    num_hidden_layers: 4,
    num_attention_heads: 8,
    num_key_value_heads: 2,
    intermediate_size: 768,
  },
  medium: {
    hidden_size: 512,
    num_hidden_layers: 8,
    num_attention_heads: 8,
    num_key_value_heads: 2,
    intermediate_size: 1536,
  },
} as const;
export type PresetName = keyof typeof PRESETS;

/** A Qwen2-style config.json object for a preset and a vocabulary size. */
export function presetConfigJson(
  preset: PresetName,
  vocabSize: number,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    architectures: ["Qwen2ForCausalLM"],
    model_type: "qwen2",
    vocab_size: vocabSize,
    ...PRESETS[preset],
    hidden_act: "silu",
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 2048,
    tie_word_embeddings: true,
    torch_dtype: "float32",
    ...extra,
  };
}

/** Parameter count of the decoder (embeddings included once when tied). */
export function parameterCount(c: ModelConfig): number {
  const h = c.hiddenSize,
    q = c.numHeads * c.headDim,
    kv = c.numKvHeads * c.headDim;
  const attn = h * q + 2 * h * kv + q * h + (c.qkvBias ? q + 2 * kv : 0) + (c.qkNorm ? 2 * c.headDim : 0);
  const mlp = 3 * h * c.intermediateSize;
  const layer = attn + mlp + 2 * h;
  return c.numLayers * layer + h + c.vocabSize * h * (c.tieWordEmbeddings ? 1 : 2);
}
