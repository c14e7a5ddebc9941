import { test } from "node:test";
import assert from "node:assert/strict";
import { discountedReturns, reinforcePlusPlus, reinforcePlusPlusBaseline } from "../src/rl/advantages/reinforce-pp.js";
import { reinforceAdvantages } from "../src/rl/advantages/reinforce.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) =>
  a.length === b.length && a.every((x, i) => close(x, b[i], tol));

test("discounted returns by hand: G_t = r_t + γ·G_{t+1}", () => {
  assert.ok(allClose(discountedReturns([0, 0, 1], 0.9), [0.9 * 0.9 * 1, 0.9 * 1, 1]));
  assert.ok(allClose(discountedReturns([1, -2, 3], 0.5), [1 + 0.5 * -2 + 0.25 * 3, -2 + 0.5 * 3, 3]));
});

test("REINFORCE++ by hand: whitened returns over all action tokens of the batch", () => {
  const { advantages, returns } = reinforcePlusPlus(
    [
      [0, 0, 1],
      [0.5, 0],
    ],
    0.9,
  );
  const G = [0.81, 0.9, 1, 0.5, 0];
  assert.ok(allClose(returns.flat(), G));
  const mu = (0.81 + 0.9 + 1 + 0.5 + 0) / 5;
  const sd = Math.sqrt(G.reduce((s, g) => s + (g - mu) ** 2, 0) / (5 - 1) + 1e-8);
  assert.ok(allClose(advantages[0], [(0.81 - mu) / sd, (0.9 - mu) / sd, (1 - mu) / sd]));
  assert.ok(allClose(advantages[1], [(0.5 - mu) / sd, (0 - mu) / sd]));
});

test("REINFORCE++ whitening gives mean 0 and (unbiased) std 1 over action tokens", () => {
  const { advantages } = reinforcePlusPlus([[0.3, -1, 0, 2], [1], [0, 0, 0.5]], 0.95);
  const a = advantages.flat();
  const mu = a.reduce((s, x) => s + x, 0) / a.length;
  const sd = Math.sqrt(a.reduce((s, x) => s + (x - mu) ** 2, 0) / (a.length - 1));
  assert.ok(Math.abs(mu) < 1e-12);
  assert.ok(Math.abs(sd - 1) < 1e-6); // eps 1e-8 inside the sqrt
});

test("REINFORCE++-baseline by hand: s − μ_group broadcast to tokens, then batch whitening", () => {
  // group a: [1, 0] → ±0.5; group b is a singleton: μ = 0, so 5 stays.
  const A = reinforcePlusPlusBaseline([1, 0, 5], ["a", "a", "b"], [[1, 1], [1], [1, 1, 1]]);
  const flat = [0.5, 0.5, -0.5, 5, 5, 5];
  const mu = (0.5 + 0.5 - 0.5 + 5 + 5 + 5) / 6;
  const sd = Math.sqrt(flat.reduce((s, x) => s + (x - mu) ** 2, 0) / 5 + 1e-8);
  assert.deepEqual(
    A.map((r) => r.length),
    [2, 1, 3],
  );
  assert.ok(
    allClose(
      A.flat(),
      flat.map((x) => (x - mu) / sd),
    ),
  );
});

test("REINFORCE++ on datum positions: the return runs across observation gaps and datums, masked positions get 0", () => {
  // One trajectory in two datums: action tokens at [0][1], [0][3] and [1][2]; an observation at [0][2].
  const mask = [
    [0, 1, 0, 1],
    [0, 0, 1],
  ];
  const rewards = [
    [0, 0.5, 0, 0],
    [0, 0, 1],
  ];
  const { returns, advantages } = reinforcePlusPlus(rewards, 0.9, { mask, trajectory: [0, 0] });
  assert.deepEqual(returns, [
    [0, 0.5 + 0.9 * (0 + 0.9 * 1), 0, 0 + 0.9 * 1],
    [0, 0, 1],
  ]);
  // The same three action tokens as one unbroken row give the same numbers.
  const compact = reinforcePlusPlus([[0.5, 0, 1]], 0.9);
  assert.deepEqual([returns[0][1], returns[0][3], returns[1][2]], compact.returns[0]);
  assert.deepEqual([advantages[0][1], advantages[0][3], advantages[1][2]], compact.advantages[0]);
  assert.deepEqual([advantages[0][0], advantages[0][2], advantages[1][0], advantages[1][1]], [0, 0, 0, 0]);
  // A new trajectory restarts the sum: two trajectories of one datum each.
  assert.deepEqual(reinforcePlusPlus([[1, 1], [1]], 0.5, { mask: [[1, 1], [1]], trajectory: [0, 1] }).returns, [
    [1 + 0.5 * 1, 1],
    [1],
  ]);
});

test("REINFORCE: the score by default, minus the batch mean on request", () => {
  assert.deepEqual(reinforceAdvantages([1, 0, 3]), [1, 0, 3]);
  assert.ok(allClose(reinforceAdvantages([1, 0, 3], "batch-mean"), [1 - 4 / 3, 0 - 4 / 3, 3 - 4 / 3]));
});
