import { test } from "node:test";
import assert from "node:assert/strict";
import { drGrpoAdvantages, grpoAdvantages } from "../src/rl/advantages/grpo.js";
import { rlooAdvantages } from "../src/rl/advantages/rloo.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) =>
  a.length === b.length && a.every((x, i) => close(x, b[i], tol));
const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);

// Interleaved groups: b = [2, 4, 9] at 0, 2, 4; a = [1, 0] at 1, 3; c = [3] alone at 5.
const scores = [2, 1, 4, 0, 9, 3];
const groups = ["b", "a", "b", "a", "b", "c"];

test("GRPO by hand: (s − μ)/(σ + 1e-6), σ unbiased; singleton uses μ = 0, σ = 1", () => {
  const A = grpoAdvantages(scores, groups);
  const sb = Math.sqrt(((2 - 5) ** 2 + (4 - 5) ** 2 + (9 - 5) ** 2) / 2); // μ_b = 5
  const sa = Math.sqrt(((1 - 0.5) ** 2 + (0 - 0.5) ** 2) / 1); // μ_a = 0.5
  assert.ok(
    allClose(A, [
      (2 - 5) / (sb + 1e-6),
      (1 - 0.5) / (sa + 1e-6),
      (4 - 5) / (sb + 1e-6),
      (0 - 0.5) / (sa + 1e-6),
      (9 - 5) / (sb + 1e-6),
      3 / (1 + 1e-6),
    ]),
  );
  assert.ok(close(grpoAdvantages([1, 0], [0, 0], { epsilon: 0.5 })[0], 0.5 / (Math.sqrt(0.5) + 0.5)));
});

test("GRPO and Dr. GRPO advantages sum to zero within each group of two or more", () => {
  for (const A of [grpoAdvantages(scores, groups), drGrpoAdvantages(scores, groups)]) {
    assert.ok(Math.abs(sum([A[0], A[2], A[4]])) < 1e-12);
    assert.ok(Math.abs(sum([A[1], A[3]])) < 1e-12);
  }
});

test("Dr. GRPO by hand: s − μ, no std division", () => {
  assert.ok(allClose(drGrpoAdvantages(scores, groups), [2 - 5, 1 - 0.5, 4 - 5, 0 - 0.5, 9 - 5, 3 - 0]));
});

test("a group of equal scores gets zero advantages from GRPO, Dr. GRPO and RLOO", () => {
  for (const f of [grpoAdvantages, drGrpoAdvantages, rlooAdvantages])
    assert.deepEqual(f([0.7, 0.7, 0.7], [1, 1, 1]), [0, 0, 0]);
});

test("RLOO by hand: s minus the mean of the others, = n/(n − 1)(s − μ); singleton → 0", () => {
  const A = rlooAdvantages(scores, groups);
  assert.ok(allClose(A, [2 - (4 + 9) / 2, 1 - 0, 4 - (2 + 9) / 2, 0 - 1, 9 - (2 + 4) / 2, 0]));
  assert.ok(close(A[0], (3 / 2) * (2 - 5)));
  assert.ok(Math.abs(sum([A[0], A[2], A[4]])) < 1e-12);
  assert.ok(Math.abs(sum([A[1], A[3]])) < 1e-12);
});

test("numeric and string group keys are distinct groups", () => {
  assert.deepEqual(rlooAdvantages([1, 5], [1, "1"]), [0, 0]);
});
