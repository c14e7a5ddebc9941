import { test } from "node:test";
import assert from "node:assert/strict";
import { adaptiveKlController, applyKlToRewards, fixedKlController } from "../src/rl/kl.js";
import { InputError } from "../src/util/errors.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) => a.length === b.length && a.every((x, i) => close(x, b[i], tol));

const rewards = [[0, 1], [2]];
const logp = [[-1, -2], [-0.3]];
const ref = [[-1.5, -1], [-0.5]];

test("KL in the reward by hand, k1 (default): r − β·(p − ref); meanKl is the mean of per-trajectory means", () => {
  const out = applyKlToRewards(rewards, logp, ref, 0.1);
  assert.ok(allClose(out.kl[0], [-1 - -1.5, -2 - -1]));
  assert.ok(allClose(out.rewards[0], [0 - 0.1 * 0.5, 1 - 0.1 * -1]));
  assert.ok(allClose(out.rewards[1], [2 - 0.1 * (-0.3 - -0.5)]));
  assert.ok(close(out.meanKl, ((0.5 + -1) / 2 + 0.2) / 2));
});

test("KL in the reward by hand, k3: exp(ref − p) − (ref − p) − 1", () => {
  const out = applyKlToRewards(rewards, logp, ref, 0.1, "k3");
  const k = (d: number) => Math.exp(d) - d - 1;
  assert.ok(allClose(out.kl[0], [k(-0.5), k(1)]));
  assert.ok(allClose(out.rewards[0], [0 - 0.1 * k(-0.5), 1 - 0.1 * k(1)]));
  assert.throws(() => applyKlToRewards([[0, 0]], [[0]], [[0, 0]], 0.1), InputError);
});

test("fixed controller never moves", () => {
  const c = fixedKlController(0.001);
  assert.equal(c.update(10, 256).coef, 0.001);
  assert.equal(c.update(0, 256).coef, 0.001);
});

test("adaptive controller: β·(1 + clip(KL/target − 1, ±0.2)·n/horizon), up above target, down below", () => {
  const c = adaptiveKlController({ initCoef: 0.1, target: 0.01, horizon: 10000 });
  const up = c.update(0.011, 256);
  assert.ok(close(up.coef, 0.1 * (1 + (0.011 / 0.01 - 1) * 256 / 10000)));
  assert.ok(up.coef > 0.1);
  const down = c.update(0.009, 256);
  assert.ok(down.coef < 0.1);
  // Errors are clipped to ±0.2.
  assert.ok(close(c.update(5, 256).coef, 0.1 * (1 + 0.2 * 256 / 10000)));
  assert.ok(close(c.update(0, 256).coef, 0.1 * (1 - 0.2 * 256 / 10000)));
  assert.ok(close(c.update(0.01, 256).coef, 0.1));
  // Values, not state: the original controller is unchanged; updates compound.
  assert.equal(c.coef, 0.1);
  assert.ok(close(up.update(0.011, 256).coef, 0.1 * (1 + (0.011 / 0.01 - 1) * 256 / 10000) ** 2));
  assert.throws(() => adaptiveKlController({ initCoef: 0.1, target: 0, horizon: 1 }), InputError);
});
