/**
 * Sampling with a KV cache: the prompt is prefilled once, its cache is copied
 * to the n sequences, and the n sequences are decoded as one batch; a sequence
 * that stops leaves the batch (its rows are dropped from the cache).
 */
import { tf } from "./tf-backend.js";
import { disposeCache, type KVCache, type Transformer } from "../../model/transformer.js";
import { IncrementalDecoder, type Tokenizer } from "../../model/tokenizer.js";
import { drawToken, type DrawParams } from "../sampling.js";
import { Rng, randomSeed } from "../../util/rng.js";
import type { SampledSequence, SampleResult, SamplingParams } from "../types.js";
import { InputError } from "../../util/errors.js";
import { assertTokens } from "../validate.js";

export interface StopSet {
  ids: Set<number>;
  strings: string[];
}

export function resolveStops(stop: (string | number)[] | undefined, tokenizer: Tokenizer): StopSet {
  const list = stop ?? (tokenizer.eosTokenId !== undefined ? [tokenizer.eosTokenId] : []);
  const ids = new Set<number>(), strings: string[] = [];
  for (const s of list) {
    if (typeof s === "number") ids.add(s);
    else if (s.length > 0) strings.push(s);
  }
  return { ids, strings };
}

interface Running {
  index: number;
  out: SampledSequence;
  rng: Rng;
  decoder: IncrementalDecoder;
  text: string;
}

export function sampleWithCache(model: Transformer, tokenizer: Tokenizer, prompt: number[], params: SamplingParams = {}): SampleResult {
  const n = params.n ?? 1;
  const maxTokens = params.maxTokens ?? 256;
  const draw: DrawParams = { temperature: params.temperature ?? 1, topK: params.topK ?? 0, topP: params.topP ?? 1 };
  checkParams(prompt, n, maxTokens, draw, model.config.vocabSize);
  const stops = resolveStops(params.stop, tokenizer);
  const seed = params.seed ?? randomSeed();
  const budget = Math.min(maxTokens, model.config.maxPositionEmbeddings - prompt.length);
  const seqs: Running[] = Array.from({ length: n }, (_, i) => ({
    index: i,
    out: { tokens: [], logprobs: [], stopReason: "length" },
    rng: new Rng(seed, i),
    decoder: new IncrementalDecoder(tokenizer),
    text: "",
  }));
  if (budget <= 0) return { sequences: seqs.map((s) => s.out) };

  // Prefill the prompt once, then give every sequence its own copy of the cache.
  let cache: KVCache;
  let logits: Float32Array;
  {
    const pre = tf.tidy(() => {
      const { hidden, cache } = model.forward(tf.tensor2d([prompt], [1, prompt.length], "int32"));
      const last = hidden.slice([0, prompt.length - 1, 0], [1, 1, -1]).reshape([1, -1]) as tf.Tensor2D;
      const tiled = { k: cache.k.map((k) => k.tile([n, 1, 1, 1])), v: cache.v.map((v) => v.tile([n, 1, 1, 1])) };
      return { logits: model.logits(last), k: tiled.k, v: tiled.v };
    });
    logits = pre.logits.dataSync() as Float32Array;
    pre.logits.dispose();
    cache = { k: pre.k as tf.Tensor4D[], v: pre.v as tf.Tensor4D[], length: prompt.length };
  }
  const V = model.config.vocabSize;
  let active = seqs;
  let rowLogits = (row: number) => logits.subarray(0, V); // the prefill row serves every sequence
  for (let step = 0; step < budget && active.length > 0; step++) {
    const next: number[] = [];
    const keep: number[] = [];
    active.forEach((s, row) => {
      const { token, logprob } = drawToken(rowLogits(row), draw, s.rng);
      s.out.tokens.push(token);
      s.out.logprobs.push(logprob);
      if (isStop(s, token, stops)) s.out.stopReason = "stop";
      else if (step + 1 < budget) {
        keep.push(row);
        next.push(token);
      }
    });
    if (keep.length === 0) break;
    const shrunk = keep.length < active.length ? keep : undefined;
    active = keep.map((row) => active[row]);
    const res = tf.tidy(() => {
      const rows = shrunk ? tf.tensor1d(shrunk, "int32") : undefined;
      const past: KVCache = rows
        ? { k: cache.k.map((k) => tf.gather(k, rows)), v: cache.v.map((v) => tf.gather(v, rows)), length: cache.length }
        : cache;
      const out = model.forward(tf.tensor2d(next, [next.length, 1], "int32"), past);
      const lg = model.logits(out.hidden.reshape([next.length, -1]) as tf.Tensor2D);
      return { logits: lg, k: out.cache.k, v: out.cache.v };
    });
    disposeCache(cache);
    cache = { k: res.k as tf.Tensor4D[], v: res.v as tf.Tensor4D[], length: cache.length + 1 };
    logits = res.logits.dataSync() as Float32Array;
    res.logits.dispose();
    rowLogits = (row: number) => logits.subarray(row * V, (row + 1) * V);
  }
  disposeCache(cache);
  return { sequences: seqs.map((s) => s.out) };
}

function isStop(s: Running, token: number, stops: StopSet): boolean {
  if (stops.ids.has(token)) return true;
  if (stops.strings.length === 0) return false;
  s.text += s.decoder.push(token);
  // Only the tail can hold a stop string completed by this token.
  const longest = Math.max(...stops.strings.map((x) => x.length));
  const tail = s.text.slice(-(longest + 16));
  return stops.strings.some((x) => tail.includes(x));
}

function checkParams(prompt: number[], n: number, maxTokens: number, d: DrawParams, vocab: number): void {
  assertTokens(prompt, vocab, "sample: the prompt");
  if (!Number.isInteger(n) || n < 1) throw new InputError(`sample: n must be a positive integer, got ${n}`);
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new InputError(`sample: maxTokens must be a positive integer, got ${maxTokens}`);
  if (!(d.temperature >= 0)) throw new InputError(`sample: temperature must be >= 0, got ${d.temperature}`);
  if (!(d.topP > 0 && d.topP <= 1)) throw new InputError(`sample: topP must be in (0, 1], got ${d.topP}`);
  if (!(Number.isInteger(d.topK) && d.topK >= 0)) throw new InputError(`sample: topK must be a non-negative integer, got ${d.topK}`);
}
