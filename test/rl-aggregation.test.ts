/**
 * Loss aggregation by hand (src/rl/aggregation.ts, as verl's agg_loss): each
 * mode's value Σ c·l over a small batch, written as the arithmetic.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { aggregationCoefficients, type AggregationRow } from "../src/rl/aggregation.js";
import type { LossAggregation } from "../src/engine/types.js";
import { InputError } from "../src/util/errors.js";

const MODES: LossAggregation[] = [
  "token-mean",
  "seq-mean-token-sum",
  "seq-mean-token-mean",
  "seq-mean-token-sum-norm",
  "sum",
];
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b));

type Row = AggregationRow & { loss: number[] };

/** The aggregated loss Σ c·l of rows that carry their per-token losses. */
function value(rows: Row[], agg: LossAggregation, normalizer = 10): number {
  const c = aggregationCoefficients(rows, agg, normalizer);
  return rows.reduce((s, r, d) => s + r.loss.reduce((a, l, i) => a + c[d][i] * l, 0), 0);
}

// Three sequences: A has loss tokens 2 and 4, B has 1, 3 and 5, C has 6 (9s sit at weight 0).
const A: Row = { weights: [0, 1, 1], loss: [9, 2, 4] };
const B: Row = { weights: [1, 0, 1, 1], loss: [1, 9, 3, 5] };
const C: Row = { weights: [1], loss: [6] };
const batch = [A, B, C];

test("each mode by hand", () => {
  assert.ok(close(value(batch, "token-mean"), (2 + 4 + 1 + 3 + 5 + 6) / 6));
  assert.ok(close(value(batch, "seq-mean-token-sum"), (2 + 4 + (1 + 3 + 5) + 6) / 3));
  assert.ok(close(value(batch, "seq-mean-token-mean"), ((2 + 4) / 2 + (1 + 3 + 5) / 3 + 6 / 1) / 3));
  // Σ w·l / normalizer: no division by the number of sequences.
  assert.ok(close(value(batch, "seq-mean-token-sum-norm", 10), (2 + 4 + 1 + 3 + 5 + 6) / 10));
  assert.ok(close(value(batch, "sum"), 2 + 4 + 1 + 3 + 5 + 6));
});

test("fractional weights weigh the tokens; the per-sequence mean divides by the weight", () => {
  const half: Row = { weights: [0.5, 1], loss: [2, 4] };
  assert.ok(close(value([half], "token-mean"), (0.5 * 2 + 4) / 1.5));
  assert.ok(close(value([half, C], "seq-mean-token-mean"), ((0.5 * 2 + 4) / 1.5 + 6) / 2));
  assert.ok(close(value([half, C], "seq-mean-token-sum"), (0.5 * 2 + 4 + 6) / 2));
});

test("seq-mean-token-sum-norm over k copies of one datum is k times the loss of that datum alone", () => {
  for (const k of [1, 2, 5]) {
    const copies = Array.from({ length: k }, () => B);
    assert.ok(close(value(copies, "seq-mean-token-sum-norm", 4), k * value([B], "seq-mean-token-sum-norm", 4)));
    assert.ok(close(value(copies, "seq-mean-token-sum-norm", 4), (k * (1 + 3 + 5)) / 4));
    // The means do not grow with the batch.
    for (const agg of ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] as const)
      assert.ok(close(value(copies, agg), value([B], agg)), agg);
  }
});

test("a datum with no loss tokens changes no mode's value and gets zero coefficients", () => {
  const masked: Row = { weights: [0, 0], loss: [100, -7] }; // e.g. a trajectory masked as overlong
  for (const agg of MODES) {
    assert.ok(close(value([A, masked, B, C], agg), value(batch, agg)), agg);
    assert.deepEqual(aggregationCoefficients([A, masked, B, C], agg, 10)[1], [0, 0], agg);
  }
  // Nor does a whole sequence of them: verl leaves fully masked sequences out of the count.
  for (const agg of MODES)
    assert.ok(
      close(value([{ ...masked, sequence: 7 }, { ...masked, sequence: 7 }, A, B, C], agg), value(batch, agg)),
      agg,
    );
});

test("a trajectory split into two datums (one sequence id) counts once in the seq-mean modes", () => {
  // A split where a context rewrite started a new datum: loss tokens 2 | 4.
  const A1: Row = { weights: [0, 1], loss: [9, 2], sequence: 0 };
  const A2: Row = { weights: [0, 1], loss: [9, 4], sequence: 0 };
  const split = [A1, A2, { ...B, sequence: 1 }, C]; // C has no id: a sequence by itself
  assert.ok(close(value(split, "seq-mean-token-sum"), (2 + 4 + (1 + 3 + 5) + 6) / 3));
  assert.ok(close(value(split, "seq-mean-token-mean"), ((2 + 4) / 2 + (1 + 3 + 5) / 3 + 6 / 1) / 3));
  for (const agg of MODES) assert.ok(close(value(split, agg), value(batch, agg)), agg);
  // Without the id each half is a sequence of its own: four sequences, and A's halves averaged apart.
  const apart = split.map(({ sequence: _s, ...r }) => r);
  assert.ok(close(value(apart, "seq-mean-token-sum"), (2 + 4 + (1 + 3 + 5) + 6) / 4));
  assert.ok(close(value(apart, "seq-mean-token-mean"), (2 / 1 + 4 / 1 + (1 + 3 + 5) / 3 + 6 / 1) / 4));
});

test("all weights zero gives zero coefficients; seq-mean-token-sum-norm needs a positive normalizer", () => {
  for (const agg of MODES) assert.deepEqual(aggregationCoefficients([{ weights: [0, 0] }], agg, 10), [[0, 0]]);
  assert.throws(() => aggregationCoefficients(batch, "seq-mean-token-sum-norm"), InputError);
  assert.throws(
    () => aggregationCoefficients(batch, "seq-mean-token-sum-norm", 0),
    /loss\.normalizer must be a positive number/,
  );
});
