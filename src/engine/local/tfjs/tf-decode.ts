/**
 * The TF.js backend's sampling compute (../decode-compute.ts) over the TF.js decoder (./transformer.ts).
 *
 * The running batch keeps every layer's keys/values in one padded tensor (R, kv, W, hd). Row r's
 * keys are right-aligned: they occupy columns [W - len_r, W), and a key mask hides the padding to
 * their left. Each decode step appends one column for all rows; `keep` trims the columns no row
 * needs. Padded keys get exactly zero attention weight, so a row's results do not depend on the
 * others in the batch.
 */
import { tf } from "./tf-backend.js";
import { disposeCache, type KVCache, type Transformer } from "./transformer.js";
import type { DecodeBatch, DecodeCompute } from "../decode-compute.js";

export class TfDecodeCompute implements DecodeCompute<KVCache> {
  constructor(readonly model: Transformer) {}

  get vocabSize(): number {
    return this.model.config.vocabSize;
  }

  get maxPositions(): number {
    return this.model.config.maxPositionEmbeddings;
  }

  get kvBytesPerToken(): number {
    const c = this.model.config;
    return c.numLayers * 2 * c.numKvHeads * c.headDim * 4;
  }

  length(kv: KVCache): number {
    return kv.length;
  }

  prefix(kv: KVCache, len: number): KVCache {
    const slice = (t: tf.Tensor4D) => (len === kv.length ? t.clone() : t.slice([0, 0, 0, 0], [1, -1, len, -1]));
    return { k: kv.k.map(slice), v: kv.v.map(slice), length: len };
  }

  dispose(kv: KVCache): void {
    disposeCache(kv);
  }

  tensors(kv: KVCache): number {
    return kv.k.length + kv.v.length;
  }

  prefill(suffix: number[], past: KVCache | undefined): { logits: Float32Array; kv: KVCache } {
    const res = tf.tidy(() => {
      const { hidden, cache } = this.model.forward(tf.tensor2d([suffix], [1, suffix.length], "int32"), past);
      const last = hidden.slice([0, suffix.length - 1, 0], [1, 1, -1]).reshape([1, -1]) as tf.Tensor2D;
      return { logits: this.model.inferenceLogits(last), k: cache.k, v: cache.v };
    });
    const logits = res.logits.dataSync() as Float32Array;
    res.logits.dispose();
    const length = (past?.length ?? 0) + suffix.length;
    return { logits, kv: { k: res.k as tf.Tensor4D[], v: res.v as tf.Tensor4D[], length } };
  }

  newBatch(): DecodeBatch<KVCache> {
    return new TfDecodeBatch(this.model);
  }
}

class TfDecodeBatch implements DecodeBatch<KVCache> {
  private cache: KVCache | undefined; // (R, kv, W, hd) per layer
  size = 0;

  constructor(private readonly model: Transformer) {}

  /** Adds rows whose caches (n, kv, L, hd) are right-aligned, padding whichever side is narrower. */
  add(kv: KVCache, n: number): void {
    const tiled = tf.tidy(() => {
      const tile = (t: tf.Tensor4D) => (n === 1 ? t.clone() : t.tile([n, 1, 1, 1]));
      return { k: kv.k.map(tile) as tf.Tensor4D[], v: kv.v.map(tile) as tf.Tensor4D[] };
    });
    const rows: KVCache = { ...tiled, length: kv.length };
    this.size += n;
    if (!this.cache) {
      this.cache = rows;
      return;
    }
    const W = this.cache.length,
      L = rows.length,
      width = Math.max(W, L);
    const padLeft = (t: tf.Tensor4D, by: number) =>
      by === 0
        ? t.clone()
        : tf.pad(t, [
            [0, 0],
            [0, 0],
            [by, 0],
            [0, 0],
          ]);
    const merged = tf.tidy(() => ({
      k: this.cache!.k.map((t, i) => tf.concat([padLeft(t, width - W), padLeft(rows.k[i], width - L)], 0)),
      v: this.cache!.v.map((t, i) => tf.concat([padLeft(t, width - W), padLeft(rows.v[i], width - L)], 0)),
    }));
    disposeCache(this.cache);
    disposeCache(rows);
    this.cache = { k: merged.k as tf.Tensor4D[], v: merged.v as tf.Tensor4D[], length: width };
  }

  keep(rows: number[], need: number): void {
    if (rows.length === 0) {
      this.dispose();
      return;
    }
    const W = this.cache!.length;
    const idx = tf.tensor1d(rows, "int32");
    const all = rows.length === this.size && rows.every((r, i) => r === i);
    const pick = (t: tf.Tensor4D) =>
      tf.tidy(() => {
        const g = all ? t.clone() : tf.gather(t, idx);
        return need < W ? g.slice([0, 0, W - need, 0], [-1, -1, need, -1]) : g;
      }) as tf.Tensor4D;
    const next = { k: this.cache!.k.map(pick), v: this.cache!.v.map(pick), length: need };
    idx.dispose();
    disposeCache(this.cache);
    this.cache = next;
    this.size = rows.length;
  }

  row(r: number, len: number): KVCache {
    const W = this.cache!.length;
    const take = (t: tf.Tensor4D) => t.slice([r, 0, W - len, 0], [1, -1, len, -1]);
    return { k: this.cache!.k.map(take), v: this.cache!.v.map(take), length: len };
  }

  step(tokens: number[], lengths: number[]): Float32Array {
    const R = this.size,
      W = this.cache!.length;
    const mask = new Float32Array(R * (W + 1));
    lengths.forEach((len, r) => mask.fill(-1e9, r * (W + 1), r * (W + 1) + W - len));
    const res = tf.tidy(() => {
      const keyMask = tf.tensor2d(mask, [R, W + 1]);
      const out = this.model.forward(tf.tensor2d(tokens, [R, 1], "int32"), this.cache, { positions: lengths, keyMask });
      return {
        logits: this.model.inferenceLogits(out.hidden.reshape([R, -1]) as tf.Tensor2D),
        k: out.cache.k,
        v: out.cache.v,
      };
    });
    disposeCache(this.cache);
    this.cache = { k: res.k as tf.Tensor4D[], v: res.v as tf.Tensor4D[], length: W + 1 };
    const logits = res.logits.dataSync() as Float32Array;
    res.logits.dispose();
    return logits;
  }

  tensorCount(): number {
    return this.cache ? this.cache.k.length * 2 : 0;
  }

  dispose(): void {
    disposeCache(this.cache);
    this.cache = undefined;
    this.size = 0;
  }
}
