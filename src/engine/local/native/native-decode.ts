/**
 * The native engine's sampling compute (../decode-compute.ts). Every sequence keeps its
 * own cache, a Float32Array (L, 2, cap, kv·hd) holding its context's keys and values in rows
 * 0 .. len-1: a decode step appends one row per sequence, with no padding between sequences of
 * different lengths, and a sequence's results never depend on the others in the batch. A full
 * cache is replaced by one twice as large (capped at the model's positions).
 */
import type { DecodeBatch, DecodeCompute } from "../decode-compute.js";
import type { NativeDecoder } from "./decoder.js";
import { requireAddon } from "../addon.js";
import type { TokenDraw } from "../../sampling.js";

/** One context's keys and values. */
export interface NativeKv {
  buf: Float32Array; // (L, 2, cap, kv·hd)
  cap: number;
  len: number;
}

export class NativeDecodeCompute implements DecodeCompute<NativeKv> {
  private readonly rowFloats: number; // kv·hd
  private readonly planes: number; // L·2

  constructor(readonly model: NativeDecoder) {
    const c = model.config;
    this.rowFloats = c.numKvHeads * c.headDim;
    this.planes = c.numLayers * 2;
  }

  get vocabSize(): number {
    return this.model.config.vocabSize;
  }

  get maxPositions(): number {
    return this.model.config.maxPositionEmbeddings;
  }

  get kvBytesPerToken(): number {
    return this.planes * this.rowFloats * 4;
  }

  length(kv: NativeKv): number {
    return kv.len;
  }

  /** A cache of `cap` rows holding the first `len` rows of `src` (none: empty). */
  resized(src: NativeKv | undefined, len: number, cap: number): NativeKv {
    const f = this.rowFloats;
    const buf = new Float32Array(this.planes * cap * f);
    if (src)
      for (let p = 0; p < this.planes; p++)
        buf.set(src.buf.subarray(p * src.cap * f, (p * src.cap + len) * f), p * cap * f);
    return { buf, cap, len: src ? len : 0 };
  }

  prefix(kv: NativeKv, len: number): NativeKv {
    return this.resized(kv, len, len);
  }

  dispose(kv: NativeKv): void {
    kv.buf = new Float32Array(0); // released to the collector; nothing native to free
    kv.cap = kv.len = 0;
  }

  tensors(): number {
    return 1;
  }

  /** Room for `need` rows: the same cache, or a copy twice as large (at most the model's positions). */
  grown(kv: NativeKv, need: number): NativeKv {
    if (need <= kv.cap) return kv;
    const cap = Math.min(Math.max(need, 2 * kv.cap, 16), Math.max(need, this.maxPositions));
    return this.resized(kv, kv.len, cap);
  }

  prefill(suffix: number[], past: NativeKv | undefined): { logits: Float32Array; kv: NativeKv } {
    const len = (past?.len ?? 0) + suffix.length;
    const kv = this.resized(past, past?.len ?? 0, len);
    const pass = this.model.extend([suffix], Int32Array.of(kv.len), [kv.buf], Int32Array.of(kv.cap));
    try {
      kv.len = len;
      return { logits: pass.logits(Int32Array.of(suffix.length - 1), this.vocabSize), kv };
    } finally {
      pass.free();
    }
  }

  newBatch(): DecodeBatch<NativeKv> {
    return new NativeDecodeBatch(this);
  }

  /** In C (native/kernels/draw_rows.c), the rows split across the fused kernels' threads. */
  drawUntruncated(logits: Float32Array[], t: number[], u: number[]): TokenDraw[] {
    const tokens = new Int32Array(logits.length),
      logprobs = new Float64Array(logits.length);
    requireAddon().drawTokens(logits, Float64Array.from(t), Float64Array.from(u), tokens, logprobs);
    return Array.from(tokens, (token, i) => ({ token, logprob: logprobs[i] }));
  }
}

class NativeDecodeBatch implements DecodeBatch<NativeKv> {
  private rows: NativeKv[] = [];

  constructor(private readonly compute: NativeDecodeCompute) {}

  get size(): number {
    return this.rows.length;
  }

  add(kv: NativeKv, n: number): void {
    // Room for a few dozen tokens up front; a longer sequence doubles its cache as it grows.
    const cap = Math.min(kv.len + 64, Math.max(kv.len + 1, this.compute.maxPositions));
    for (let i = 0; i < n; i++) this.rows.push(this.compute.resized(kv, kv.len, cap));
  }

  keep(rows: number[]): void {
    this.rows = rows.map((r) => this.rows[r]);
  }

  row(r: number, len: number): NativeKv {
    return this.compute.prefix(this.rows[r], len);
  }

  step(tokens: number[], lengths: number[]): Float32Array {
    const R = this.rows.length;
    this.rows = this.rows.map((kv, r) => {
      kv.len = lengths[r];
      return this.compute.grown(kv, lengths[r] + 1);
    });
    const pass = this.compute.model.extend(
      tokens.map((t) => [t]),
      Int32Array.from(this.rows, (kv) => kv.len),
      this.rows.map((kv) => kv.buf),
      Int32Array.from(this.rows, (kv) => kv.cap),
    );
    try {
      for (const kv of this.rows) kv.len += 1;
      return pass.logits(
        Int32Array.from({ length: R }, (_, i) => i),
        this.compute.vocabSize,
      );
    } finally {
      pass.free();
    }
  }

  tensorCount(): number {
    return this.rows.length;
  }

  dispose(): void {
    this.rows = [];
  }
}
