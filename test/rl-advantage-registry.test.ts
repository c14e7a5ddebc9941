import { test } from "node:test";
import assert from "node:assert/strict";
import { ADVANTAGE_NAMES, advantageEstimator, computeAdvantages, type TrajectoryInput } from "../src/rl/advantages/index.js";
import { InputError } from "../src/util/errors.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));

// Two prompts, two samples each; steps and values per step and per token.
const batch = (): TrajectoryInput[] => [
  { group: "p", score: 1, actionTokens: 3, steps: [{ reward: 0, tokens: 2 }, { reward: 1, tokens: 1 }] },
  { group: "p", score: 0, actionTokens: 2, steps: [{ reward: 0, tokens: 2 }] },
  { group: "q", score: 0.5, actionTokens: 4, steps: [{ reward: 0.2, tokens: 1 }, { reward: 0.3, tokens: 3 }] },
  { group: "q", score: 0.5, actionTokens: 1, steps: [{ reward: 0.5, tokens: 1 }] },
];

test("the registry holds exactly the documented names", () => {
  assert.deepEqual([...ADVANTAGE_NAMES].sort(), ["dr-grpo", "gae", "gae-step", "grpo", "reinforce", "reinforce++", "reinforce++-baseline", "rloo"]);
  assert.deepEqual(ADVANTAGE_NAMES.filter((n) => advantageEstimator(n).needsValues).sort(), ["gae", "gae-step"]);
});

test("an unknown name is an InputError that lists the allowed names", () => {
  assert.throws(() => advantageEstimator("ppo"), (e: unknown) => e instanceof InputError && /'ppo'/.test(e.message) && /gae-step/.test(e.hint ?? ""));
  assert.throws(() => advantageEstimator("toString"), InputError);
});

test("every estimator returns one advantage per action token of each trajectory, all finite", () => {
  for (const name of ADVANTAGE_NAMES) {
    const ts = batch();
    if (name === "gae") ts.forEach((t) => (t.values = new Array(t.actionTokens).fill(0.1)));
    if (name === "gae-step") ts.forEach((t) => (t.values = t.steps!.map(() => 0.1)));
    const out = computeAdvantages(name, { trajectories: ts, gamma: 0.9, lambda: 0.9 });
    assert.deepEqual(out.advantages.map((a) => a.length), [3, 2, 4, 1], name);
    assert.ok(out.advantages.flat().every(Number.isFinite), name);
  }
});

test("outcome estimators broadcast the trajectory's advantage to all its tokens", () => {
  const out = computeAdvantages("dr-grpo", { trajectories: batch() });
  assert.deepEqual(out.advantages, [[0.5, 0.5, 0.5], [-0.5, -0.5], [0, 0, 0, 0], [0]]);
  const r = computeAdvantages("reinforce", { trajectories: batch(), baseline: "batch-mean" });
  assert.ok(close(r.advantages[0][2], 1 - (1 + 0 + 0.5 + 0.5) / 4));
});

test("reinforce++ reads step rewards on each step's last token when tokenRewards are absent", () => {
  const out = computeAdvantages("reinforce++", { trajectories: batch(), gamma: 0.5 });
  // trajectory 2: rewards [0.2, 0, 0, 0.3]
  const G = out.returns![2];
  assert.ok(close(G[0], 0.2 + 0.5 ** 3 * 0.3));
  assert.ok(close(G[3], 0.3));
  assert.deepEqual(out.returns![0], [0.5 * 1 * 0.5, 0.5 * 1, 1]);
});

test("bad inputs are InputErrors that name the field", () => {
  const noValues = batch();
  assert.throws(() => computeAdvantages("gae", { trajectories: noValues }), /trajectories\[0\]\.values is required/);
  const wrongValues = batch();
  wrongValues.forEach((t) => (t.values = [0]));
  assert.throws(() => computeAdvantages("gae-step", { trajectories: wrongValues }), /trajectories\[0\]\.values has 1 entries, expected 2 \(one per step\)/);
  const badSteps = batch();
  badSteps[1].steps = [{ reward: 0, tokens: 5 }];
  assert.throws(() => computeAdvantages("grpo", { trajectories: badSteps }), /trajectories\[1\]\.steps cover 5 action tokens, actionTokens is 2/);
  const badRewards = batch();
  badRewards[0].tokenRewards = [1];
  assert.throws(() => computeAdvantages("reinforce++", { trajectories: badRewards }), InputError);
  const noSteps = batch().map(({ steps: _s, ...t }) => ({ ...t, values: [0] }));
  assert.throws(() => computeAdvantages("gae-step", { trajectories: noSteps }), /steps is required/);
});
