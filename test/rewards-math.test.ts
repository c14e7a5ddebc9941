/** Number answers: the last number in the answer, commas as thousands separators, |a - b| <= 1e-6 * max(1, |b|). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { extractNumber, numberAnswerCorrect, numbersMatch } from "../src/rewards/math.js";

test("extractNumber takes the last number; commas only between digit groups", () => {
  const cases: [string, number | undefined][] = [
    ["42", 42],
    [" 42.0 ", 42],
    ["The answer is 1,234.50 dollars", 1234.5],
    ["$1,200", 1200],
    ["-3", -3],
    ["3 apples and 5 pears", 5],
    ["1,23", 23], // not a thousands group: the numbers 1 and 23
    ["1,2345", 2345],
    ["12,345,678", 12345678],
    ["no number", undefined],
    ["", undefined],
  ];
  for (const [text, want] of cases) assert.equal(extractNumber(text), want, JSON.stringify(text));
});

test("numberAnswerCorrect: tolerant of commas, trailing .0 and words around the number", () => {
  assert.equal(numberAnswerCorrect("42.0", "42"), 1);
  assert.equal(numberAnswerCorrect("1,200", "1200"), 1);
  assert.equal(numberAnswerCorrect("It is 17 apples", "17"), 1);
  assert.equal(numberAnswerCorrect("41", "42"), 0);
  assert.equal(numberAnswerCorrect("42 or 41", "42"), 0); // the last number counts
  assert.equal(numberAnswerCorrect(undefined, "42"), 0);
  assert.equal(numberAnswerCorrect("forty-two", "42"), 0);
});

test("numbersMatch: relative tolerance 1e-6, absolute below 1", () => {
  assert.ok(numbersMatch(0.1 + 0.2, 0.3));
  assert.ok(numbersMatch(0.1000001, 0.1)); // |diff| = 1e-7 <= 1e-6 * 1
  assert.ok(!numbersMatch(0.1001, 0.1));
  assert.ok(numbersMatch(1_000_000.5, 1_000_000)); // 0.5 <= 1e-6 * 1e6 = 1
  assert.ok(!numbersMatch(1_000_002, 1_000_000));
});
