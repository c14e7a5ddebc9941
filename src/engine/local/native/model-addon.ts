/**
 * The native engine's part of the addon (native/model/model_napi.c): the decoder over native
 * buffers. Loaded with the rest of the addon (../addon.ts); the handles are opaque, each
 * tagged with its kind in C: a handle of the wrong kind (or any other value) is a TypeError naming
 * the argument, a freed pass an Error, and freeing a pass twice does nothing.
 */
import { loadAddon } from "../addon.js";
import { InputError } from "../../../util/errors.js";

/** An addon-side model or pass (an N-API external). */
export type NativeHandle = { readonly __native: unique symbol };

export interface ModelAddon {
  /** See model_napi.c for the argument layout (slots, LoRA entries). */
  modelCreate(
    dims: Float64Array,
    invFreq: Float64Array,
    tensors: (Float32Array | Uint16Array | null)[],
    dtypes: Int32Array,
    grads: (Float32Array | null)[],
    lora: ([Float32Array, Float32Array, Float32Array | null, Float32Array | null] | null)[],
    loraRank: Int32Array,
    loraScale: Float32Array,
  ): NativeHandle;
  /** Bytes a pass of `tokens` tokens in `sequences` sequences allocates. */
  modelPassBytes(model: NativeHandle, tokens: number, sequences: number, train: boolean): number;
  /** Runs the forward of a pass; with past/kv/caps, sequences extend their caches. */
  modelPass(
    model: NativeHandle,
    tokens: Int32Array,
    lens: Int32Array,
    train: boolean,
    past?: Int32Array | null,
    kv?: Float32Array[] | null,
    caps?: Int32Array | null,
    /** A training pass's LoRA dropout masks derive from it (an integer below 2^53). */
    seed?: number | null,
    /** Without caches: sequence i continues sequence parents[i] < i of the pass (-1: none). */
    parents?: Int32Array | null,
  ): NativeHandle;
  passLogprobs(
    pass: NativeHandle,
    targets: Int32Array,
    temperature: number,
    logp: Float32Array,
    entropy: Float32Array,
  ): void;
  passLogits(pass: NativeHandle, rows: Int32Array, out: Float32Array): void;
  passValues(pass: NativeHandle, out: Float32Array): void;
  passBackward(pass: NativeHandle, dlogp: Float32Array): void;
  passBackwardValues(pass: NativeHandle, dvalue: Float32Array): void;
  passFree(pass: NativeHandle): void;
}

/** The addon's model functions; an InputError naming the reason when the addon is unavailable. */
export function modelAddon(): ModelAddon {
  const st = loadAddon();
  if (!st.ok) {
    throw new InputError(
      `the native engine is unavailable: ${st.reason}`,
      "use engine.backend=tfjs, or build the addon with 'npm run build:native'",
    );
  }
  const a = st.addon as unknown as Partial<ModelAddon>;
  if (typeof a.modelCreate !== "function") {
    throw new InputError(
      "the native engine is unavailable: the addon is an old build without the decoder",
      "rebuild it with 'npm run build:native'",
    );
  }
  return a as ModelAddon;
}
