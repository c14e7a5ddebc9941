/** Truncated importance sampling (src/rl/tis.ts), worked by hand. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyTis } from "../src/rl/tis.js";

const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;

test("TIS: weights min(exp(q_l − q_s), cap) on action tokens, re-anchored on the learner, metrics by hand", () => {
  const L = Math.log;
  const datum = {
    tokens: [1, 2, 3],
    targetTokens: [2, 3, 4],
    weights: [0, 1, 1],
    advantages: [5, 2, -1],
    logprobs: [-1, -1, -2],
  };
  // Learner: ratio 2 at t = 1 (capped at 1.5), 0.5 at t = 2; t = 0 is not an action token.
  const learner = [[-7, -1 + L(2), -2 + L(0.5)]];
  const { datums, metrics } = applyTis([datum], learner, 1.5);
  [5, 2 * 1.5, -1 * 0.5].forEach((a, t) => assert.ok(close(datums[0].advantages![t], a), `advantage ${t}`));
  assert.deepEqual(datums[0].logprobs, learner[0], "the learner's logprobs anchor the ratio");
  assert.deepEqual(datums[0].weights, datum.weights);
  assert.ok(close(metrics.drift, (L(2) + L(2)) / 2));
  assert.ok(close(metrics.meanWeight, (1.5 + 0.5) / 2));
  assert.ok(close(metrics.cappedFraction, 1 / 2));
  // k3 of KL(sampler ‖ learner): exp(d) − d − 1 with d = q_l − q_s = ln 2, then −ln 2.
  assert.ok(close(metrics.kl, (2 - L(2) - 1 + (0.5 + L(2) - 1)) / 2));
  assert.deepEqual(datum.advantages, [5, 2, -1], "the input is not changed");
});

test("TIS: a sampler equal to the learner changes nothing but the anchor", () => {
  const d = { tokens: [1, 2], targetTokens: [2, 3], weights: [1, 1], advantages: [0.3, -0.2], logprobs: [-0.5, -1.5] };
  const { datums, metrics } = applyTis([d], [[-0.5, -1.5]], 2);
  assert.deepEqual(datums[0].advantages, [0.3, -0.2]);
  assert.equal(metrics.drift, 0);
  assert.equal(metrics.kl, 0);
  assert.equal(metrics.meanWeight, 1);
  assert.equal(metrics.cappedFraction, 0);
});
