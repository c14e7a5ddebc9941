/**
 * A copying curriculum run before supervised training on demonstrations.
 * A task agent copies names: from the question into its search query, from
 * a tool response into its next query and its answer, and numbers (years,
 * populations, lengths) from tool responses into its comparisons and sums. A freshly initialized
 * model learns that late and slowly from demonstrations (where a few tokens
 * per turn are copies); sequences made of a random list of the task's words
 * followed by the same list teach it directly (every token of the second half
 * is a copy), and the circuits that do it ("induction heads") carry over.
 *
 *   sequence  = w1 w2 ... wk "\n" w1 w2 ... wk        (k random words and numbers of the task's text)
 *   weights   = 1 on the targets of the second half, 0 on the first half
 */
import type { Datum } from "../engine/types.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { Rng } from "../util/rng.js";

/**
 * Distinct words (letter runs) and numbers (digit runs) of a text corpus, in first-seen order.
 * Numbers matter: a base trained to copy letters only copied names but rewrote the numbers it
 * read (dev/LOG.md, 2026-11-24), so comparison and arithmetic questions failed.
 */
export function corpusWords(texts: Iterable<string>, limit = 20_000): string[] {
  const seen = new Set<string>();
  for (const t of texts) {
    for (const m of t.matchAll(/\p{L}+|\p{N}+/gu)) {
      seen.add(m[0]);
      if (seen.size >= limit) return [...seen];
    }
  }
  return [...seen];
}

export interface CopyDatumOptions {
  count: number;
  /** Words per half: drawn uniformly from [minWords, maxWords]. */
  minWords: number;
  maxWords: number;
  seed: number;
  /**
   * Share of words replaced by a made-up one (`blendWord`): the head of one corpus word joined to
   * the tail of another. Default 0. Held-out names are new combinations of familiar syllables;
   * copying only corpus words, a model learned which syllable follows which and wrote
   * `Zanrus` for `Zanzan` (dev/LOG.md, 2026-11-24), so made-up words force a real copy.
   */
  blend?: number;
}

/**
 * A made-up word: a head of `a` (at least one character) joined to a tail of `b` (at least one),
 * cut at random places; digit runs stay digits and get random digits instead.
 */
export function blendWord(a: string, b: string, rng: Rng): string {
  if (/^\p{N}+$/u.test(a))
    return Array.from({ length: a.length }, (_, i) =>
      String(i === 0 && a.length > 1 ? 1 + rng.int(9) : rng.int(10)),
    ).join("");
  const head = a.slice(0, 1 + rng.int(Math.max(1, a.length - 1)));
  const letters = b.replace(/\p{N}/gu, "") || a;
  const tail = letters.slice(1 + rng.int(Math.max(1, letters.length - 1)));
  return head + (tail || letters.slice(-1)).toLowerCase();
}

/** `count` copy datums over `words` (cross-entropy on the second half only). */
export function copyDatums(tokenizer: Tokenizer, words: readonly string[], o: CopyDatumOptions): Datum[] {
  if (words.length === 0) throw new RangeError("copyDatums: no words to copy");
  const rng = new Rng(o.seed, 31);
  const newline = tokenizer.encode("\n");
  const out: Datum[] = [];
  const blend = o.blend ?? 0;
  const pick = () => words[rng.int(words.length)];
  // blend 0 draws no extra random numbers: the same datums as before blending existed.
  const word = () => (blend > 0 && rng.next() < blend ? blendWord(pick(), pick(), rng) : pick());
  for (let i = 0; i < o.count; i++) {
    const k = o.minWords + rng.int(o.maxWords - o.minWords + 1);
    const text = Array.from({ length: k }, word).join(" ");
    const half = tokenizer.encode(text);
    const full = [...half, ...newline, ...half];
    const firstCopied = half.length + newline.length; // index in `full` of the first copied token
    out.push({
      tokens: full.slice(0, -1),
      targetTokens: full.slice(1),
      // target t is full[t + 1]
      weights: full.slice(1).map((_, t) => (t + 1 >= firstCopied ? 1 : 0)),
    });
  }
  return out;
}
