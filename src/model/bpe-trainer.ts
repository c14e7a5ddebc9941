/** Byte-level BPE trainer producing a Hugging Face tokenizer.json object. */
import * as hfTokenizers from "@huggingface/tokenizers";
import { BYTE_ALPHABET } from "./tokenizer.js";

// The package's .d.ts files use extensionless paths, so under NodeNext its re-exports are invisible to tsc.
type PreTokenizerCtor = new (config: object) => { pre_tokenize_text(text: string): string[] };
const { SequencePreTokenizer } = hfTokenizers as unknown as { SequencePreTokenizer: PreTokenizerCtor };

/** Qwen/GPT-style split: contractions, letters (one leading non-letter allowed), single digits, punctuation, newlines, spaces. */
export const PRETOKENIZE_REGEX = String.raw`'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

export interface BpeTrainOptions {
  /** Total ids: 256 bytes + merges + special + added tokens. */
  vocabSize: number;
  specialTokens: string[];
  /** Non-special added tokens, e.g. `<tool_call>`. */
  addedTokens?: string[];
  /** Stop when the best pair is rarer than this; default 2. */
  minFrequency?: number;
  /** The pre-tokenizer's split regex (merges never cross its pieces); default PRETOKENIZE_REGEX. */
  splitPattern?: string;
}

const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };

/**
 * Words, single digits, punctuation runs and whitespace runs, each its own piece: no piece starts
 * with a space or a quote, so a word gets the same tokens wherever it stands (after a space, a
 * quote or a line start). Costs a token per space; buys copying that a tiny model can learn.
 */
export const WORD_SPLIT_REGEX = String.raw`\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+`;

function preTokenizerConfig(pattern = PRETOKENIZE_REGEX) {
  return {
    type: "Sequence",
    pretokenizers: [{ type: "Split", pattern: { Regex: pattern }, behavior: "Isolated", invert: false }, byteLevel],
  };
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Max-heap of [count, pairKey]; ties broken by the pair's token strings (lexicographic). */
class PairHeap {
  private items: [number, number][] = [];
  constructor(private readonly before: (a: [number, number], b: [number, number]) => boolean) {}
  get size(): number {
    return this.items.length;
  }
  push(item: [number, number]): void {
    const h = this.items;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }
  pop(): [number, number] | undefined {
    const h = this.items;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < h.length && this.before(h[l], h[best])) best = l;
        if (r < h.length && this.before(h[r], h[best])) best = r;
        if (best === i) break;
        [h[i], h[best]] = [h[best], h[i]];
        i = best;
      }
    }
    return top;
  }
}

const SHIFT = 2 ** 21; // pair key = left * SHIFT + right; ids stay far below 2^21

/** Trains byte-level BPE and returns a complete tokenizer.json object. Deterministic for the same input. */
export function trainByteLevelBpe(corpus: Iterable<string>, opts: BpeTrainOptions): object {
  const special = [...new Set(opts.specialTokens)];
  const added = [...new Set(opts.addedTokens ?? [])].filter((t) => !special.includes(t));
  const extras = special.length + added.length;
  if (opts.vocabSize < 256 + extras) {
    throw new RangeError(`vocabSize ${opts.vocabSize} is smaller than 256 bytes + ${extras} added tokens`);
  }
  const pattern = opts.splitPattern ?? PRETOKENIZE_REGEX;
  const wordCounts = countWords(corpus, [...special, ...added], pattern);
  const { symbols, merges } = learnMerges(wordCounts, opts.vocabSize - extras, opts.minFrequency ?? 2);
  return tokenizerJson(symbols, merges, special, added, pattern);
}

/** 1. Words (byte-level strings) with counts; added tokens are cut out of the text first. */
function countWords(corpus: Iterable<string>, addedAll: string[], pattern: string): Map<string, number> {
  const preTok = new SequencePreTokenizer(preTokenizerConfig(pattern));
  const all = [...addedAll].sort((a, b) => b.length - a.length);
  const cut = all.length > 0 ? new RegExp(all.map(escapeRegex).join("|"), "g") : null;
  const wordCounts = new Map<string, number>();
  for (const text of corpus) {
    for (const piece of cut ? text.split(cut) : [text]) {
      if (piece.length === 0) continue;
      for (const w of preTok.pre_tokenize_text(piece)) wordCounts.set(w, (wordCounts.get(w) ?? 0) + 1);
    }
  }
  return wordCounts;
}

/** 2-3. From the 256-byte alphabet, merge the most frequent pair until `maxSymbols` symbols exist. */
function learnMerges(
  wordCounts: Map<string, number>,
  maxSymbols: number,
  minFrequency: number,
): { symbols: string[]; merges: string[] } {
  // 2. Symbols start as the 256-byte alphabet.
  const symbols: string[] = [...BYTE_ALPHABET];
  const symbolId = new Map(symbols.map((s, i) => [s, i]));
  const words: number[][] = [];
  const counts: number[] = [];
  for (const [w, c] of wordCounts) {
    words.push(Array.from(w, (ch) => symbolId.get(ch) as number));
    counts.push(c);
  }

  const pairCount = new Map<number, number>();
  const pairWhere = new Map<number, Set<number>>();
  const touched = new Set<number>();
  const addWord = (wi: number, sign: 1 | -1): void => {
    const w = words[wi];
    for (let i = 0; i + 1 < w.length; i++) {
      const key = w[i] * SHIFT + w[i + 1];
      pairCount.set(key, (pairCount.get(key) ?? 0) + sign * counts[wi]);
      touched.add(key);
      if (sign > 0) {
        let set = pairWhere.get(key);
        if (!set) pairWhere.set(key, (set = new Set()));
        set.add(wi);
      }
    }
  };
  for (let wi = 0; wi < words.length; wi++) addWord(wi, 1);

  const before = (x: [number, number], y: [number, number]): boolean => {
    if (x[0] !== y[0]) return x[0] > y[0];
    const xl = symbols[Math.floor(x[1] / SHIFT)],
      yl = symbols[Math.floor(y[1] / SHIFT)];
    if (xl !== yl) return xl < yl;
    return symbols[x[1] % SHIFT] < symbols[y[1] % SHIFT];
  };
  const heap = new PairHeap(before);
  for (const [key, c] of pairCount) heap.push([c, key]);
  touched.clear();

  // 3. Merge the best pair until the vocabulary is full.
  const merges: string[] = [];
  const seenMerges = new Set<string>();
  while (symbols.length < maxSymbols) {
    const top = heap.pop();
    if (!top) break;
    const [c, key] = top;
    if (pairCount.get(key) !== c) continue; // stale entry
    if (c < minFrequency || c <= 0) break;
    const a = Math.floor(key / SHIFT),
      b = key % SHIFT;
    const merged = symbols[a] + symbols[b];
    let id = symbolId.get(merged);
    if (id === undefined) {
      id = symbols.length;
      symbols.push(merged);
      symbolId.set(merged, id);
    }
    const rule = `${symbols[a]} ${symbols[b]}`;
    if (!seenMerges.has(rule)) merges.push(rule);
    seenMerges.add(rule);
    const wis = [...(pairWhere.get(key) ?? [])];
    pairWhere.delete(key);
    for (const wi of wis) {
      const w = words[wi];
      let has = false;
      for (let i = 0; i + 1 < w.length && !has; i++) has = w[i] === a && w[i + 1] === b;
      if (!has) continue;
      addWord(wi, -1);
      const next: number[] = [];
      for (let i = 0; i < w.length; i++) {
        if (i + 1 < w.length && w[i] === a && w[i + 1] === b) {
          next.push(id);
          i++;
        } else next.push(w[i]);
      }
      words[wi] = next;
      addWord(wi, 1);
    }
    for (const k of touched) {
      const n = pairCount.get(k) ?? 0;
      if (n > 0) heap.push([n, k]);
      else pairCount.delete(k);
    }
    touched.clear();
  }
  return { symbols, merges };
}

/** 4. tokenizer.json; added tokens get the ids after the learned vocab. */
function tokenizerJson(
  symbols: string[],
  merges: string[],
  special: string[],
  added: string[],
  pattern: string,
): object {
  const vocab: Record<string, number> = {};
  symbols.forEach((s, i) => (vocab[s] = i));
  const addedTokens = [...special, ...added].map((content, i) => ({
    id: symbols.length + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: i < special.length,
  }));
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: preTokenizerConfig(pattern),
    post_processor: null,
    decoder: { ...byteLevel },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}
