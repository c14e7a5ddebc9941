/**
 * Answer matching with HotpotQA's official semantics (hotpot_evaluate_v1.py):
 *   normalize(s) = white_space_fix(remove_articles(remove_punc(lower(s))))
 *   EM = normalize(pred) == normalize(gold)
 *   F1 over whitespace tokens of the normalized strings (bag-of-words overlap),
 *   with "yes" / "no" / "noanswer" scoring 0 unless both sides are that same word.
 * One departure: word boundaries for the articles are Unicode-aware
 * (letters/digits/_ of any script), as Python 3's `\b` on str is; JS's `\b` is ASCII-only.
 */

/** Python's string.punctuation: the 32 ASCII punctuation characters. */
const PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;

export function normalizeAnswer(s: string): string {
  const lower = s.toLowerCase();
  const noPunc = lower.replace(PUNCTUATION, "");
  const noArticles = noPunc.replace(ARTICLES, " ");
  return noArticles
    .split(/\s+/)
    .filter((w) => w.length > 0)
    .join(" ");
}

export function exactMatch(prediction: string, gold: string): 0 | 1 {
  return normalizeAnswer(prediction) === normalizeAnswer(gold) ? 1 : 0;
}

export interface F1Result {
  f1: number;
  precision: number;
  recall: number;
}

const ZERO: F1Result = { f1: 0, precision: 0, recall: 0 };
const SPECIAL = new Set(["yes", "no", "noanswer"]);

export function f1Score(prediction: string, gold: string): F1Result {
  const p = normalizeAnswer(prediction),
    g = normalizeAnswer(gold);
  if ((SPECIAL.has(p) || SPECIAL.has(g)) && p !== g) return ZERO;
  const pTokens = p.split(" ").filter(Boolean),
    gTokens = g.split(" ").filter(Boolean);
  // Counter(pred) & Counter(gold): each shared token counts min(times in pred, times in gold).
  const goldCounts = new Map<string, number>();
  for (const t of gTokens) goldCounts.set(t, (goldCounts.get(t) ?? 0) + 1);
  let same = 0;
  for (const t of pTokens) {
    const left = goldCounts.get(t) ?? 0;
    if (left > 0) {
      same++;
      goldCounts.set(t, left - 1);
    }
  }
  if (same === 0) return ZERO;
  const precision = same / pTokens.length,
    recall = same / gTokens.length;
  return { f1: (2 * precision * recall) / (precision + recall), precision, recall };
}
