import { test } from "node:test";
import assert from "node:assert/strict";
import { adaptiveKlController, applyKlToRewards, fixedKlController, klValue } from "../src/rl/kl.js";
import { InputError } from "../src/util/errors.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) =>
  a.length === b.length && a.every((x, i) => close(x, b[i], tol));

test("KL estimators by hand: k1 = p − ref, k2 = ½(p − ref)², k3 = exp(ref − p) − (ref − p) − 1 clamped to ±10", () => {
  assert.ok(close(klValue(-1, -1.5, "k1"), 0.5));
  assert.ok(close(klValue(-1, -1.5, "k2"), 0.125));
  assert.ok(close(klValue(-1, -1.5, "k3"), Math.exp(-0.5) + 0.5 - 1)); // 0.10653
  assert.ok(close(klValue(-1, 2, "k3"), 10)); // e^3 - 4 = 16.09, clamped to 10
});

// Two trajectories, one datum each, every position an action token.
const full = (rows: number[][]) => rows.map((r) => r.map(() => 1));
const rewards = [[0, 1], [2]];
const logp = [[-1, -2], [-0.3]];
const ref = [[-1.5, -1], [-0.5]];
const layout = { mask: full(rewards), trajectory: [0, 1] };

test("KL in the reward by hand, k1 (default): r − β·(p − ref); meanKl is the mean of per-trajectory means", () => {
  const out = applyKlToRewards({ rewards, logprobs: logp, refLogprobs: ref, ...layout }, 0.1);
  assert.ok(allClose(out.kl[0], [-1 - -1.5, -2 - -1]));
  assert.ok(allClose(out.rewards[0], [0 - 0.1 * 0.5, 1 - 0.1 * -1]));
  assert.ok(allClose(out.rewards[1], [2 - 0.1 * (-0.3 - -0.5)]));
  assert.ok(allClose(out.trajectoryKl, [0.5 + -1, 0.2]));
  assert.ok(close(out.meanKl, ((0.5 + -1) / 2 + 0.2) / 2));
});

test("KL in the reward by hand, k3: exp(ref − p) − (ref − p) − 1", () => {
  const out = applyKlToRewards({ rewards, logprobs: logp, refLogprobs: ref, ...layout }, 0.1, "k3");
  const k = (d: number) => Math.exp(d) - d - 1;
  assert.ok(allClose(out.kl[0], [k(-0.5), k(1)]));
  assert.ok(allClose(out.rewards[0], [0 - 0.1 * k(-0.5), 1 - 0.1 * k(1)]));
  assert.throws(
    () =>
      applyKlToRewards(
        { rewards: [[0, 0]], logprobs: [[0]], refLogprobs: [[0, 0]], mask: [[1, 1]], trajectory: [0] },
        0.1,
      ),
    InputError,
  );
});

test("KL on datum positions: only action tokens pay; a trajectory split into two datums is one mean", () => {
  // Trajectory 0 is datums 0 and 1 (action tokens at [0][1] and [1][1], [1][2]); trajectory 1 is datum 2.
  const out = applyKlToRewards(
    {
      rewards: [
        [0, 0],
        [0, 0, 1],
        [0, 3],
      ],
      logprobs: [
        [9, -1],
        [9, -1, -2],
        [9, -1],
      ],
      refLogprobs: [
        [0, -1.5],
        [0, -1.25, -2],
        [0, -2],
      ],
      mask: [
        [0, 1],
        [0, 1, 1],
        [0, 1],
      ],
      trajectory: [0, 0, 1],
    },
    0.5,
  );
  assert.deepEqual(out.kl, [
    [0, 0.5],
    [0, 0.25, 0],
    [0, 1],
  ]);
  assert.deepEqual(out.rewards, [
    [0, 0 - 0.5 * 0.5],
    [0, 0 - 0.5 * 0.25, 1 - 0.5 * 0],
    [0, 3 - 0.5 * 1],
  ]);
  assert.deepEqual(out.trajectoryKl, [0.5 + 0.25 + 0, 1]);
  assert.ok(close(out.meanKl, ((0.5 + 0.25 + 0) / 3 + 1 / 1) / 2));
});

test("fixed controller never moves", () => {
  const c = fixedKlController(0.001);
  assert.equal(c.update(10, 256).coef, 0.001);
  assert.equal(c.update(0, 256).coef, 0.001);
});

test("adaptive controller: β·(1 + clip(KL/target − 1, ±0.2)·n/horizon), up above target, down below", () => {
  const c = adaptiveKlController({ initCoef: 0.1, target: 0.01, horizon: 10000 });
  const up = c.update(0.011, 256);
  assert.ok(close(up.coef, 0.1 * (1 + ((0.011 / 0.01 - 1) * 256) / 10000)));
  assert.ok(up.coef > 0.1);
  const down = c.update(0.009, 256);
  assert.ok(down.coef < 0.1);
  // Errors are clipped to ±0.2.
  assert.ok(close(c.update(5, 256).coef, 0.1 * (1 + (0.2 * 256) / 10000)));
  assert.ok(close(c.update(0, 256).coef, 0.1 * (1 - (0.2 * 256) / 10000)));
  assert.ok(close(c.update(0.01, 256).coef, 0.1));
  // Values, not state: the original controller is unchanged; updates compound.
  assert.equal(c.coef, 0.1);
  assert.ok(close(up.update(0.011, 256).coef, 0.1 * (1 + ((0.011 / 0.01 - 1) * 256) / 10000) ** 2));
  assert.throws(() => adaptiveKlController({ initCoef: 0.1, target: 0, horizon: 1 }), InputError);
});
