/**
 * Continuous batching for sampling. Concurrent `submit` calls share decode
 * steps: a request's prompt is prefilled (reusing the prefix cache), its n
 * sequences join the running batch, and each leaves as soon as it stops.
 * A request whose signal aborts leaves at once: out of the queue, or its rows
 * dropped from the batch before the next decode step.
 *
 * The running batch keeps every layer's keys/values in one padded tensor
 * (R, kv, W, hd). Row r's keys are right-aligned: they occupy columns
 * [W - len_r, W), and a key mask hides the padding to their left. Each decode
 * step appends one column for all rows; columns no row needs are trimmed.
 * Padded keys get exactly zero attention weight, and every sequence draws from
 * its own random stream (seed, index), so what a sequence samples does not
 * depend on what else is in the batch (the tests check it).
 */
import { tf } from "./tf-backend.js";
import { disposeCache, type KVCache, type Transformer } from "../../model/transformer.js";
import { IncrementalDecoder, type Tokenizer } from "../../model/tokenizer.js";
import { drawToken, topAlternatives, type DrawParams } from "../sampling.js";
import { Rng } from "../../util/rng.js";
import type { SampledSequence, SampleResult, SamplingParams, TokenEvent } from "../types.js";
import { PrefixCache } from "./prefix-cache.js";
import {
  checkRequestOptions,
  checkSamplingParams,
  resolveSeed,
  resolveStops,
  type StopSet,
} from "./sampling-params.js";

export interface SchedulerOptions {
  /** Rows decoded together at most. Default 64. */
  maxBatch?: number;
  /** Prefix-cache budget in bytes; 0 disables. Default 256 MiB. */
  prefixCacheBytes?: number;
}

/** Internal: which random streams a request's sequences use (for splitting n across replicas). */
export interface StreamRange {
  first: number;
}

interface Request {
  prompt: number[];
  n: number;
  draw: DrawParams;
  stops: StopSet;
  seed: number;
  /** Alternatives reported per sampled token (0: none). */
  topLogprobs: number;
  firstStream: number;
  /** The caller's per-token callback, if any. */
  onToken?: (e: TokenEvent) => void;
  /** Thrown by onToken: the request fails with it once its sequences finish. */
  callbackError?: { error: unknown };
  /** Its signal fired: out of the queue, its rows dead, already rejected. */
  cancelled?: boolean;
  budget: number;
  done: SampledSequence[];
  pending: number;
  resolve: (r: SampleResult) => void;
  reject: (e: unknown) => void;
}

interface Row {
  req: Request;
  /** Which of the request's n sequences this is. */
  index: number;
  out: SampledSequence;
  rng: Rng;
  decoder?: IncrementalDecoder;
  text: string;
  /** Finished: still in the batch until the next compaction, its results ignored. */
  dead?: boolean;
  /** Tokens whose keys are in the cache: the prompt, then every sampled token but the newest. */
  context: number[];
  logits: Float32Array;
}

export interface SchedulerStats {
  decodeSteps: number;
  /** Sum over decode steps of the rows decoded, for the mean batch size. */
  decodedRows: number;
  prefillTokens: number;
}

export class Scheduler {
  private queue: Request[] = [];
  private rows: Row[] = [];
  private cache: KVCache | undefined; // (R, kv, W, hd) per layer
  private running = false;
  readonly prefix: PrefixCache;
  private readonly maxBatch: number;
  private counters: SchedulerStats = { decodeSteps: 0, decodedRows: 0, prefillTokens: 0 };
  /** A request was cancelled: drop its rows before the next decode step rather than decoding them. */
  private compactNow = false;

  constructor(
    private model: Transformer,
    private tokenizer: Tokenizer,
    opts: SchedulerOptions = {},
  ) {
    const c = model.config;
    this.maxBatch = opts.maxBatch ?? 64;
    this.prefix = new PrefixCache(
      opts.prefixCacheBytes ?? 256 * 2 ** 20,
      c.numLayers * 2 * c.numKvHeads * c.headDim * 4,
    );
  }

  /** Swaps the weights (after load); the prefix cache belongs to the old weights and is dropped. */
  setModel(model: Transformer): void {
    if (this.running) throw new Error("internal: model swapped while sampling");
    this.model = model;
    this.prefix.clear();
  }

  submit(prompt: number[], params: SamplingParams = {}, stream: StreamRange = { first: 0 }): Promise<SampleResult> {
    const n = params.n ?? 1,
      maxTokens = params.maxTokens ?? 256;
    const draw: DrawParams = { temperature: params.temperature ?? 1, topK: params.topK ?? 0, topP: params.topP ?? 1 };
    const topLogprobs = params.topLogprobs ?? 0;
    checkSamplingParams(prompt, n, maxTokens, draw, this.model.config.vocabSize, topLogprobs);
    checkRequestOptions(params);
    const signal = params.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => this.cancel(req, signal!.reason);
      const settled = () => signal?.removeEventListener("abort", onAbort);
      const req: Request = {
        prompt,
        n,
        draw,
        resolve: (r) => (settled(), resolve(r)),
        reject: (e) => (settled(), reject(e)),
        stops: resolveStops(params.stop, this.tokenizer),
        seed: resolveSeed(params.seed),
        topLogprobs,
        firstStream: stream.first,
        onToken: params.onToken,
        budget: Math.min(maxTokens, this.model.config.maxPositionEmbeddings - prompt.length),
        done: new Array(n),
        pending: n,
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(req);
      if (!this.running) void this.loop();
    });
  }

  /** Takes a request out at once: out of the queue, or its rows marked dead (dropped before the next decode). */
  private cancel(req: Request, reason: unknown): void {
    if (req.cancelled) return;
    req.cancelled = true;
    this.queue = this.queue.filter((q) => q !== req);
    for (const row of this.rows) {
      if (row.req === req && !row.dead) {
        row.dead = true;
        this.compactNow = true;
      }
    }
    req.reject(reason);
  }

  stats(): SchedulerStats {
    return { ...this.counters };
  }

  /** Tensors held outside the prefix cache (the running batch). */
  tensorCount(): number {
    return this.cache ? this.cache.k.length * 2 : 0;
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0 || this.rows.length > 0) {
        this.admit();
        this.drawAndRetire();
        if (this.rows.length > 0) this.decode();
        // Let new submissions in between steps.
        await new Promise((r) => setImmediate(r));
      }
    } catch (e) {
      for (const req of new Set([...this.queue, ...this.rows.map((r) => r.req)])) req.reject(e);
      this.queue = [];
      this.rows = [];
      disposeCache(this.cache);
      this.cache = undefined;
    } finally {
      this.running = false;
    }
  }

  /** Prefills waiting requests and adds their sequences to the batch. */
  private admit(): void {
    const live = () => this.rows.filter((r) => !r.dead).length;
    while (this.queue.length > 0 && live() + this.queue[0].n <= Math.max(this.maxBatch, this.queue[0].n)) {
      const req = this.queue.shift()!;
      if (req.budget <= 0) {
        for (let i = 0; i < req.n; i++) this.finish(req, i, emptySequence(req));
        continue;
      }
      if (this.rows.some((r) => r.dead)) this.compact();
      const { logits, kv } = this.prefill(req.prompt);
      const rows: Row[] = Array.from({ length: req.n }, (_, i) => ({
        req,
        index: i,
        out: emptySequence(req),
        rng: new Rng(req.seed, req.firstStream + i),
        decoder: req.stops.strings.length ? new IncrementalDecoder(this.tokenizer) : undefined,
        text: "",
        context: req.prompt.slice(),
        logits,
      }));
      const joined = tf.tidy(() => {
        const tile = (t: tf.Tensor4D) => (req.n === 1 ? t.clone() : t.tile([req.n, 1, 1, 1]));
        return { k: kv.k.map(tile), v: kv.v.map(tile) };
      });
      this.prefix.insert(req.prompt, kv);
      this.join(rows, { k: joined.k as tf.Tensor4D[], v: joined.v as tf.Tensor4D[], length: req.prompt.length });
    }
  }

  /** Logits after the prompt (V) and the prompt's keys/values (1, kv, P, hd), reusing the longest cached prefix. */
  private prefill(prompt: number[]): { logits: Float32Array; kv: KVCache } {
    const past = this.prefix.enabled ? this.prefix.lookup(prompt, prompt.length - 1) : undefined;
    const start = past?.length ?? 0;
    const suffix = prompt.slice(start);
    this.counters.prefillTokens += suffix.length;
    const res = tf.tidy(() => {
      const { hidden, cache } = this.model.forward(tf.tensor2d([suffix], [1, suffix.length], "int32"), past);
      const last = hidden.slice([0, suffix.length - 1, 0], [1, 1, -1]).reshape([1, -1]) as tf.Tensor2D;
      return { logits: this.model.inferenceLogits(last), k: cache.k, v: cache.v };
    });
    disposeCache(past);
    const logits = res.logits.dataSync() as Float32Array;
    res.logits.dispose();
    return { logits, kv: { k: res.k as tf.Tensor4D[], v: res.v as tf.Tensor4D[], length: prompt.length } };
  }

  /** Adds rows whose caches (n, kv, L, hd) are right-aligned, padding whichever side is narrower. */
  private join(rows: Row[], kv: KVCache): void {
    if (!this.cache) {
      this.cache = kv;
      this.rows.push(...rows);
      return;
    }
    const W = this.cache.length,
      L = kv.length,
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
      k: this.cache!.k.map((t, i) => tf.concat([padLeft(t, width - W), padLeft(kv.k[i], width - L)], 0)),
      v: this.cache!.v.map((t, i) => tf.concat([padLeft(t, width - W), padLeft(kv.v[i], width - L)], 0)),
    }));
    disposeCache(this.cache);
    disposeCache(kv);
    this.cache = { k: merged.k as tf.Tensor4D[], v: merged.v as tf.Tensor4D[], length: width };
    this.rows.push(...rows);
  }

  /** Draws the next token of every row; rows that stop leave the batch (their context goes to the prefix cache). */
  private drawAndRetire(): void {
    this.rows.forEach((row, r) => {
      if (row.dead) return;
      const { token, logprob } = drawToken(row.logits, row.req.draw, row.rng);
      row.out.tokens.push(token);
      row.out.logprobs.push(logprob);
      if (row.req.topLogprobs > 0)
        row.out.topLogprobs!.push(topAlternatives(row.logits, row.req.draw, row.req.topLogprobs));
      if (row.req.onToken) this.notify(row.req, { index: row.index, token, logprob });
      if (row.dead) return; // onToken aborted the request
      const stopped = this.isStop(row, token);
      if (stopped) row.out.stopReason = "stop";
      if (stopped || row.out.tokens.length >= row.req.budget) this.retire(row, r);
    });
    // Finished rows stay in the batch (decoded and ignored) until a quarter of it is done:
    // dropping them copies every layer's cache, which cost more than the wasted rows.
    const dead = this.rows.filter((r) => r.dead).length;
    if (dead > 0 && (dead * 4 >= this.rows.length || this.compactNow)) this.compact();
  }

  /** Drops finished rows from the batch and trims key columns no live row needs. */
  private compact(): void {
    this.compactNow = false;
    const keep = this.rows.flatMap((r, i) => (r.dead ? [] : [i]));
    const rows = keep.map((r) => this.rows[r]);
    if (rows.length === 0) {
      disposeCache(this.cache);
      this.cache = undefined;
    } else {
      const W = this.cache!.length;
      const need = Math.max(...rows.map((r) => r.context.length));
      const idx = tf.tensor1d(keep, "int32");
      const pick = (t: tf.Tensor4D) =>
        tf.tidy(() => {
          const g = keep.length === this.rows.length ? t.clone() : tf.gather(t, idx);
          return need < W ? g.slice([0, 0, W - need, 0], [-1, -1, need, -1]) : g;
        }) as tf.Tensor4D;
      const next = { k: this.cache!.k.map(pick), v: this.cache!.v.map(pick), length: need };
      idx.dispose();
      disposeCache(this.cache);
      this.cache = next;
    }
    this.rows = rows;
  }

  private retire(row: Row, r: number): void {
    if (this.prefix.enabled) {
      const W = this.cache!.length,
        L = row.context.length;
      const take = (t: tf.Tensor4D) => t.slice([r, 0, W - L, 0], [1, -1, L, -1]);
      this.prefix.insert(row.context, { k: this.cache!.k.map(take), v: this.cache!.v.map(take), length: L });
    }
    row.dead = true;
    this.finish(row.req, row.index, row.out);
  }

  /** Calls the request's onToken; an exception fails only that request (the batch goes on). */
  private notify(req: Request, e: TokenEvent): void {
    if (req.callbackError) return;
    try {
      req.onToken!(e);
    } catch (error) {
      req.callbackError = { error };
    }
  }

  private finish(req: Request, i: number, seq: SampledSequence): void {
    req.done[i] = seq;
    req.pending -= 1;
    if (req.pending > 0) return;
    if (req.callbackError) req.reject(req.callbackError.error);
    else req.resolve({ sequences: req.done });
  }

  /** One decode step: every row feeds its newest token at its own position. */
  private decode(): void {
    const R = this.rows.length,
      W = this.cache!.length;
    const tokens = this.rows.map((r) => r.out.tokens[r.out.tokens.length - 1]);
    const positions = this.rows.map((r) => r.context.length);
    const mask = new Float32Array(R * (W + 1));
    this.rows.forEach((row, r) => mask.fill(-1e9, r * (W + 1), r * (W + 1) + W - row.context.length));
    const res = tf.tidy(() => {
      const keyMask = tf.tensor2d(mask, [R, W + 1]);
      const out = this.model.forward(tf.tensor2d(tokens, [R, 1], "int32"), this.cache, { positions, keyMask });
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
    const V = this.model.config.vocabSize;
    this.rows.forEach((row, r) => {
      if (row.dead) return;
      row.context.push(tokens[r]);
      row.logits = logits.subarray(r * V, (r + 1) * V);
    });
    this.counters.decodeSteps++;
    this.counters.decodedRows += R;
  }

  private isStop(row: Row, token: number): boolean {
    const stops = row.req.stops;
    if (stops.ids.has(token)) return true;
    if (!row.decoder) return false;
    row.text += row.decoder.push(token);
    const longest = Math.max(...stops.strings.map((x) => x.length));
    const tail = row.text.slice(-(longest + 16));
    return stops.strings.some((x) => tail.includes(x));
  }
}

function emptySequence(req: Request): SampledSequence {
  const seq: SampledSequence = { tokens: [], logprobs: [], stopReason: "length" };
  if (req.topLogprobs > 0) seq.topLogprobs = [];
  return seq;
}
