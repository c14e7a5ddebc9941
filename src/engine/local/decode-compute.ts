/**
 * What the sampling scheduler (./scheduler.ts) and the prefix cache (./prefix-cache.ts) need
 * from a compute backend: a prompt's prefill, the running batch's decode steps, and the keys and
 * values of contexts as opaque values `KV` (TF.js tensors in ./tfjs/tf-decode.ts; native buffers in
 * ./native/native-decode.ts). The scheduler keeps the policy (which rows run, what they sample,
 * when they stop); the backend keeps the tensors.
 */
import type { TokenDraw } from "../sampling.js";

/** Operations on one context's keys and values. */
export interface KvOps<KV> {
  /** Positions it holds. */
  length(kv: KV): number;
  /** A copy of its first `len` positions; the caller owns the copy. */
  prefix(kv: KV, len: number): KV;
  dispose(kv: KV): void;
  /** Tensors (or buffers) it holds, for leak accounting. */
  tensors(kv: KV): number;
}

export interface DecodeCompute<KV> extends KvOps<KV> {
  readonly vocabSize: number;
  readonly maxPositions: number;
  /** Bytes of keys and values per cached position. */
  readonly kvBytesPerToken: number;
  /**
   * Runs `suffix` after the context `past` (borrowed, not consumed; none: from position 0).
   * Returns the logits (V) after the last token and the keys and values of the whole context
   * (past + suffix), which the caller owns.
   */
  prefill(suffix: number[], past: KV | undefined): { logits: Float32Array; kv: KV };
  newBatch(): DecodeBatch<KV>;
  /**
   * Optional: draws a token per row over the whole vocabulary (no top-k / top-p) at temperature
   * t[i] > 0 with the uniform u[i], as sampling.ts's drawToken does; the scheduler uses it for
   * those rows when present (the native engine draws in C).
   */
  drawUntruncated?(logits: Float32Array[], t: number[], u: number[]): TokenDraw[];
}

/** The running batch: one row per sequence being sampled. */
export interface DecodeBatch<KV> {
  readonly size: number;
  /** Appends n rows, each starting from the context `kv` (borrowed). */
  add(kv: KV, n: number): void;
  /** Keeps only the rows at these indices, in this order; `need` is the longest context a kept row has. */
  keep(rows: number[], need: number): void;
  /** A copy of the first `len` positions of row r's context; the caller owns it. */
  row(r: number, len: number): KV;
  /**
   * One decode step: row r feeds tokens[r] at position lengths[r] (its context so far).
   * Returns the logits (R, V) after each row's token; every row's context grows by one.
   */
  step(tokens: number[], lengths: number[]): Float32Array;
  tensorCount(): number;
  dispose(): void;
}
