/**
 * A Qwen2 or Qwen3 model directory as one GGUF file (version 3, the format llama.cpp loads), so the same
 * weights can run under llama.cpp: bench/llama-cpp.ts measures it beside the native engine.
 *
 * Layout: "GGUF", version, tensor and key counts, the metadata (architecture, sizes, and the
 * tokenizer as a byte-level BPE: tokens, their types, merges), each tensor's name, dims
 * (innermost first: a Hugging Face (out, in) weight is [in, out]), type and offset, then the data,
 * every tensor starting on a multiple of ALIGNMENT bytes. Matrices keep their stored dtype (F32,
 * F16 or BF16); vectors (norms, biases) are float32. Hugging Face names map to llama.cpp's (`model.layers.3.self_attn.q_proj.weight`
 * is `blk.3.attn_q.weight`); a tied head is left out, and llama.cpp reuses the embedding.
 * Qwen3 is llama.cpp's "qwen3" architecture: Qwen2's keys under that prefix, its per-head q/k norms
 * as `attn_q_norm` / `attn_k_norm`. Not Llama: llama.cpp's Llama expects q/k rows in another order,
 * which this writer does not do.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import type { ModelConfig } from "./config.js";
import { toFloat32, type RawTensor } from "./safetensors.js";
import { ModelFormatError } from "../util/errors.js";

export const GGUF_ALIGNMENT = 32;

/** GGUF metadata value types. */
const T = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;
/** ggml tensor types by safetensors dtype. */
const GGML_TYPE = { F32: 0, F16: 1, BF16: 30 } as const;

/** llama.cpp's tensor name for a Hugging Face one, or undefined for a tensor it has no use for. */
export function ggufTensorName(hf: string): string | undefined {
  const fixed: Record<string, string> = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
  };
  if (fixed[hf]) return fixed[hf];
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  if (!m) return undefined;
  const part: Record<string, string> = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
  };
  return part[m[2]] && `blk.${m[1]}.${part[m[2]]}`;
}

/** The tokenizer as GGUF's "gpt2" model wants it: one token per id up to vocabSize. */
export interface GgufTokenizer {
  tokens: string[];
  /** 1 normal, 3 control (special), 4 user-defined, 5 unused (padding to vocab_size). */
  types: number[];
  merges: string[];
  eosTokenId?: number;
}

/** GgufTokenizer from a tokenizer.json object (BPE), padded with unused tokens to vocabSize. */
export function ggufTokenizer(json: unknown, vocabSize: number, eosTokenId?: number): GgufTokenizer {
  const t = json as {
    model?: { type?: string; vocab?: Record<string, number>; merges?: (string | [string, string])[] };
    added_tokens?: { id: number; content: string; special?: boolean }[];
  };
  if (t.model?.type !== "BPE" || !t.model.vocab)
    throw new ModelFormatError("tokenizer.json", "model.type", "GGUF export needs a BPE tokenizer");
  const tokens: string[] = Array.from({ length: vocabSize }, (_, i) => `[PAD${i}]`);
  const types: number[] = new Array<number>(vocabSize).fill(5);
  for (const [text, id] of Object.entries(t.model.vocab))
    if (id < vocabSize) {
      tokens[id] = text;
      types[id] = 1;
    }
  for (const a of t.added_tokens ?? [])
    if (a.id < vocabSize) {
      tokens[a.id] = a.content;
      types[a.id] = a.special ? 3 : 4;
    }
  const merges = (t.model.merges ?? []).map((m) => (typeof m === "string" ? m : m.join(" ")));
  return { tokens, types, merges, ...(eosTokenId !== undefined ? { eosTokenId } : {}) };
}

/** Little-endian bytes, grown as written. */
class Bytes {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v: number): void {
    this.room(1);
    this.length = this.buf.writeUInt8(v, this.length);
  }
  u32(v: number): void {
    this.room(4);
    this.length = this.buf.writeUInt32LE(v, this.length);
  }
  i32(v: number): void {
    this.room(4);
    this.length = this.buf.writeInt32LE(v, this.length);
  }
  u64(v: number): void {
    this.room(8);
    this.length = this.buf.writeBigUInt64LE(BigInt(v), this.length);
  }
  f32(v: number): void {
    this.room(4);
    this.length = this.buf.writeFloatLE(v, this.length);
  }
  str(s: string): void {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.room(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  zeros(n: number): void {
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

type Meta = [string, "u32", number] | [string, "f32", number] | [string, "string", string] | [string, "bool", boolean];

function writeMeta(b: Bytes, [key, type, value]: Meta): void {
  b.str(key);
  b.u32(T[type]);
  if (type === "u32") b.u32(value as number);
  else if (type === "f32") b.f32(value as number);
  else if (type === "bool") b.u8(value ? 1 : 0);
  else b.str(value as string);
}

function writeArray(b: Bytes, key: string, type: "string" | "i32", values: (string | number)[]): void {
  b.str(key);
  b.u32(T.array);
  b.u32(T[type]);
  b.u64(values.length);
  for (const v of values) {
    if (type === "string") b.str(v as string);
    else b.i32(v as number);
  }
}

const pad = (n: number) => (GGUF_ALIGNMENT - (n % GGUF_ALIGNMENT)) % GGUF_ALIGNMENT;

/** The model types the writer handles (llama.cpp's architecture of the same name). */
export const GGUF_MODEL_TYPES: readonly string[] = ["qwen2", "qwen3"];

/**
 * Writes `weights` (Hugging Face names, stored dtypes) of a Qwen2 or Qwen3 model as the GGUF file
 * `path`. Returns the tensors written, in order.
 */
export function writeGguf(
  path: string,
  config: ModelConfig,
  weights: Map<string, RawTensor>,
  tokenizer: GgufTokenizer,
): string[] {
  if (!GGUF_MODEL_TYPES.includes(config.modelType))
    throw new ModelFormatError(
      "config.json",
      "model_type",
      `GGUF export writes ${GGUF_MODEL_TYPES.join(" and ")} models, not ${config.modelType}`,
    );
  const c = config,
    arch = c.modelType;
  const meta: Meta[] = [
    ["general.architecture", "string", arch],
    ["general.name", "string", "agent-r1 export"],
    ["general.alignment", "u32", GGUF_ALIGNMENT],
    [`${arch}.context_length`, "u32", c.maxPositionEmbeddings],
    [`${arch}.embedding_length`, "u32", c.hiddenSize],
    [`${arch}.block_count`, "u32", c.numLayers],
    [`${arch}.feed_forward_length`, "u32", c.intermediateSize],
    [`${arch}.attention.head_count`, "u32", c.numHeads],
    [`${arch}.attention.head_count_kv`, "u32", c.numKvHeads],
    [`${arch}.attention.key_length`, "u32", c.headDim],
    [`${arch}.attention.value_length`, "u32", c.headDim],
    [`${arch}.rope.freq_base`, "f32", c.ropeTheta],
    [`${arch}.attention.layer_norm_rms_epsilon`, "f32", c.rmsNormEps],
    ["tokenizer.ggml.model", "string", "gpt2"],
    ["tokenizer.ggml.pre", "string", "qwen2"],
    ["tokenizer.ggml.add_bos_token", "bool", false],
  ];
  if (tokenizer.eosTokenId !== undefined) meta.push(["tokenizer.ggml.eos_token_id", "u32", tokenizer.eosTokenId]);
  const tensors: { name: string; t: RawTensor }[] = [];
  for (const [hf, t] of weights) {
    const name = ggufTensorName(hf);
    if (name === undefined) throw new ModelFormatError("model.safetensors", hf, "no GGUF name for this tensor");
    if (name === "output.weight" && c.tieWordEmbeddings) continue;
    // norms and biases go in as float32, as llama.cpp's own converter writes them (its CPU adds
    // do not take a 16-bit operand)
    const f32 = t.shape.length === 1 && t.dtype !== "F32";
    tensors.push({ name, t: f32 ? { dtype: "F32", shape: t.shape, data: toFloat32(t) } : t });
  }
  const head = new Bytes();
  head.u32(0x46554747); // "GGUF"
  head.u32(3);
  head.u64(tensors.length);
  head.u64(meta.length + 3);
  for (const m of meta) writeMeta(head, m);
  writeArray(head, "tokenizer.ggml.tokens", "string", tokenizer.tokens);
  writeArray(head, "tokenizer.ggml.token_type", "i32", tokenizer.types);
  writeArray(head, "tokenizer.ggml.merges", "string", tokenizer.merges);
  let offset = 0;
  for (const { name, t } of tensors) {
    head.str(name);
    head.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) head.u64(d);
    head.u32(GGML_TYPE[t.dtype]);
    head.u64(offset);
    offset += t.data.byteLength + pad(t.data.byteLength);
  }
  head.zeros(pad(head.length));
  const fd = openSync(path, "w");
  try {
    writeSync(fd, head.bytes());
    const zeros = Buffer.alloc(GGUF_ALIGNMENT);
    for (const { t } of tensors) {
      writeSync(fd, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      const p = pad(t.data.byteLength);
      if (p) writeSync(fd, zeros, 0, p);
    }
  } finally {
    closeSync(fd);
  }
  return tensors.map((x) => x.name);
}
