import { test } from "node:test";
import assert from "node:assert/strict";
import { Tokenizer } from "../src/model/tokenizer.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { copyDatums, corpusWords } from "../src/train/copy-curriculum.js";

test("corpusWords: distinct letter and digit runs in first-seen order, up to a limit", () => {
  assert.deepEqual(corpusWords(["Kikel Foods is a company.", "Kikel is 1950 old; Foods had 863000 people, 1950!"]), ["Kikel", "Foods", "is", "a", "company", "1950", "old", "had", "863000", "people"]);
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
  assert.deepEqual(copyDatums(tok, words, { count: 20, minWords: 2, maxWords: 5, seed: 3 }), ds, "deterministic for a seed");
});
