/**
 * The off-policy masks (src/rl/off-policy-mask.ts), worked by hand on tiny datums.
 *
 * Every datum here was sampled at q_s = −1 on each position, and the learner scores it at
 * q_l = −1 + x, so the log-ratio log r_t is x (to float rounding) and r_t = eˣ. Positions with
 * weight 0 (prompt, observation) carry a wild x on purpose: they must change nothing.
 * Bounds are inclusive: r = lo and r = hi are kept, only r < lo or r > hi is masked.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Datum } from "../src/engine/types.js";
import { applyOffPolicyMasks, offPolicyKeep, withKeptWeights } from "../src/rl/off-policy-mask.js";
import { applyTis } from "../src/rl/tis.js";

const L2 = Math.LN2;
const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;

/** A datum with the given weights, sampled at −1 everywhere, and the learner's row for log-ratios `x`. */
function datum(weights: number[], x: number[], sequence?: number): { d: Datum; learner: number[] } {
  const n = weights.length;
  const d: Datum = {
    tokens: Array.from({ length: n }, (_, i) => i + 1),
    targetTokens: Array.from({ length: n }, (_, i) => i + 2),
    weights,
    advantages: weights.map(() => 1),
    logprobs: weights.map(() => -1),
    ...(sequence !== undefined ? { sequence } : {}),
  };
  return { d, learner: x.map((v) => -1 + v) };
}

const split = (rows: { d: Datum; learner: number[] }[]) => ({
  datums: rows.map((r) => r.d),
  learner: rows.map((r) => r.learner),
});

test("token mask (ICEPOP): tokens with r outside [lo, hi] get weight 0, both ends kept", () => {
  // Positions: a prompt target (weight 0, x = −6: ignored), then four action tokens with
  // r = 1, 2, 4, e⁻³ ≈ 0.0498. −1 + ln 2 and its difference with −1 are exact, so r = 2 exactly.
  const { datums, learner } = split([datum([0, 1, 1, 1, 1], [-6, 0, L2, 2 * L2, -3])]);
  // [0.5, 2]: 1 and 2 (= hi) kept; 4 > 2 and 0.0498 < 0.5 masked. 2 of 4 action tokens masked;
  // the one sequence keeps two tokens, so no sequence is masked.
  const hi = applyOffPolicyMasks(datums, learner, { tokenMask: [0.5, 2] });
  assert.deepEqual(hi.datums[0].weights, [0, 1, 1, 0, 0]);
  assert.deepEqual(hi.metrics, { maskedTokens: 2 / 4, maskedSequences: 0 });
  // [1, 3]: r = 1 (= lo) kept, 2 kept, 4 and 0.0498 masked.
  const lo = applyOffPolicyMasks(datums, learner, { tokenMask: [1, 3] });
  assert.deepEqual(lo.datums[0].weights, [0, 1, 1, 0, 0]);
  // [1.5, 3]: now r = 1 is below lo as well: only r = 2 stays.
  assert.deepEqual(applyOffPolicyMasks(datums, learner, { tokenMask: [1.5, 3] }).datums[0].weights, [0, 0, 1, 0, 0]);
  // Everything else is left as it was: advantages, the sampler's logprobs (no re-anchoring), the input.
  assert.deepEqual(hi.datums[0].advantages, datums[0].advantages);
  assert.deepEqual(hi.datums[0].logprobs, datums[0].logprobs);
  assert.deepEqual(datums[0].weights, [0, 1, 1, 1, 1], "the input is not changed");
});

test("sequence mask (geometric mean): a sequence split across datums is judged once, zero-weight tokens ignored", () => {
  // seqMask [0.8, 1.25].
  // Sequence 0 is two datums (a context rewrite split it):
  //   first  weights [0, 1, 1]     x [9, 0.0, 0.1]        → action log-ratios 0.0, 0.1
  //   second weights [1, 0, 1]     x [0.5, 5, 0.2]        → action log-ratios 0.5, 0.2 (the 5 is an observation)
  //   mean over its 4 action tokens = (0 + 0.1 + 0.5 + 0.2) / 4 = 0.2, e^0.2 ≈ 1.2214 ≤ 1.25: kept.
  //   (The second datum alone: mean 0.35, e^0.35 ≈ 1.419 — it would be masked on its own. Counting the
  //   observation's 5: mean (0.8 + 5) / 5 = 1.16, e^1.16 ≈ 3.19 — masked too. Neither happens.)
  // Sequence 1, one datum, weights [1, 1], x [−0.4, −0.2]: mean −0.3, e^−0.3 ≈ 0.7408 < 0.8: masked.
  // A datum without a sequence id is a sequence by itself: weights [1], x [0]: r = 1, kept.
  // Sequence 2 has no action token (an overlong episode, weight 0): x [9], not counted anywhere.
  // Action tokens: 4 + 2 + 1 = 7, of which 2 masked; sequences with action tokens: 3, one masked.
  const { datums, learner } = split([
    datum([0, 1, 1], [9, 0.0, 0.1], 0),
    datum([0, 0], [9, 9], 2),
    datum([1, 1], [-0.4, -0.2], 1),
    datum([1, 0, 1], [0.5, 5, 0.2], 0),
    datum([1], [0]),
  ]);
  const out = applyOffPolicyMasks(datums, learner, { seqMask: [0.8, 1.25] });
  assert.deepEqual(
    out.datums.map((d) => d.weights),
    [[0, 1, 1], [0, 0], [0, 0], [1, 0, 1], [1]],
  );
  assert.ok(close(out.metrics.maskedTokens, 2 / 7));
  assert.ok(close(out.metrics.maskedSequences, 1 / 3));
  // Narrow the upper end below e^0.2 ≈ 1.2214 and sequence 0 goes as well, both of its datums.
  const narrow = applyOffPolicyMasks(datums, learner, { seqMask: [0.8, 1.2] });
  assert.deepEqual(narrow.datums[0].weights, [0, 0, 0]);
  assert.deepEqual(narrow.datums[3].weights, [0, 0, 0]);
  assert.ok(close(narrow.metrics.maskedTokens, 6 / 7));
  assert.ok(close(narrow.metrics.maskedSequences, 2 / 3));
});

test("both masks: each judged on the rollout's own weights, a token masked by both counted once", () => {
  // seqMask = tokenMask = [0.5, 2].
  // Sequence 0: x [0, 2 ln 2, 0] → r = 1, 4, 1; geometric mean e^(2 ln 2 / 3) = 4^(1/3) ≈ 1.587: kept
  //   (the r = 4 token counts in the mean although the token mask drops it); the token mask drops t = 1.
  // Sequence 1: x [1, 1] → r = e ≈ 2.718 each, mean e: masked; the token mask would drop both anyway.
  // Masked tokens 1 + 2 = 3 of 5; sequences 1 of 2.
  const { datums, learner } = split([datum([1, 1, 1], [0, 2 * L2, 0], 0), datum([1, 1], [1, 1], 1)]);
  const out = applyOffPolicyMasks(datums, learner, { seqMask: [0.5, 2], tokenMask: [0.5, 2] });
  assert.deepEqual(
    out.datums.map((d) => d.weights),
    [
      [1, 0, 1],
      [0, 0],
    ],
  );
  assert.deepEqual(out.metrics, { maskedTokens: 3 / 5, maskedSequences: 1 / 2 });
});

test("a sequence the token mask empties counts as masked; fractional weights are kept as they are", () => {
  // Weights 0.5 (a scaled trajectory): the mask keeps or zeroes them, never rounds them to 1.
  // x [0, 3]: r = 1 kept, r = e³ ≈ 20 dropped. Second sequence x [3]: its only token dropped, so
  // the sequence has no weight left: masked. Tokens 2 of 3, sequences 1 of 2.
  const { datums, learner } = split([datum([0.5, 0.5], [0, 3], 0), datum([0.5], [3], 1)]);
  const out = applyOffPolicyMasks(datums, learner, { tokenMask: [0.5, 2] });
  assert.deepEqual(
    out.datums.map((d) => d.weights),
    [[0.5, 0], [0]],
  );
  assert.deepEqual(out.metrics, { maskedTokens: 2 / 3, maskedSequences: 1 / 2 });
});

test("no masks configured, or no action token: nothing changes and nothing is masked", () => {
  const { datums, learner } = split([datum([0, 1], [4, 4])]);
  const none = applyOffPolicyMasks(datums, learner, {});
  assert.deepEqual(none.datums, datums);
  assert.deepEqual(none.metrics, { maskedTokens: 0, maskedSequences: 0 });
  const empty = split([datum([0, 0], [4, 4])]);
  assert.deepEqual(applyOffPolicyMasks(empty.datums, empty.learner, { seqMask: [0.5, 2] }).metrics, {
    maskedTokens: 0,
    maskedSequences: 0,
  });
});

test("a learner logprob of −∞ or NaN is outside any range with lo > 0: masked", () => {
  const { datums } = split([datum([1, 1], [0, 0])]);
  const out = applyOffPolicyMasks(datums, [[-Infinity, NaN]], { tokenMask: [0.5, 2] });
  assert.deepEqual(out.datums[0].weights, [0, 0]);
  // lo = 0 bounds nothing from below: r = e^−∞ = 0 is kept; NaN never is.
  assert.deepEqual(applyOffPolicyMasks(datums, [[-Infinity, NaN]], { tokenMask: [0, 2] }).datums[0].weights, [1, 0]);
});

test("with TIS: the mask zeroes weights, TIS scales advantages; cap ≥ hi gives ICEPOP's M(k) = k on [lo, hi]", () => {
  // One datum, advantages [1, 1, 1, 1], r = 2, 1, e⁻³ ≈ 0.0498, 4 (x = ln 2, 0, −3, 2 ln 2).
  // tokenMask [0.5, 3]: keep [1, 1, 0, 0]. TIS with cap 3 (≥ hi) weights the advantages by
  // min(r, 3) = [2, 1, 0.0498, 3]. The loss sees weight × advantage = [2, 1, 0, 0]: r itself on the
  // kept tokens, 0 outside — IcePop's M(k)·A with k = r. The masks are judged on the sampler's
  // logprobs, before TIS re-anchors the datum on the learner's (as prepareBatch does it).
  const { datums, learner } = split([datum([1, 1, 1, 1], [L2, 0, -3, 2 * L2])]);
  const { keep, metrics } = offPolicyKeep(datums, learner, { tokenMask: [0.5, 3] });
  const tis = applyTis(datums, learner, 3);
  const out = withKeptWeights(tis.datums, keep)[0];
  const effective = out.weights.map((w, t) => w * out.advantages![t]);
  [2, 1, 0, 0].forEach((e, t) => assert.ok(close(effective[t], e), `token ${t}: ${effective[t]} vs ${e}`));
  assert.deepEqual(out.logprobs, learner[0], "TIS's learner anchor is kept");
  assert.deepEqual(metrics, { maskedTokens: 2 / 4, maskedSequences: 0 });
  // TIS's own measures still cover every action token, the masked ones included.
  assert.ok(close(tis.metrics.meanWeight, (2 + 1 + Math.exp(-3) + 3) / 4));
});
