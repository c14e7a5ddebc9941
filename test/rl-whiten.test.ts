import { test } from "node:test";
import assert from "node:assert/strict";
import { moments, whiten, whitenBatch } from "../src/rl/whiten.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) =>
  a.length === b.length && a.every((x, i) => close(x, b[i], tol));

test("moments: unbiased by default, biased on request", () => {
  const m = moments([1, 2, 6]);
  assert.ok(close(m.mean, (1 + 2 + 6) / 3));
  assert.ok(close(m.variance, ((1 - 3) ** 2 + (2 - 3) ** 2 + (6 - 3) ** 2) / 2));
  assert.ok(close(moments([1, 2, 6], false).variance, ((1 - 3) ** 2 + (2 - 3) ** 2 + (6 - 3) ** 2) / 3));
  assert.deepEqual(moments([]), { mean: 0, variance: 0, count: 0 });
});

test("whiten: verl masked_whiten form (x − μ)/sqrt(var + 1e-8), unbiased var", () => {
  // μ = 2, unbiased var = (1 + 0 + 1)/2 = 1
  assert.ok(allClose(whiten([1, 2, 3]), [(1 - 2) / Math.sqrt(1 + 1e-8), 0, (3 - 2) / Math.sqrt(1 + 1e-8)]));
  // biased var = 2/3
  assert.ok(
    allClose(whiten([1, 2, 3], { unbiased: false }), [-1 / Math.sqrt(2 / 3 + 1e-8), 0, 1 / Math.sqrt(2 / 3 + 1e-8)]),
  );
  // StepPO form: (x − μ)/(σ + eps)
  assert.ok(allClose(whiten([1, 2, 3], { epsOn: "std", eps: 0.5 }), [-1 / (1 + 0.5), 0, 1 / (1 + 0.5)]));
});

test("whiten: degenerate inputs give zeros, not NaN", () => {
  assert.deepEqual(whiten([]), []);
  assert.deepEqual(whiten([7]), [0]);
  assert.deepEqual(whiten([4, 4, 4]), [0, 0, 0]);
});

test("whitenBatch: one mean/var over all rows; masked entries excluded and returned as 0", () => {
  const out = whitenBatch([[1, 2], [3]]);
  assert.ok(allClose(out.flat(), whiten([1, 2, 3])));
  assert.deepEqual(
    out.map((r) => r.length),
    [2, 1],
  );
  // The 100 is masked: stats come from [1, 2, 3] only.
  const masked = whitenBatch([[1, 100, 2], [3]], { masks: [[1, 0, 1], [1]] });
  const d = Math.sqrt(1 + 1e-8);
  assert.ok(allClose(masked[0], [(1 - 2) / d, 0, 0]));
  assert.ok(allClose(masked[1], [(3 - 2) / d]));
});
