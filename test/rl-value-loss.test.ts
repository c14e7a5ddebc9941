/** The critic's value loss in plain numbers (src/rl/value-loss.ts), against hand-worked values. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { clipCounts, valueLossAt } from "../src/rl/value-loss.js";

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-12, `${a} vs ${b}`);

test("unclipped: ½·w·(V−R)² and its derivative w·(V−R)", () => {
  const r = valueLossAt(2, 0.5, 0.4, 0);
  close(r.loss, 0.5 * 0.4 * 2.25);
  close(r.grad, 0.4 * 1.5);
});

test("with a clip: the larger square wins; where the clipped one wins outside the clip, the gradient is 0", () => {
  // V moved 1.0 from old, clip 0.2: clip(V) = 1.2. R = 0.5: (V−R)² = 2.25 beats (1.2−0.5)² = 0.49.
  const kept = valueLossAt(2, 0.5, 0.4, 0.2, 1);
  close(kept.loss, 0.5 * 0.4 * 2.25);
  close(kept.grad, 0.4 * 1.5);
  // R = 3: (1.2−3)² = 3.24 beats (2−3)² = 1; the clipped value does not move with V.
  const clipped = valueLossAt(2, 3, 0.4, 0.2, 1);
  close(clipped.loss, 0.5 * 0.4 * 3.24);
  assert.equal(clipped.grad, 0);
  // Inside the clip clip(V) = V: a tie, and the unclipped derivative.
  const inside = valueLossAt(1.1, 3, 1, 0.2, 1);
  close(inside.loss, 0.5 * 1.9 ** 2);
  close(inside.grad, 1.1 - 3);
});

test("clipCounts counts weighted positions and those the clip bound", () => {
  const datums = [
    { tokens: [1, 2, 3], weights: [1, 0, 1], returns: [0, 0, 0], oldValues: [0, 0, 0] },
    { tokens: [4, 5], weights: [1, 1], returns: [0, 0], oldValues: [1, 1] },
  ];
  const values = [
    [0.5, 9, 0.1],
    [1.05, 2],
  ];
  assert.deepEqual(clipCounts(datums, values, 0.2), { tokens: 4, clipped: 2 });
  assert.deepEqual(clipCounts(datums, values, 0), { tokens: 4, clipped: 0 });
});
