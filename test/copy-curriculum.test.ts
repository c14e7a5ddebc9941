import { test } from "node:test";
import assert from "node:assert/strict";
import { Tokenizer } from "../src/model/tokenizer.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { blendWord, copyDatums, corpusWords } from "../src/train/copy-curriculum.js";
import { Rng } from "../src/util/rng.js";

test("corpusWords: distinct letter and digit runs in first-seen order, up to a limit", () => {
  assert.deepEqual(corpusWords(["Kikel Foods is a company.", "Kikel is 1950 old; Foods had 863000 people, 1950!"]), [
    "Kikel",
    "Foods",
    "is",
    "a",
    "company",
    "1950",
    "old",
    "had",
    "863000",
    "people",
  ]);
  assert.deepEqual(corpusWords(["a b c d"], 2), ["a", "b"]);
});

test("copyDatums: second half repeats the first, loss only on the copied targets", () => {
  const tok = Tokenizer.fromDir(defaultTokenizerDir());
  const words = ["Kikel", "Linda", "Quife", "river", "Wenmar"];
  const ds = copyDatums(tok, words, { count: 20, minWords: 2, maxWords: 5, seed: 3 });
  assert.equal(ds.length, 20);
  const nl = tok.encode("\n");
  for (const d of ds) {
    const full = [...d.tokens, d.targetTokens[d.targetTokens.length - 1]];
    assert.deepEqual(d.targetTokens, full.slice(1));
    const half = (full.length - nl.length) / 2;
    assert.ok(Number.isInteger(half));
    assert.deepEqual(full.slice(half + nl.length), full.slice(0, half), "the second half copies the first");
    assert.deepEqual(full.slice(half, half + nl.length), nl);
    // target t predicts full[t + 1]: weighted exactly when full[t + 1] is in the second half
    d.weights.forEach((w, t) => assert.equal(w, t + 1 >= half + nl.length ? 1 : 0));
    const k = tok.decode(full.slice(0, half)).split(" ");
    assert.ok(k.length >= 2 && k.length <= 5 && k.every((w) => words.includes(w)));
  }
  assert.deepEqual(
    copyDatums(tok, words, { count: 20, minWords: 2, maxWords: 5, seed: 3 }),
    ds,
    "deterministic for a seed",
  );
});

test("blendWord: a head of one word and a tail of another; numbers stay numbers of the same length", () => {
  const rng = new Rng(5, 1);
  for (let i = 0; i < 200; i++) {
    const w = blendWord("Munarus", "Zanzan", rng);
    const cut = [...Array(7).keys()].some(
      (h) => h >= 1 && w.startsWith("Munarus".slice(0, h)) && "zanzan".endsWith(w.slice(h)) && w.length > h,
    );
    assert.ok(cut, `'${w}' is not head(Munarus) + tail(zanzan)`);
    const n = blendWord("863000", "Zanzan", rng);
    assert.match(n, /^[1-9][0-9]{5}$/);
  }
});

test("copyDatums: with blend, some copied words are made up, and the copy still repeats them", () => {
  const tok = Tokenizer.fromDir(defaultTokenizerDir());
  const words = ["Kikel", "Linda", "Quife", "Wenmar", "1950"];
  const ds = copyDatums(tok, words, { count: 50, minWords: 3, maxWords: 6, seed: 2, blend: 0.5 });
  const nl = tok.encode("\n");
  let madeUp = 0,
    total = 0;
  for (const d of ds) {
    const full = [...d.tokens, d.targetTokens[d.targetTokens.length - 1]];
    const half = (full.length - nl.length) / 2;
    assert.deepEqual(full.slice(half + nl.length), full.slice(0, half));
    for (const w of tok.decode(full.slice(0, half)).split(" ")) {
      total++;
      if (!words.includes(w)) madeUp++;
    }
  }
  assert.ok(madeUp > total * 0.3 && madeUp < total * 0.7, `${madeUp} of ${total} made up`);
});
