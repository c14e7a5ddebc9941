/**
 * The decoder of the native engine: its parameters in native memory (typed arrays outside the
 * wasm heap, one copy per process) and passes over the addon's C decoder (native/model/).
 *
 * Layout in memory (native/model/model.h): every matrix a token multiplies is held (in, out), the
 * transpose of Hugging Face's (out, in), so the decode step reads it without a transpose; the
 * language-model head is (H, V), and with tied embeddings it is the embedding itself, transposed.
 * Weights keep the dtype they came in (float32, bfloat16 or float16) unless they train: a trained
 * weight is float32 (an Adam update is far below bfloat16's resolution), with a float32 gradient.
 */
import type { ModelConfig } from "../../../model/config.js";
import { toFloat32, type DType, type HostTensor, type RawTensor } from "../../../model/safetensors.js";
import { checkFiniteTensor } from "../../../model/finite-weights.js";
import { parameterShapes } from "../../../model/parameter-shapes.js";
import { ropeInverseFrequencies } from "../../../model/rope.js";
import { ModelFormatError } from "../../../util/errors.js";
import { modelAddon, type ModelAddon, type NativeHandle } from "./model-addon.js";
import { loraModules, type LoraAdapters, type LoraSpec } from "../../../model/peft.js";
import { checkLoraScale } from "../../../model/peft-config.js";

export type WeightData = Float32Array | Uint16Array;
/** A tensor as loaded: float32, or 16-bit bits with their dtype. */
export interface LoadedWeight {
  shape: number[];
  data: WeightData;
  dtype?: DType;
}

const DTYPE_CODE: Record<DType, number> = { F32: 0, BF16: 1, F16: 2 };
const SLOTS_GLOBAL = 4,
  SLOTS_LAYER = 18;
const SLOT = { embed: 0, head: 1, norm: 2, score: 3 } as const;
export const LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] as const;
export type LinearName = (typeof LINEARS)[number];
/** One parameter as the native model holds it. */
export interface NativeParam {
  /** Hugging Face name. */
  name: string;
  /** Shape in memory: linear weights and the head (in, out); everything else as on disk. */
  shape: number[];
  dtype: DType;
  data: WeightData;
  /** Float32 gradient accumulator (shape in memory), when the parameter trains. */
  grad: Float32Array | null;
  /** Held as the transpose of its Hugging Face layout. */
  transposed: boolean;
  slot: number;
  /** The array is this decoder's own (not the caller's), so training may update it in place. */
  owned: boolean;
}

/** One LoRA adapter as the native model holds it: A and B transposed (PEFT stores A (r, in), B (out, r)). */
export interface NativeAdapter {
  /** The adapted module's Hugging Face path ("model.layers.0.self_attn.q_proj", "lm_head"). */
  module: string;
  /** Its index among the addon's linears: layer·7 + position in LINEARS, or L·7 for the head. */
  linear: number;
  in: number;
  out: number;
  a: Float32Array; // (in, r)
  b: Float32Array; // (r, out)
  da: Float32Array | null;
  db: Float32Array | null;
}

/** A tensor the optimizer updates: a trained parameter or one half of an adapter. */
export interface TrainedTensor {
  name: string;
  data: Float32Array;
  grad: Float32Array;
  /** Matrices (rank 2) get weight decay. */
  rank: number;
}

/** "full": every parameter trains; "lora": only the adapters (the base frozen); "none": inference only. */
export type Trainability = "full" | "lora" | "none";

export interface NativeDecoderOptions {
  head?: "lm" | "value";
  /** Default "full", or "lora" when `lora` is given. */
  train?: Trainability;
  /** LoRA adapters (PEFT layout) and their spec. */
  lora?: { spec: LoraSpec; adapters: LoraAdapters };
  /**
   * Take each tensor out of `weights` once it is placed, so a matrix copied into its transpose can
   * be collected at once: loading then peaks near one copy of the weights, not two.
   */
  consume?: boolean;
}

/** Where a Hugging Face parameter goes: its slot and whether it is held transposed. */
function placement(config: ModelConfig, name: string): { slot: number; transposed: boolean } {
  if (name === "model.embed_tokens.weight")
    return config.tieWordEmbeddings ? { slot: SLOT.head, transposed: true } : { slot: SLOT.embed, transposed: false };
  if (name === "lm_head.weight") return { slot: SLOT.head, transposed: true };
  if (name === "model.norm.weight") return { slot: SLOT.norm, transposed: false };
  if (name === "score.weight") return { slot: SLOT.score, transposed: false };
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
  if (!m) throw new Error(`internal: no slot for ${name}`);
  const base = SLOTS_GLOBAL + SLOTS_LAYER * Number(m[1]),
    rest = m[2];
  if (rest === "input_layernorm.weight") return { slot: base, transposed: false };
  if (rest === "post_attention_layernorm.weight") return { slot: base + 1, transposed: false };
  // after ln1, ln2, the seven weights and their seven biases: Qwen3's per-head q and k norms
  if (rest === "self_attn.q_norm.weight") return { slot: base + 2 + 2 * LINEARS.length, transposed: false };
  if (rest === "self_attn.k_norm.weight") return { slot: base + 3 + 2 * LINEARS.length, transposed: false };
  const lin = /^(?:self_attn|mlp)\.(\w+_proj)\.(weight|bias)$/.exec(rest);
  const i = lin ? LINEARS.indexOf(lin[1] as LinearName) : -1;
  if (!lin || i < 0) throw new Error(`internal: no slot for ${name}`);
  return lin[2] === "weight"
    ? { slot: base + 2 + i, transposed: true }
    : { slot: base + 2 + LINEARS.length + i, transposed: false };
}

/** The transpose of a (rows, cols) row-major matrix. */
export function transpose<T extends WeightData>(src: T, rows: number, cols: number): T {
  const out = new (src.constructor as new (n: number) => T)(src.length);
  const B = 64;
  for (let i0 = 0; i0 < rows; i0 += B)
    for (let j0 = 0; j0 < cols; j0 += B) {
      const i1 = Math.min(rows, i0 + B),
        j1 = Math.min(cols, j0 + B);
      for (let i = i0; i < i1; i++) for (let j = j0; j < j1; j++) out[j * rows + i] = src[i * cols + j];
    }
  return out;
}

/** float32 values of 16-bit bits. */
const halfToFloat32 = (data: Uint16Array, dtype: DType): Float32Array =>
  toFloat32({ shape: [data.length], data, dtype });

/**
 * The native layout of PEFT adapters (A and B transposed), checked finite, with gradient
 * accumulators when they train.
 */
function nativeAdapters(
  config: ModelConfig,
  given: { spec: LoraSpec; adapters: LoraAdapters } | undefined,
  trainAdapters: boolean,
  file: string,
): { adapters: Map<string, NativeAdapter>; lora: { spec: LoraSpec; scale: number } | undefined } {
  const adapters = new Map<string, NativeAdapter>();
  if (!given) return { adapters, lora: undefined };
  const { spec } = given;
  const scale = checkLoraScale(spec, file);
  const r = spec.rank;
  for (const m of loraModules(config, spec.targets)) {
    const ad = given.adapters.get(m.path);
    if (!ad) throw new ModelFormatError(file, m.path, "the LoRA spec targets this module but it has no adapter");
    checkFiniteTensor(file, `${m.path}.lora_A`, { shape: [r, m.in], data: ad.a });
    checkFiniteTensor(file, `${m.path}.lora_B`, { shape: [m.out, r], data: ad.b });
    const layer = /^model\.layers\.(\d+)\./.exec(m.path);
    const linear = layer
      ? Number(layer[1]) * LINEARS.length + LINEARS.indexOf(m.target as LinearName)
      : config.numLayers * LINEARS.length;
    adapters.set(m.path, {
      module: m.path,
      linear,
      in: m.in,
      out: m.out,
      a: transpose(ad.a, r, m.in), // (r, in) -> (in, r)
      b: transpose(ad.b, m.out, r), // (out, r) -> (r, out)
      da: trainAdapters ? new Float32Array(m.in * r) : null,
      db: trainAdapters ? new Float32Array(r * m.out) : null,
    });
  }
  return { adapters, lora: { spec, scale } };
}

export class NativeDecoder {
  readonly params: Map<string, NativeParam>;
  readonly head: "lm" | "value";
  /** LoRA adapters by module path; empty without LoRA. */
  readonly adapters: Map<string, NativeAdapter>;
  private handle: NativeHandle;
  private readonly addon: ModelAddon;
  private prepared = false;

  private constructor(
    readonly config: ModelConfig,
    params: Map<string, NativeParam>,
    head: "lm" | "value",
    /** What trains: the full weights, the adapters, or nothing. */
    readonly mode: Trainability,
    readonly lora: { spec: LoraSpec; scale: number } | undefined,
    adapters: Map<string, NativeAdapter>,
  ) {
    this.addon = modelAddon();
    this.params = params;
    this.head = head;
    this.adapters = adapters;
    this.handle = this.build();
  }

  /**
   * The decoder from weights in Hugging Face names and layout (float32 HostTensors, or 16-bit
   * bits with their dtype), checking every name and shape, and that every weight it keeps, every
   * adapter and the adapter scale are finite (a ModelFormatError naming `file` and the tensor).
   */
  static fromWeights(
    config: ModelConfig,
    weights: Map<string, LoadedWeight | HostTensor>,
    file: string,
    opts: NativeDecoderOptions = {},
  ): NativeDecoder {
    const head = opts.head ?? "lm",
      mode = opts.train ?? (opts.lora ? "lora" : "full");
    if (mode === "lora" && !opts.lora) throw new Error("internal: train 'lora' without adapters");
    const params = new Map<string, NativeParam>();
    for (const [name, shape] of parameterShapes(config, head)) {
      let w = weights.get(name) as LoadedWeight | undefined;
      if (!w && name === "score.weight") w = { shape, data: new Float32Array(shape[0] * shape[1]) };
      if (!w) throw new ModelFormatError(file, name, "tensor missing from the checkpoint");
      if (w.shape.length !== shape.length || w.shape.some((d, i) => d !== shape[i]))
        throw new ModelFormatError(
          file,
          name,
          `shape [${w.shape}] disagrees with config.json, which implies [${shape}]`,
        );
      let dtype: DType = w.data instanceof Float32Array ? "F32" : (w.dtype ?? "BF16");
      if (dtype !== "F32" && !(w.data instanceof Uint16Array))
        throw new ModelFormatError(file, name, `${dtype} data must come as 16-bit values`);
      checkFiniteTensor(file, name, { shape: w.shape, data: w.data, dtype } as RawTensor);
      const { slot, transposed } = placement(config, name);
      // Norms, biases and the value head compute in float32; matrices keep their dtype until
      // they train (prepareTraining).
      const small = shape.length === 1 || name === "score.weight";
      let data: WeightData = w.data;
      if (dtype !== "F32" && small) {
        data = halfToFloat32(w.data as Uint16Array, dtype);
        dtype = "F32";
      }
      if (transposed) data = transpose(data, shape[0], shape[1]);
      // score.weight (1, H) is held (H, 1), as the TF.js engine holds it (same data order)
      const memShape = transposed || name === "score.weight" ? [shape[1], shape[0]] : shape.slice();
      if (opts.consume) weights.delete(name);
      params.set(name, {
        name,
        shape: memShape,
        dtype,
        data,
        grad: null,
        transposed,
        slot,
        owned: data !== w.data,
      });
    }
    const { adapters, lora } = nativeAdapters(config, opts.lora, mode === "lora", file);
    return new NativeDecoder(config, params, head, mode, lora, adapters);
  }

  /**
   * A critic over `policy`'s frozen base (a LoRA policy): the same weight arrays, not a copy, with
   * its own adapters (`lora`, which must not target lm_head: a value model has no LM head) and a
   * float32 value head that trains beside them (`score`, zero when not given). Only the adapters
   * and the value head train, so the shared weights never change.
   */
  static valueSharingBase(
    policy: NativeDecoder,
    lora: { spec: LoraSpec; adapters: LoraAdapters },
    file: string,
    score?: Float32Array,
  ): NativeDecoder {
    const c = policy.config;
    if (policy.mode !== "lora") throw new Error("internal: a critic shares the base of a LoRA policy only");
    if (lora.spec.targets.includes("lm_head")) throw new Error("internal: a value model has no lm_head to adapt");
    const params = new Map<string, NativeParam>();
    for (const [name, shape] of parameterShapes(c, "value")) {
      if (name !== "score.weight") {
        params.set(name, { ...policy.params.get(name)!, grad: null, owned: false });
        continue;
      }
      if (score) checkFiniteTensor(file, name, { shape, data: score });
      if (score && score.length !== c.hiddenSize)
        throw new ModelFormatError(
          file,
          name,
          `holds ${score.length} values, the model's hidden size is ${c.hiddenSize}`,
        );
      const data = score ? Float32Array.from(score) : new Float32Array(c.hiddenSize);
      const { slot } = placement(c, name);
      params.set(name, {
        name,
        shape: [shape[1], shape[0]],
        dtype: "F32",
        data,
        grad: new Float32Array(data.length),
        transposed: false,
        slot,
        owned: true,
      });
    }
    const { adapters, lora: l } = nativeAdapters(c, lora, true, file);
    return new NativeDecoder(c, params, "value", "lora", l, adapters);
  }

  /**
   * A model over `base`'s weights (the same arrays, not a copy) with other LoRA adapters, as a
   * server holds each adapter it has loaded: `train` false, nothing trains (a sampling model);
   * true, the adapters train and the shared weights stay frozen (one tenant of several over one
   * base). `base`'s own adapters, if it has any, are not used. A parameter `base` later replaces
   * (prepareTraining, a load) stays as it was here.
   */
  static withAdapters(
    base: NativeDecoder,
    lora: { spec: LoraSpec; adapters: LoraAdapters },
    file: string,
    train = false,
  ): NativeDecoder {
    if (base.head !== "lm") throw new Error("internal: served adapters go on a language-model head");
    const params = new Map<string, NativeParam>();
    for (const [name, p] of base.params) params.set(name, { ...p, grad: null, owned: false });
    const { adapters, lora: l } = nativeAdapters(base.config, lora, train, file);
    return new NativeDecoder(base.config, params, "lm", train ? "lora" : "none", l, adapters);
  }

  /** Whether the full weights are ready to train: float32, with gradient accumulators. */
  get trainingReady(): boolean {
    return this.mode !== "full" || this.prepared;
  }

  /**
   * Makes the full weights trainable, once, before the first training pass: 16-bit matrices
   * become float32 (an Adam update is far below bfloat16's resolution) and every parameter gets
   * a float32 gradient. Until then a model that only samples holds its weights as they came.
   */
  prepareTraining(): void {
    if (this.trainingReady) return;
    for (const p of this.params.values()) {
      if (p.dtype !== "F32") {
        p.data = halfToFloat32(p.data as Uint16Array, p.dtype);
        p.dtype = "F32";
      } else if (!p.owned) p.data = (p.data as Float32Array).slice();
      p.owned = true;
      p.grad = new Float32Array(p.data.length);
    }
    this.prepared = true;
    this.handle = this.build();
  }

  /** The adapters in PEFT's layout (A (r, in), B (out, r)). */
  loraAdapters(): LoraAdapters {
    const r = this.lora?.spec.rank ?? 0;
    const out: LoraAdapters = new Map();
    for (const ad of this.adapters.values())
      out.set(ad.module, { a: transpose(ad.a, ad.in, r), b: transpose(ad.b, r, ad.out) });
    return out;
  }

  /** What the optimizer updates: trained parameters, and both halves of every trained adapter. */
  trainedTensors(): TrainedTensor[] {
    this.prepareTraining();
    const out: TrainedTensor[] = [];
    for (const p of this.params.values())
      if (p.grad) out.push({ name: p.name, data: p.data as Float32Array, grad: p.grad, rank: p.shape.length });
    for (const ad of this.adapters.values()) {
      if (ad.da) out.push({ name: `${ad.module}.lora_A`, data: ad.a, grad: ad.da, rank: 2 });
      if (ad.db) out.push({ name: `${ad.module}.lora_B`, data: ad.b, grad: ad.db, rank: 2 });
    }
    return out;
  }

  /** The addon's model over this decoder's arrays (rebuilt when the set of arrays changes). */
  private build(): NativeHandle {
    const c = this.config,
      L = c.numLayers;
    const slots = SLOTS_GLOBAL + SLOTS_LAYER * L,
      nlin = LINEARS.length * L + 1;
    const tensors: (WeightData | null)[] = new Array(slots).fill(null);
    const grads: (Float32Array | null)[] = new Array(slots).fill(null);
    const dtypes = new Int32Array(slots);
    for (const p of this.params.values()) {
      tensors[p.slot] = p.data;
      grads[p.slot] = p.grad;
      dtypes[p.slot] = DTYPE_CODE[p.dtype];
    }
    const dims = new Float64Array([
      c.hiddenSize,
      L,
      c.numHeads,
      c.numKvHeads,
      c.headDim,
      c.intermediateSize,
      c.vocabSize,
      c.rmsNormEps,
      c.tieWordEmbeddings ? 1 : 0,
      this.head === "value" ? 1 : 0,
      this.lora?.spec.dropout ?? 0,
    ]);
    const lora: Parameters<ModelAddon["modelCreate"]>[5] = new Array(nlin).fill(null);
    const ranks = new Int32Array(nlin),
      scales = new Float32Array(nlin);
    for (const ad of this.adapters.values()) {
      lora[ad.linear] = [ad.a, ad.b, ad.da, ad.db];
      ranks[ad.linear] = this.lora!.spec.rank;
      scales[ad.linear] = this.lora!.scale;
    }
    return this.addon.modelCreate(dims, ropeInverseFrequencies(c), tensors, dtypes, grads, lora, ranks, scales);
  }

  /** Weights in Hugging Face names and layout: 16-bit ones as they came, the rest float32. */
  toHostWeights(): Map<string, RawTensor> {
    const out = new Map<string, RawTensor>();
    for (const [name, shape] of parameterShapes(this.config, this.head)) {
      const p = this.params.get(name)!;
      const data = p.transposed ? transpose(p.data, p.shape[0], p.shape[1]) : p.data.slice();
      out.set(name, { shape: shape.slice(), data, dtype: p.dtype });
    }
    return out;
  }

  /** Floats in the trained tensors. */
  get size(): number {
    let n = 0;
    if (this.mode === "full") for (const p of this.params.values()) n += p.data.length;
    for (const ad of this.adapters.values()) n += (ad.da ? ad.a.length : 0) + (ad.db ? ad.b.length : 0);
    return n;
  }

  /** Bytes the weights take in memory. */
  get weightBytes(): number {
    let n = 0;
    for (const p of this.params.values()) n += p.data.byteLength;
    return n;
  }

  zeroGrad(): void {
    if (this.trainingReady) for (const t of this.trainedTensors()) t.grad.fill(0);
  }

  /** Bytes a pass over `tokens` tokens in `sequences` sequences allocates. */
  passBytes(tokens: number, sequences: number, train: boolean): number {
    return this.addon.modelPassBytes(this.handle, tokens, sequences, train);
  }

  /**
   * Runs the forward over whole sequences (no cache). `train` keeps what the backward needs; a
   * training pass draws its LoRA dropout masks (engine.lora.dropout) from `seed`. With `parents`,
   * sequence i continues sequence parents[i] < i (-1: none), a shared prefix (../prefix-tree.ts).
   */
  forward(sequences: ArrayLike<number>[], train: boolean, seed = 0, parents?: Int32Array): NativePass {
    const lens = Int32Array.from(sequences, (s) => s.length);
    const tokens = new Int32Array(lens.reduce((a, b) => a + b, 0));
    let o = 0;
    for (const s of sequences) {
      tokens.set(s, o);
      o += s.length;
    }
    if (train) this.prepareTraining();
    return new NativePass(
      this.addon,
      this.addon.modelPass(this.handle, tokens, lens, train, null, null, null, seed, parents ?? null),
      lens,
    );
  }

  /**
   * Extends sequences whose keys and values are cached: sequence i appends tokens[i] after its
   * past[i] cached positions, writing their keys and values into caches[i] (L, 2, cap, kv·hd).
   */
  extend(tokens: ArrayLike<number>[], past: Int32Array, caches: Float32Array[], caps: Int32Array): NativePass {
    const lens = Int32Array.from(tokens, (s) => s.length);
    const flat = new Int32Array(lens.reduce((a, b) => a + b, 0));
    let o = 0;
    for (const s of tokens) {
      flat.set(s, o);
      o += s.length;
    }
    const pass = this.addon.modelPass(this.handle, flat, lens, false, past, caches, caps);
    return new NativePass(this.addon, pass, lens);
  }

  /** Floats per cached token: layers × 2 × kv heads × head dim. */
  get kvFloatsPerToken(): number {
    const c = this.config;
    return c.numLayers * 2 * c.numKvHeads * c.headDim;
  }
}

/** A forward pass whose activations live in native memory until `free()` (or collection). */
export class NativePass {
  /** First row of each sequence in the pass's (N, ...) outputs. */
  readonly starts: Int32Array;
  readonly N: number;

  constructor(
    private readonly addon: ModelAddon,
    private readonly handle: NativeHandle,
    readonly lens: Int32Array,
  ) {
    this.starts = new Int32Array(lens.length);
    let n = 0;
    lens.forEach((l, i) => {
      this.starts[i] = n;
      n += l;
    });
    this.N = n;
  }

  /** Log-probabilities (N) of `targets` (N) at temperature T, and the entropies (N). */
  logprobs(targets: Int32Array, temperature: number): { logp: Float32Array; entropy: Float32Array } {
    const logp = new Float32Array(this.N),
      entropy = new Float32Array(this.N);
    this.addon.passLogprobs(this.handle, targets, temperature, logp, entropy);
    return { logp, entropy };
  }

  /** Logits (rows, V) of the given rows. */
  logits(rows: Int32Array, vocab: number): Float32Array {
    const out = new Float32Array(rows.length * vocab);
    this.addon.passLogits(this.handle, rows, out);
    return out;
  }

  /** Values (N) of a value model. */
  values(): Float32Array {
    const out = new Float32Array(this.N);
    this.addon.passValues(this.handle, out);
    return out;
  }

  /** Adds the gradient of Σ dlogp·logp (after logprobs) into the parameters' accumulators. */
  backward(dlogp: Float32Array): void {
    this.addon.passBackward(this.handle, dlogp);
  }

  backwardValues(dvalue: Float32Array): void {
    this.addon.passBackwardValues(this.handle, dvalue);
  }

  free(): void {
    this.addon.passFree(this.handle);
  }
}
