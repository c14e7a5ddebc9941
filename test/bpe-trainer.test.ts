import { test } from "node:test";
import assert from "node:assert/strict";
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
  const t0 = Date.now();
  const j = train(corpus, 1300);
  const ms = Date.now() - t0;
  assert.ok(Object.keys(j.model.vocab).length > 1000);
  assert.ok(ms < 10000, `took ${ms} ms`);
});
