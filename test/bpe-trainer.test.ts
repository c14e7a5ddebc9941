import { test } from "node:test";
import assert from "node:assert/strict";
import * as hfTokenizers from "@huggingface/tokenizers";
import { trainByteLevelBpe, PRETOKENIZE_REGEX } from "../src/model/bpe-trainer.js";
import { BYTE_ALPHABET, Tokenizer } from "../src/model/tokenizer.js";

interface TokJson {
  model: { type: string; vocab: Record<string, number>; merges: string[] };
  added_tokens: { id: number; content: string; special: boolean }[];
  pre_tokenizer: { type: string; pretokenizers: { type: string; pattern?: { Regex: string } }[] };
  decoder: { type: string };
}
const train = (corpus: string[], vocabSize: number, extra: Partial<Parameters<typeof trainByteLevelBpe>[1]> = {}) =>
  trainByteLevelBpe(corpus, { vocabSize, specialTokens: [], ...extra }) as TokJson;

test("first merge is the most frequent adjacent pair", () => {
  // words "aaab" and " aaab" (Ġaaab): pair (a,a) occurs 4 times, (a,b) 2, (Ġ,a) 1
  const j = train(["aaab aaab"], 259, { minFrequency: 1 });
  assert.deepEqual(j.model.merges, ["a a", "a b", "aa ab"]);
  assert.equal(j.model.vocab["aa"], 256);
  assert.equal(j.model.vocab["ab"], 257);
  assert.equal(j.model.vocab["aaab"], 258);
});

test("ties are broken lexicographically and minFrequency stops training", () => {
  // "ab" and "cd" both occur twice: "a b" sorts first
  const j = train(["cd ab", "ab cd"], 300, { minFrequency: 2 });
  assert.equal(j.model.merges[0], "a b");
  assert.equal(j.model.merges[1], "c d");
  // pairs seen once (e.g. "Ġ ab") are below minFrequency: only 2 merges remain possible
  assert.deepEqual(j.model.merges, ["a b", "c d"]);
});

test("vocab starts with the 256-byte alphabet and has the expected layout", () => {
  // runs out of pairs early: words are "hello", " world", " hello", " " -> 8 merges
  const j = train(["hello world ".repeat(20)], 300, {
    specialTokens: ["<|endoftext|>"],
    addedTokens: ["<tool_call>"],
    minFrequency: 1,
  });
  for (let b = 0; b < 256; b++) assert.equal(j.model.vocab[BYTE_ALPHABET[b]], b);
  assert.equal(BYTE_ALPHABET[32], "Ġ");
  assert.equal(BYTE_ALPHABET[10], "Ċ");
  assert.equal(j.model.type, "BPE");
  assert.equal(j.decoder.type, "ByteLevel");
  assert.deepEqual(
    j.pre_tokenizer.pretokenizers.map((p) => p.type),
    ["Split", "ByteLevel"],
  );
  assert.equal(j.pre_tokenizer.pretokenizers[0].pattern?.Regex, PRETOKENIZE_REGEX);
  assert.deepEqual(
    j.added_tokens.map((t) => [t.id, t.content, t.special]),
    [
      [266, "<|endoftext|>", true],
      [267, "<tool_call>", false],
    ],
  );
});

test("vocab size is respected exactly when the corpus is rich enough", () => {
  let seed = 1;
  const rnd = (n: number) => (seed = (seed * 48271) % 2147483647) % n;
  const word = () => Array.from({ length: 2 + rnd(6) }, () => "etaoinshrdlcum"[rnd(14)]).join("");
  const corpus = Array.from(
    { length: 400 },
    (_, i) => `${word()} ${word()}, ${word()} = ${i}; {"${word()}": ${rnd(100)}}`,
  );
  for (const size of [300, 400]) {
    const j = train(corpus, size, { specialTokens: ["<|im_end|>"] });
    const ids = [...Object.values(j.model.vocab), ...j.added_tokens.map((t) => t.id)];
    assert.equal(Math.max(...ids) + 1, size);
    assert.equal(new Set(ids).size, size);
    assert.equal(Tokenizer.fromObjects(j, {}).vocabSize, size);
  }
  assert.throws(() => train(corpus, 256, { specialTokens: ["<|im_end|>"] }), RangeError);
});

test("training is deterministic", () => {
  const corpus = Array.from({ length: 300 }, (_, i) => `row ${i}: the value of x${i % 7} is ${(i * 37) % 101}; ok?`);
  const a = JSON.stringify(train(corpus, 420));
  const b = JSON.stringify(train([...corpus], 420));
  assert.equal(a, b);
});

test("added tokens in the corpus are not learned as merges", () => {
  const j = train(Array(50).fill("<tool_call>x</tool_call>"), 300, {
    addedTokens: ["<tool_call>", "</tool_call>"],
    minFrequency: 1,
  });
  assert.ok(!Object.keys(j.model.vocab).some((t) => t.includes("tool")));
});

type PreTokenizerProto = { pre_tokenize_text(text: string): string[] };
const { SequencePreTokenizer } = hfTokenizers as unknown as { SequencePreTokenizer: { prototype: PreTokenizerProto } };

/**
 * Runs `f` counting the work of the trainer itself, machine-independently: every Map and Set
 * operation (get, set, has, add, delete, and each element iterated) made outside the Hugging Face
 * pre-tokenizer, and the words that pre-tokenizer produced. The trainer is synchronous, so
 * nothing else runs while the prototypes are wrapped.
 */
function countWork<T>(f: () => T): { result: T; ops: number; words: number } {
  let ops = 0;
  let words = 0;
  let inPreTokenizer = 0;
  const undo: (() => void)[] = [];
  const wrap = <O extends object>(o: O, key: PropertyKey, make: (orig: Function) => Function) => {
    const own = Object.getOwnPropertyDescriptor(o, key);
    const orig = (o as Record<PropertyKey, Function>)[key];
    Object.defineProperty(o, key, { value: make(orig), writable: true, configurable: true });
    undo.push(() => (own ? Object.defineProperty(o, key, own) : delete (o as Record<PropertyKey, unknown>)[key]));
  };
  const counted = (orig: Function) =>
    function (this: unknown, ...args: unknown[]) {
      if (inPreTokenizer === 0) ops++;
      return orig.apply(this, args);
    };
  const countedIterator = (orig: Function) =>
    function (this: unknown) {
      const it = orig.call(this) as Iterator<unknown>;
      return {
        next() {
          const r = it.next();
          if (!r.done && inPreTokenizer === 0) ops++;
          return r;
        },
        [Symbol.iterator]() {
          return this;
        },
      };
    };
  try {
    for (const key of ["get", "set", "has", "delete"]) wrap(Map.prototype, key, counted);
    for (const key of ["add", "has", "delete"]) wrap(Set.prototype, key, counted);
    for (const key of [Symbol.iterator, "entries", "keys", "values"]) wrap(Map.prototype, key, countedIterator);
    for (const key of [Symbol.iterator, "entries", "keys", "values"]) wrap(Set.prototype, key, countedIterator);
    wrap(
      SequencePreTokenizer.prototype,
      "pre_tokenize_text",
      (orig) =>
        function (this: unknown, text: string) {
          inPreTokenizer++;
          try {
            const out = orig.call(this, text) as string[];
            words += out.length;
            return out;
          } finally {
            inPreTokenizer--;
          }
        },
    );
    const result = f();
    return { result, ops, words };
  } finally {
    for (const u of undo.reverse()) u();
  }
}

test("50k words x ~1k merges trains quickly", () => {
  const words = ["agent", "tool", "search", "answer", "reward", "policy", "value", "token", "model", "step"];
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const corpus = Array.from({ length: 5000 }, () =>
    Array.from(
      { length: 10 },
      () =>
        words[Math.floor(rnd() * 10)] +
        (rnd() < 0.5 ? Math.floor(rnd() * 1000) : "") +
        String.fromCharCode(97 + Math.floor(rnd() * 26)).repeat(1 + Math.floor(rnd() * 3)),
    ).join(" "),
  );
  const { result: j, ops, words: n } = countWork(() => train(corpus, 1300));
  assert.ok(Object.keys(j.model.vocab).length > 1000);
  assert.ok(j.model.merges.length > 900, `${j.model.merges.length} merges`);
  assert.ok(n >= 50_000, `${n} words`);
  // "Quickly" counted in work, not time: each merge updates only the words that hold its pair and
  // takes the best pair from a heap, about 3.7 operations a word in all. Scanning every pair for
  // the best at each merge makes 7 a word here, recounting every word's pairs at each merge 49.
  assert.ok(ops < 6 * n, `${ops} Map/Set operations for ${n} words (${(ops / n).toFixed(1)} a word)`);
});
