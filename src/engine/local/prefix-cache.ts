/**
 * Keys and values of recently seen contexts, so a prompt that extends one (the
 * previous turn's context + its action + the new observation, or a shared
 * system prompt) prefills only its new tokens. Bounded by bytes, evicted
 * least-recently-used; an entry that another entry extends is dropped.
 * Entries hold (1, kv, L, hd) tensors per layer; lookups return fresh slices.
 */
import { tf } from "./tf-backend.js";
import { commonPrefix } from "../../util/common-prefix.js";
import { disposeCache, type KVCache } from "../../model/transformer.js";

interface Entry {
  tokens: number[];
  kv: KVCache;
}

export interface PrefixCacheStats {
  lookups: number;
  hits: number;
  /** Prompt tokens looked up, and how many of them came from the cache. */
  promptTokens: number;
  reusedTokens: number;
  entries: number;
  bytes: number;
  evictions: number;
}

export class PrefixCache {
  private entries = new Map<number, Entry>(); // insertion order = recency
  private nextId = 0;
  private bytes = 0;
  private counters = { lookups: 0, hits: 0, promptTokens: 0, reusedTokens: 0, evictions: 0 };

  /** bytesPerToken: layers x 2 x kvHeads x headDim x 4. */
  constructor(
    readonly maxBytes: number,
    readonly bytesPerToken: number,
  ) {}

  get enabled(): boolean {
    return this.maxBytes >= this.bytesPerToken;
  }

  /** The cached keys/values of the longest cached prefix of `tokens`, at most `maxLen` long; the caller owns them. */
  lookup(tokens: number[], maxLen: number): KVCache | undefined {
    this.counters.lookups++;
    this.counters.promptTokens += tokens.length;
    let best: [number, Entry] | undefined;
    let bestLen = 0;
    for (const [id, e] of this.entries) {
      const l = commonPrefix(tokens, e.tokens, maxLen);
      if (l > bestLen) [best, bestLen] = [[id, e], l];
    }
    if (!best) return undefined;
    const [id, e] = best;
    this.entries.delete(id);
    this.entries.set(id, e);
    this.counters.hits++;
    this.counters.reusedTokens += bestLen;
    const slice = (t: tf.Tensor4D) =>
      bestLen === e.kv.length ? t.clone() : t.slice([0, 0, 0, 0], [1, -1, bestLen, -1]);
    return { k: e.kv.k.map(slice), v: e.kv.v.map(slice), length: bestLen };
  }

  /** Stores keys/values (1, kv, L, hd) for tokens[0..L); takes ownership of the tensors. */
  insert(tokens: number[], kv: KVCache): void {
    if (!this.enabled || kv.length === 0 || kv.length * this.bytesPerToken > this.maxBytes) {
      disposeCache(kv);
      return;
    }
    const key = tokens.slice(0, kv.length);
    for (const [id, e] of this.entries) {
      const l = commonPrefix(key, e.tokens, Infinity);
      if (l === key.length) {
        // Already covered by an entry that extends it.
        this.entries.delete(id);
        this.entries.set(id, e);
        disposeCache(kv);
        return;
      }
      if (l === e.tokens.length) this.remove(id, false);
    }
    this.entries.set(this.nextId++, { tokens: key, kv });
    this.bytes += key.length * this.bytesPerToken;
    for (const id of this.entries.keys()) {
      if (this.bytes <= this.maxBytes) break;
      this.remove(id, true);
    }
  }

  private remove(id: number, evicted: boolean): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.entries.delete(id);
    this.bytes -= e.tokens.length * this.bytesPerToken;
    disposeCache(e.kv);
    if (evicted) this.counters.evictions++;
  }

  clear(): void {
    for (const id of [...this.entries.keys()]) this.remove(id, false);
  }

  /** Tensors held by the cache (for leak accounting). */
  tensorCount(): number {
    let n = 0;
    for (const e of this.entries.values()) n += e.kv.k.length + e.kv.v.length;
    return n;
  }

  stats(): PrefixCacheStats {
    return { ...this.counters, entries: this.entries.size, bytes: this.bytes };
  }
}
