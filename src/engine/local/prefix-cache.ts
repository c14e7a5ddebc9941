/**
 * Keys and values of recently seen contexts, so a prompt that extends one (the
 * previous turn's context + its action + the new observation, or a shared
 * system prompt) prefills only its new tokens. Bounded by bytes, evicted
 * least-recently-used; an entry that another entry extends is dropped.
 * Entries hold a backend's keys and values (decode-compute.ts); lookups return fresh copies.
 */
import { commonPrefix } from "../../util/common-prefix.js";
import type { KvOps } from "./decode-compute.js";

interface Entry<KV> {
  tokens: number[];
  kv: KV;
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

export class PrefixCache<KV> {
  private entries = new Map<number, Entry<KV>>(); // insertion order = recency
  private nextId = 0;
  private bytes = 0;
  private counters = { lookups: 0, hits: 0, promptTokens: 0, reusedTokens: 0, evictions: 0 };

  /** bytesPerToken: layers x 2 x kvHeads x headDim x 4. */
  constructor(
    readonly maxBytes: number,
    readonly bytesPerToken: number,
    private readonly ops: KvOps<KV>,
  ) {}

  get enabled(): boolean {
    return this.maxBytes >= this.bytesPerToken;
  }

  /** The cached keys/values of the longest cached prefix of `tokens`, at most `maxLen` long; the caller owns them. */
  lookup(tokens: number[], maxLen: number): KV | undefined {
    this.counters.lookups++;
    this.counters.promptTokens += tokens.length;
    let best: [number, Entry<KV>] | undefined;
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
    return this.ops.prefix(e.kv, bestLen);
  }

  /** Stores the keys/values of tokens[0..L); takes ownership of them. */
  insert(tokens: number[], kv: KV): void {
    const len = this.ops.length(kv);
    if (!this.enabled || len === 0 || len * this.bytesPerToken > this.maxBytes) {
      this.ops.dispose(kv);
      return;
    }
    const key = tokens.slice(0, len);
    for (const [id, e] of this.entries) {
      const l = commonPrefix(key, e.tokens, Infinity);
      if (l === key.length) {
        // Already covered by an entry that extends it.
        this.entries.delete(id);
        this.entries.set(id, e);
        this.ops.dispose(kv);
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
    this.ops.dispose(e.kv);
    if (evicted) this.counters.evictions++;
  }

  clear(): void {
    for (const id of [...this.entries.keys()]) this.remove(id, false);
  }

  /** Tensors held by the cache (for leak accounting). */
  tensorCount(): number {
    let n = 0;
    for (const e of this.entries.values()) n += this.ops.tensors(e.kv);
    return n;
  }

  stats(): PrefixCacheStats {
    return { ...this.counters, entries: this.entries.size, bytes: this.bytes };
  }
}
