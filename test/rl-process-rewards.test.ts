import { test } from "node:test";
import assert from "node:assert/strict";
import { combineRewards, outcomeTokenRewards, primeNormalize, processTokenRewards } from "../src/rl/process-rewards.js";
import { InputError } from "../src/util/errors.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) =>
  a.length === b.length && a.every((x, i) => close(x, b[i], tol));

// Steps of 3, 2 and 4 action tokens in one datum with no gaps: last tokens at indices 2, 4 and 8.
const traj = {
  steps: [[0, 0, 0, 1, 1, 2, 2, 2, 2]],
  outcome: 1,
  stepRewards: [0.1, 0, -0.2],
  toolCallRewards: [
    { step: 0, reward: 0.5 },
    { step: 1, reward: 0.3 },
    { step: 0, reward: 0.25 },
  ],
};

test("outcome on the last action token; step and tool-call rewards on the last token of their step", () => {
  assert.deepEqual(outcomeTokenRewards(traj), [[0, 0, 0, 0, 0, 0, 0, 0, 1]]);
  const [p] = processTokenRewards(traj);
  assert.ok(allClose(p, [0, 0, 0.1 + 0.5 + 0.25, 0, 0.3, 0, 0, 0, -0.2]));
});

test("on datum positions: prompt and observation targets get nothing; a step's reward follows it into the next datum", () => {
  // Datum 0: prompt target, step 0 (2 tokens), an observation, step 1 (1 token). Datum 1 (a rewritten context): step 2.
  const t = {
    steps: [
      [-1, 0, 0, -1, -1, 1],
      [-1, -1, 2, 2],
    ],
    outcome: 2,
    stepRewards: [0.5, 0.25, -1],
  };
  assert.deepEqual(outcomeTokenRewards(t), [
    [0, 0, 0, 0, 0, 0],
    [0, 0, 0, 2],
  ]);
  assert.deepEqual(processTokenRewards(t), [
    [0, 0, 0.5, 0, 0, 0.25],
    [0, 0, 0, -1],
  ]);
  assert.deepEqual(combineRewards([t], { processWeight: 0.5 })[0], [
    [0, 0, 0.5 * 0.5, 0, 0, 0.5 * 0.25],
    [0, 0, 0, 2 + 0.5 * -1],
  ]);
});

test("combineRewards: outcome + processWeight · process", () => {
  const [[r]] = combineRewards([traj], { processWeight: 0.5 });
  assert.ok(allClose(r, [0, 0, 0.5 * (0.1 + 0.5 + 0.25), 0, 0.5 * 0.3, 0, 0, 0, 1 + 0.5 * -0.2]));
  const [[plain]] = combineRewards([{ steps: [[0, 0]], outcome: -1 }]);
  assert.deepEqual(plain, [0, -1]);
});

test("PRIME normalization by hand: divide by the batch max |reverse cumulative sum| + 1e-6", () => {
  // Row 0 reverse cumsums: 0.3, 0.7, 1.2 → max 1.2 (larger than any single entry); row 1: −1.
  const out = primeNormalize([[[0.5, 0.4, 0.3]], [[-1]]]);
  const d = 0.5 + 0.4 + 0.3 + 1e-6;
  assert.ok(allClose(out[0][0], [0.5 / d, 0.4 / d, 0.3 / d]));
  assert.ok(allClose(out[1][0], [-1 / d]));
  // Sign changes: row [2, −3] has reverse cumsums −3, −1 → max |·| = 3.
  assert.ok(allClose(primeNormalize([[[2, -3]]])[0][0], [2 / (3 + 1e-6), -3 / (3 + 1e-6)]));
  assert.deepEqual(primeNormalize([[[0, 0]]]), [[[0, 0]]]);
  // The reward-to-go runs across a trajectory's datums: 0.5 then 0.7 gives 1.2.
  assert.ok(
    allClose(
      primeNormalize([
        [
          [0.5, 0],
          [0, 0.7],
        ],
      ])[0][0],
      [0.5 / (1.2 + 1e-6), 0],
    ),
  );
});

test("combineRewards with primeNorm normalizes the process rewards only, over the whole batch", () => {
  const a = { steps: [[0, 1]], outcome: 1, stepRewards: [0.5, 0.5] }; // process revcumsum 1, 0.5
  const b = { steps: [[0, 0]], outcome: 0, stepRewards: [-2] }; // revcumsum −2, −2 → batch max 2
  const out = combineRewards([a, b], { primeNorm: true, processWeight: 0.1 });
  assert.ok(allClose(out[0][0], [(0.1 * 0.5) / (2 + 1e-6), 1 + (0.1 * 0.5) / (2 + 1e-6)]));
  assert.ok(allClose(out[1][0], [0, 0 + (0.1 * -2) / (2 + 1e-6)]));
});

test("rewards that cannot be placed are InputErrors", () => {
  assert.throws(
    () => processTokenRewards({ steps: [[0, 0]], outcome: 0, toolCallRewards: [{ step: 1, reward: 1 }] }),
    /step 1 has no action tokens/,
  );
  assert.throws(
    () => processTokenRewards({ steps: [[0, 0]], outcome: 0, toolCallRewards: [{ step: -1, reward: 1 }] }),
    /step -1 is not a step index/,
  );
  assert.throws(
    () => processTokenRewards({ steps: [[0, 0]], outcome: 0, stepRewards: [0, 1] }),
    /stepRewards\[1\]: step 1 has no action tokens/,
  );
  assert.throws(() => outcomeTokenRewards({ steps: [[-1, -1]], outcome: 1 }), InputError);
  assert.deepEqual(processTokenRewards({ steps: [[0, 0]], outcome: 0, stepRewards: [1, 0] }), [[0, 1]]);
});
