/** HotpotQA answer normalization, exact match and F1 (hotpot_evaluate_v1.py semantics), on hand-worked cases. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { exactMatch, f1Score, normalizeAnswer } from "../src/rewards/qa.js";

test("normalizeAnswer: lowercase, strip ASCII punctuation, drop a/an/the, collapse whitespace", () => {
  const cases: [string, string][] = [
    ["The Eiffel Tower!", "eiffel tower"],
    ["  A  cat, an apple;   THE end. ", "cat apple end"],
    ["new\tyork\n city", "new york city"],
    ["theater and anthem", "theater and anthem"], // articles only as whole words
    ["Anne's", "annes"], // punctuation goes first...
    ["the-end", "theend"], // ...so a hyphenated article is no longer a word
    ["U.S.A.", "usa"],
    ["an", ""],
    ["A", ""],
    ["éa b", "éa b"], // é is a letter: no word boundary before "a" (Python's \b agrees)
    ["café the", "café"],
    ["“Quoted”", "“quoted”"], // typographic quotes are not in string.punctuation
    ["1,200.5", "12005"],
  ];
  for (const [input, want] of cases) assert.equal(normalizeAnswer(input), want, JSON.stringify(input));
});

test("exactMatch compares normalized strings", () => {
  assert.equal(exactMatch("the Lusk", "Lusk"), 1);
  assert.equal(exactMatch("LUSK.", " lusk "), 1);
  assert.equal(exactMatch("Lusk river", "Lusk"), 0);
  assert.equal(exactMatch("", "a"), 1); // both normalize to ""
  assert.equal(exactMatch("59", "59.0"), 0); // "590" after punctuation removal
});

test("f1Score: token overlap of the normalized strings", () => {
  // pred [ada, brenn, lusk], gold [lusk]: 1 shared, P = 1/3, R = 1
  assert.deepEqual(f1Score("Ada Brenn Lusk", "Lusk"), {
    f1: (2 * (1 / 3) * 1) / (1 / 3 + 1),
    precision: 1 / 3,
    recall: 1,
  });
  // pred [cat, sat, on, mat], gold [cat, on, mat]: 3 shared, P = 3/4, R = 1
  assert.equal(f1Score("the cat sat on the mat", "a cat on a mat").f1, (2 * (3 / 4) * 1) / (3 / 4 + 1));
  // a repeated token counts min(2, 1) = 1 times: P = 1/2, R = 1
  assert.equal(f1Score("lusk lusk", "lusk").f1, (2 * (1 / 2)) / (1 / 2 + 1));
  assert.deepEqual(f1Score("Paris", "Lusk"), { f1: 0, precision: 0, recall: 0 });
  assert.equal(f1Score("", "Lusk").f1, 0);
  assert.equal(f1Score("The Lusk", "lusk!").f1, 1);
});

test("f1Score: yes / no / noanswer score only against themselves", () => {
  assert.equal(f1Score("yes", "no").f1, 0);
  assert.equal(f1Score("Yes.", "yes").f1, 1);
  assert.equal(f1Score("yes sir", "yes").f1, 0); // gold is special and differs
  assert.equal(f1Score("no", "no way").f1, 0); // prediction is special and differs
});
