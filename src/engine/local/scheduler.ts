/**
 * Continuous batching for sampling. Concurrent `submit` calls share decode
 * steps: a request's prompt is prefilled (reusing the prefix cache), its n
 * sequences join the running batch, and each leaves as soon as it stops.
 * A request whose signal aborts leaves at once: out of the queue, or its rows
 * dropped from the batch before the next decode step.
 *
 * The tensors (the running batch's keys and values, prefill, decode steps) belong to the
 * backend's DecodeCompute (./decode-compute.ts); the scheduler decides which rows run. A row's
 * results do not depend on the other rows of the batch, and every sequence draws from its own
 * random stream (seed, index), so what a sequence samples does not depend on what else is in
 * the batch (the tests check it).
 */
import { IncrementalDecoder, type Tokenizer } from "../../model/tokenizer.js";
import {
  NonFiniteLogitsError,
  drawToken,
  topAlternatives,
  untruncated,
  type DrawParams,
  type TokenDraw,
} from "../sampling.js";
import { Rng } from "../../util/rng.js";
import type { SampledSequence, SampleResult, SamplingParams, TokenEvent } from "../types.js";
import { PrefixCache } from "./prefix-cache.js";
import type { DecodeBatch, DecodeCompute } from "./decode-compute.js";
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
  /**
   * Bytes the running rows' keys and values may take, each row counted at its longest (prompt +
   * token budget): a request waits while admitting it would pass this, unless nothing runs.
   * Default: no limit.
   */
  kvBudgetBytes?: number;
  /**
   * Longest sequence (prompt + sampled tokens) served, below the model's max_position_embeddings:
   * a row stops with "length" there. Default: the model's.
   */
  maxContextTokens?: number;
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

export class Scheduler<KV = unknown> {
  private queue: Request[] = [];
  private rows: Row[] = [];
  private batch: DecodeBatch<KV>;
  private running = false;
  readonly prefix: PrefixCache<KV>;
  private readonly maxBatch: number;
  private readonly kvBudget: number;
  private readonly maxContext: number;
  private counters: SchedulerStats = { decodeSteps: 0, decodedRows: 0, prefillTokens: 0 };
  /** A request was cancelled: drop its rows before the next decode step rather than decoding them. */
  private compactNow = false;

  constructor(
    private compute: DecodeCompute<KV>,
    private tokenizer: Tokenizer,
    opts: SchedulerOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 64;
    this.kvBudget = opts.kvBudgetBytes ?? Infinity;
    this.maxContext = opts.maxContextTokens ?? Infinity;
    this.prefix = new PrefixCache(opts.prefixCacheBytes ?? 256 * 2 ** 20, compute.kvBytesPerToken, compute);
    this.batch = compute.newBatch();
  }

  /** Swaps the weights (after load); the prefix cache belongs to the old weights and is dropped. */
  setCompute(compute: DecodeCompute<KV>): void {
    if (this.running) throw new Error("internal: model swapped while sampling");
    this.prefix.clear();
    this.batch.dispose();
    this.compute = compute;
    this.batch = compute.newBatch();
  }

  submit(prompt: number[], params: SamplingParams = {}, stream: StreamRange = { first: 0 }): Promise<SampleResult> {
    const n = params.n ?? 1,
      maxTokens = params.maxTokens ?? 256;
    const draw: DrawParams = { temperature: params.temperature ?? 1, topK: params.topK ?? 0, topP: params.topP ?? 1 };
    const topLogprobs = params.topLogprobs ?? 0;
    checkSamplingParams(prompt, n, maxTokens, draw, this.compute.vocabSize, topLogprobs);
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
        budget: Math.min(maxTokens, Math.min(this.compute.maxPositions, this.maxContext) - prompt.length),
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
    return this.batch.tensorCount();
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      for (;;) {
        this.admit();
        this.drawAndRetire();
        if (this.rows.length > 0) this.decode();
        // Done: stop before yielding, so a caller that awaited the last result finds the loop
        // stopped (and may swap the weights at once).
        if (this.queue.length === 0 && this.rows.length === 0) break;
        // Let new submissions in between steps.
        await new Promise((r) => setImmediate(r));
      }
    } catch (e) {
      for (const req of new Set([...this.queue, ...this.rows.map((r) => r.req)])) req.reject(e);
      this.queue = [];
      this.rows = [];
      this.batch.dispose();
    } finally {
      this.running = false;
    }
  }

  /** Prefills waiting requests and adds their sequences to the batch. */
  private admit(): void {
    const live = () => this.rows.filter((r) => !r.dead);
    // A request's rows at their longest: the keys and values they may come to hold.
    const reserve = (req: Request, n: number) =>
      n * (req.prompt.length + Math.max(0, req.budget)) * this.compute.kvBytesPerToken;
    const fits = (req: Request) => {
      const rows = live();
      if (rows.length === 0) return true;
      if (rows.length + req.n > Math.max(this.maxBatch, req.n)) return false;
      return rows.reduce((s, r) => s + reserve(r.req, 1), 0) + reserve(req, req.n) <= this.kvBudget;
    };
    while (this.queue.length > 0 && fits(this.queue[0])) {
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
      this.batch.add(kv, req.n);
      this.prefix.insert(req.prompt, kv);
      this.rows.push(...rows);
    }
  }

  /** Logits after the prompt (V) and the prompt's keys/values, reusing the longest cached prefix. */
  private prefill(prompt: number[]): { logits: Float32Array; kv: KV } {
    const past = this.prefix.enabled ? this.prefix.lookup(prompt, prompt.length - 1) : undefined;
    const start = past ? this.compute.length(past) : 0;
    const suffix = prompt.slice(start);
    this.counters.prefillTokens += suffix.length;
    try {
      return this.compute.prefill(suffix, past);
    } finally {
      if (past) this.compute.dispose(past);
    }
  }

  /**
   * Draws the next token of every row; rows that stop leave the batch (their context goes to the
   * prefix cache). A row whose logits are not finite fails its request (naming the sequence);
   * the other requests go on.
   */
  private drawAndRetire(): void {
    const drawn = this.drawInCompute();
    this.rows.forEach((row, r) => {
      if (row.dead) return;
      let next = drawn.get(row);
      if (!next) {
        try {
          next = drawToken(row.logits, row.req.draw, row.rng, sequenceName(row));
        } catch (e) {
          if (!(e instanceof NonFiniteLogitsError)) throw e;
          this.cancel(row.req, e);
          return;
        }
      }
      const { token, logprob } = next;
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

  /**
   * The untruncated draws of the live rows, by the backend where it has its own (each row's
   * generator gives the uniform, as drawToken would take it); the others draw in drawToken.
   */
  private drawInCompute(): Map<Row, TokenDraw> {
    const out = new Map<Row, TokenDraw>();
    if (!this.compute.drawUntruncated) return out;
    let rows = this.rows.filter((row) => !row.dead && untruncated(row.req.draw, row.logits.length));
    let u = rows.map((row) => row.rng.next());
    // A row the backend cannot draw from (its error names it by `row`) fails its request; the
    // others draw again with the uniforms they already took.
    while (rows.length > 0) {
      try {
        const draws = this.compute.drawUntruncated(
          rows.map((row) => row.logits),
          rows.map((row) => row.req.draw.temperature),
          u,
        );
        rows.forEach((row, i) => out.set(row, draws[i]));
        return out;
      } catch (e) {
        const { row: i, reason } = e as { row?: unknown; reason?: unknown };
        if (typeof i !== "number" || !rows[i] || typeof reason !== "string") throw e;
        this.cancel(rows[i].req, new NonFiniteLogitsError(sequenceName(rows[i]), reason));
        const keep = rows.map((row) => !row.dead);
        u = u.filter((_, j) => keep[j]);
        rows = rows.filter((_, j) => keep[j]);
      }
    }
    return out;
  }

  /** Drops finished rows from the batch and trims key columns no live row needs. */
  private compact(): void {
    this.compactNow = false;
    const keep = this.rows.flatMap((r, i) => (r.dead ? [] : [i]));
    const rows = keep.map((r) => this.rows[r]);
    this.batch.keep(keep, rows.length ? Math.max(...rows.map((r) => r.context.length)) : 0);
    this.rows = rows;
  }

  private retire(row: Row, r: number): void {
    if (this.prefix.enabled) this.prefix.insert(row.context, this.batch.row(r, row.context.length));
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
    const R = this.rows.length;
    const tokens = this.rows.map((r) => r.out.tokens[r.out.tokens.length - 1]);
    const logits = this.batch.step(
      tokens,
      this.rows.map((r) => r.context.length),
    );
    const V = this.compute.vocabSize;
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

/** A row's sequence, for errors: its index among the request's n. */
const sequenceName = (row: Row) => `sample: sequence ${row.index}`;

function emptySequence(req: Request): SampledSequence {
  const seq: SampledSequence = { tokens: [], logprobs: [], stopReason: "length" };
  if (req.topLogprobs > 0) seq.topLogprobs = [];
  return seq;
}
