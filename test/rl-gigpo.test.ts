/** GiGPO (src/rl/advantages/gigpo.ts) against hand-worked values. */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  computeAdvantages,
  discountedStepReturns,
  gigpoStepAdvantages,
  gigpoTrajectoryAdvantages,
} from "../src/rl/advantages/index.js";

const near = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);
const nearRows = (a: number[][], b: number[][]) => a.forEach((r, i) => r.forEach((x, j) => near(x, b[i][j])));

test("GiGPO trajectory advantages: the group z-score (unbiased std); a group of one gets 0", () => {
  const a = gigpoTrajectoryAdvantages([1, 0, 0, 1, 1], ["q", "q", "q", "q", "alone"]);
  const z = 0.5 / Math.sqrt(1 / 3); // mean 0.5, unbiased variance 1/3
  [z, -z, -z, z, 0].forEach((x, i) => near(a[i], x, 1e-5));
  // mean-only: s − mean
  const m = gigpoTrajectoryAdvantages([1, 0, 0, 1], [0, 0, 0, 0], { normalize: "mean" });
  assert.deepEqual(m, [0.5, -0.5, -0.5, 0.5]);
});

test("GiGPO step returns are discounted sums of the later step rewards", () => {
  assert.deepEqual(discountedStepReturns([[0, 0, 1], [2]], 0.5), [[0.25, 0.5, 1], [2]]);
  assert.deepEqual(discountedStepReturns([[1, 1]]), [[2, 1]]);
});

test("GiGPO step advantages: over one group's steps in the same state; alone, another group or no state: 0", () => {
  const returns = [
    [0.25, 0.5, 1], // trajectory 0
    [0, 0], // trajectory 1, same group
    [1], // trajectory 2, another group, same first state text
  ];
  const anchors = [["s0", "s1", "s2"], ["s0", "s1b"], ["s0"]];
  const a = gigpoStepAdvantages(returns, anchors, ["g", "g", "h"]);
  // anchor s0 of group g: returns 0.25 and 0, mean 0.125, unbiased std 0.125·√2
  const z = 0.125 / (0.125 * Math.SQRT2);
  near(a[0][0], z, 1e-5);
  near(a[1][0], -z, 1e-5);
  assert.deepEqual([a[0][1], a[0][2], a[1][1], a[2][0]], [0, 0, 0, 0]);
  const none = gigpoStepAdvantages([[1, 2]], [[undefined, undefined]], ["g"]);
  assert.deepEqual(none, [[0, 0]]);
});

test("GiGPO on datum positions: A_traj + w·A_step on each step's action tokens, steps across datums", () => {
  // trajectory 0: two datums (its prompt rebuilt before step 1), steps 0 and 1; trajectory 1: one datum, step 0.
  const steps = [
    [-1, 0, 0],
    [-1, -1, 1, 1],
    [-1, 0, 0, 0],
  ];
  const rewards = [
    [0, 0, 0],
    [0, 0, 0, 1],
    [0, 0, 0, 0],
  ];
  const out = computeAdvantages("gigpo", {
    trajectories: [
      { group: 7, score: 1, anchors: ["start", "kitchen"] },
      { group: 7, score: 0, anchors: ["start"] },
    ],
    trajectory: [0, 0, 1],
    mask: steps.map((r) => r.map((k) => (k >= 0 ? 1 : 0))),
    rewards,
    steps,
    gigpo: { stepWeight: 0.5, normalize: "mean" },
  });
  // A_traj = ±0.5 (mean-only); step returns: t0 [1, 1], t1 [0]; anchor "start": 1 and 0 → ±0.5; "kitchen" alone → 0
  nearRows(out.advantages, [
    [0, 0.5 + 0.5 * 0.5, 0.75],
    [0, 0, 0.5, 0.5],
    [0, -0.5 - 0.25, -0.75, -0.75],
  ]);
});
