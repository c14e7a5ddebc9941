import { test } from "node:test";
import assert from "node:assert/strict";
import { gaeSequence, stepGae, tokenGae } from "../src/rl/advantages/gae.js";
import { computeAdvantages } from "../src/rl/advantages/index.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
const allClose = (a: number[], b: number[], tol = 1e-12) =>
  a.length === b.length && a.every((x, i) => close(x, b[i], tol));

test("token GAE by hand: γ = 0.9, λ = 0.8, three action tokens", () => {
  const { advantages, returns } = gaeSequence([0, 0, 1], [0.5, 0.4, 0.6], 0.9, 0.8);
  const a2 = 1 + 0.9 * 0 - 0.6; // δ2, V after the last token is 0
  const a1 = 0 + 0.9 * 0.6 - 0.4 + 0.9 * 0.8 * a2;
  const a0 = 0 + 0.9 * 0.4 - 0.5 + 0.9 * 0.8 * a1;
  assert.ok(allClose(advantages, [a0, a1, a2]));
  assert.ok(close(a0, -0.14 + 0.72 * (0.14 + 0.72 * 0.4)));
  assert.ok(allClose(returns, [a0 + 0.5, a1 + 0.4, a2 + 0.6]));
});

test("token GAE with λ = 1, γ = 1, zero values is the reward-to-go", () => {
  const r = [0.5, -1, 0, 2, 0.25];
  const { advantages } = gaeSequence(r, [0, 0, 0, 0, 0], 1, 1);
  assert.ok(allClose(advantages, [0.5 - 1 + 0 + 2 + 0.25, -1 + 0 + 2 + 0.25, 0 + 2 + 0.25, 2 + 0.25, 0.25]));
});

test("token GAE with λ = 0 is the one-step TD error", () => {
  const { advantages } = gaeSequence([1, 2], [3, 5], 0.5, 0);
  assert.ok(allClose(advantages, [1 + 0.5 * 5 - 3, 2 + 0.5 * 0 - 5]));
});

test("token GAE whitens over every action token of the batch; returns use unwhitened A", () => {
  // γ = λ = 1, V = 0: raw A = reward-to-go = [[1, 1, 1], [2, 2]]; μ = 7/5.
  const rewards = [
    [0, 0, 1],
    [0, 2],
  ];
  const values = [
    [0, 0, 0],
    [0, 0],
  ];
  const raw = tokenGae(rewards, values, { gamma: 1, lambda: 1, whiten: false });
  assert.deepEqual(raw.advantages, [
    [1, 1, 1],
    [2, 2],
  ]);
  const w = tokenGae(rewards, values, { gamma: 1, lambda: 1 });
  const mu = 7 / 5;
  const sd = Math.sqrt((3 * (1 - mu) ** 2 + 2 * (2 - mu) ** 2) / (5 - 1) + 1e-8);
  assert.ok(allClose(w.advantages[0], [(1 - mu) / sd, (1 - mu) / sd, (1 - mu) / sd]));
  assert.ok(allClose(w.advantages[1], [(2 - mu) / sd, (2 - mu) / sd]));
  assert.deepEqual(w.returns, [
    [1, 1, 1],
    [2, 2],
  ]);
});

test("step GAE by hand on a 3-step trajectory: γ = 0.9, λ = 0.95", () => {
  const r = [0, 0.5, 1],
    v = [0.2, 0.3, 0.4];
  const raw = stepGae([r], [v], { gamma: 0.9, lambda: 0.95, whiten: false });
  const a2 = 1 - 0.4; // V_T = 0
  const a1 = 0.5 + 0.9 * 0.4 - 0.3 + 0.9 * 0.95 * a2;
  const a0 = 0 + 0.9 * 0.3 - 0.2 + 0.9 * 0.95 * a1;
  assert.ok(allClose(raw.advantages[0], [a0, a1, a2]));
  assert.ok(close(a1, 0.56 + 0.855 * 0.6));
  assert.ok(allClose(raw.returns[0], [a0 + 0.2, a1 + 0.3, a2 + 0.4]));

  // Whitened over the steps: (A − μ)/(σ + 1e-8), σ unbiased.
  const w = stepGae([r], [v], { gamma: 0.9, lambda: 0.95 });
  const mu = (a0 + a1 + a2) / 3;
  const sigma = Math.sqrt(((a0 - mu) ** 2 + (a1 - mu) ** 2 + (a2 - mu) ** 2) / 2);
  assert.ok(
    allClose(w.advantages[0], [(a0 - mu) / (sigma + 1e-8), (a1 - mu) / (sigma + 1e-8), (a2 - mu) / (sigma + 1e-8)]),
  );
  assert.ok(allClose(w.returns[0], raw.returns[0]));
});

test("gae-step via the registry, on datum positions: step reward = sum of its token rewards, value at its first token, A broadcast to its tokens", () => {
  // One datum: a prompt target, step 0 (2 tokens), an observation, step 1 (3 tokens), an observation, step 2 (1 token).
  // Values off each step's first token (9) are never read.
  const out = computeAdvantages("gae-step", {
    gamma: 0.9,
    lambda: 0.95,
    whiten: false,
    trajectories: [{ group: 0, score: 1 }],
    trajectory: [0],
    mask: [[0, 1, 1, 0, 1, 1, 1, 0, 1]],
    steps: [[-1, 0, 0, -1, 1, 1, 1, -1, 2]],
    rewards: [[0, 0, 0, 0, 0.2, 0, 0.3, 0, 1]],
    values: [[9, 0.2, 9, 9, 0.3, 9, 9, 9, 0.4]],
  });
  const a2 = 1 - 0.4;
  const a1 = 0.2 + 0.3 + 0.9 * 0.4 - 0.3 + 0.9 * 0.95 * a2;
  const a0 = 0.9 * 0.3 - 0.2 + 0.9 * 0.95 * a1;
  assert.ok(allClose(out.advantages[0], [0, a0, a0, 0, a1, a1, a1, 0, a2]));
  assert.ok(allClose(out.returns![0], [0, a0 + 0.2, 0, 0, a1 + 0.3, 0, 0, 0, a2 + 0.4]));
  assert.deepEqual(out.returnMask, [[0, 1, 0, 0, 1, 0, 0, 0, 1]]);
});

test("gae via the registry: a trajectory split into two datums is one sequence, observation positions skipped", () => {
  // Action tokens at [0][1], [0][3] and [1][1]; reward 2 on the last; an observation at [0][2].
  const split = computeAdvantages("gae", {
    gamma: 0.9,
    lambda: 0.8,
    whiten: false,
    trajectories: [{ group: 0, score: 2 }],
    trajectory: [0, 0],
    mask: [
      [0, 1, 0, 1],
      [0, 1],
    ],
    rewards: [
      [0, 0, 0, 0],
      [0, 2],
    ],
    values: [
      [7, 0.5, 7, 0.25],
      [7, 0.75],
    ],
  });
  const a2 = 2 - 0.75;
  const a1 = 0 + 0.9 * 0.75 - 0.25 + 0.9 * 0.8 * a2;
  const a0 = 0 + 0.9 * 0.25 - 0.5 + 0.9 * 0.8 * a1;
  assert.ok(allClose(split.advantages[0], [0, a0, 0, a1]));
  assert.ok(allClose(split.advantages[1], [0, a2]));
  assert.ok(allClose(split.returns![0], [0, a0 + 0.5, 0, a1 + 0.25]));
  assert.deepEqual(split.returnMask, [
    [0, 1, 0, 1],
    [0, 1],
  ]);
  // The same as the unbroken sequence of its three action tokens.
  const compact = gaeSequence([0, 0, 2], [0.5, 0.25, 0.75], 0.9, 0.8);
  assert.deepEqual([split.advantages[0][1], split.advantages[0][3], split.advantages[1][1]], compact.advantages);
});

test("token GAE whitening on datum positions uses the action tokens only, in the same order as unbroken rows", () => {
  const rows = tokenGae(
    [
      [0, 0, 1],
      [0, 2],
    ],
    [
      [0.1, 0.2, 0.3],
      [0.4, 0.5],
    ],
    { gamma: 0.9, lambda: 0.9 },
  );
  const gapped = tokenGae(
    [
      [0, 0, 0, 0, 1],
      [0, 0, 2],
    ],
    [
      [9, 0.1, 0.2, 9, 0.3],
      [9, 0.4, 0.5],
    ],
    {
      gamma: 0.9,
      lambda: 0.9,
      mask: [
        [0, 1, 1, 0, 1],
        [0, 1, 1],
      ],
      trajectory: [0, 1],
    },
  );
  assert.deepEqual(gapped.advantages, [
    [0, ...rows.advantages[0].slice(0, 2), 0, rows.advantages[0][2]],
    [0, ...rows.advantages[1]],
  ]);
});
