import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ADVANTAGE_NAMES,
  advantageEstimator,
  computeAdvantages,
  type AdvantageInput,
} from "../src/rl/advantages/index.js";
import { InputError } from "../src/util/errors.js";

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));

// Two prompts, two samples each, one datum per trajectory with every position an action token;
// each step's reward sits on its last token.
const batch = (): AdvantageInput => ({
  trajectories: [
    { group: "p", score: 1 },
    { group: "p", score: 0 },
    { group: "q", score: 0.5 },
    { group: "q", score: 0.5 },
  ],
  trajectory: [0, 1, 2, 3],
  mask: [[1, 1, 1], [1, 1], [1, 1, 1, 1], [1]],
  steps: [[0, 0, 1], [0, 0], [0, 1, 1, 1], [0]],
  rewards: [[0, 0, 1], [0, 0], [0.2, 0, 0, 0.3], [0.5]],
});

test("the registry holds exactly the documented names", () => {
  assert.deepEqual([...ADVANTAGE_NAMES].sort(), [
    "dr-grpo",
    "gae",
    "gae-step",
    "gigpo",
    "grpo",
    "reinforce",
    "reinforce++",
    "reinforce++-baseline",
    "rloo",
  ]);
  assert.deepEqual(ADVANTAGE_NAMES.filter((n) => advantageEstimator(n).needsValues).sort(), ["gae", "gae-step"]);
});

test("an unknown name is an InputError that lists the allowed names", () => {
  assert.throws(
    () => advantageEstimator("ppo"),
    (e: unknown) => e instanceof InputError && /'ppo'/.test(e.message) && /gae-step/.test(e.hint ?? ""),
  );
  assert.throws(() => advantageEstimator("toString"), InputError);
});

test("every estimator returns one advantage per datum position, all finite, 0 off the mask", () => {
  for (const name of ADVANTAGE_NAMES) {
    // The same batch with a prompt target in front of every datum.
    const b = batch();
    const pad = (rows: readonly (readonly number[])[], x: number) => rows.map((r) => [x, ...r]);
    const input: AdvantageInput = {
      ...b,
      mask: pad(b.mask, 0),
      steps: pad(b.steps!, -1),
      rewards: pad(b.rewards!, 0),
      values: pad(b.mask, 0.1),
      gamma: 0.9,
      lambda: 0.9,
    };
    const out = computeAdvantages(name, input);
    assert.deepEqual(
      out.advantages.map((a) => a.length),
      [4, 3, 5, 2],
      name,
    );
    assert.ok(out.advantages.flat().every(Number.isFinite), name);
    assert.ok(
      out.advantages.every((a) => a[0] === 0),
      name,
    );
  }
});

test("outcome estimators broadcast the trajectory's advantage to all its action tokens, across its datums", () => {
  const out = computeAdvantages("dr-grpo", batch());
  assert.deepEqual(out.advantages, [[0.5, 0.5, 0.5], [-0.5, -0.5], [0, 0, 0, 0], [0]]);
  const r = computeAdvantages("reinforce", { ...batch(), baseline: "batch-mean" });
  assert.ok(close(r.advantages[0][2], 1 - (1 + 0 + 0.5 + 0.5) / 4));
  // Trajectory 0 in two datums with an observation between: the same value on each action token.
  const split = computeAdvantages("dr-grpo", {
    ...batch(),
    trajectory: [0, 0, 1],
    mask: [[0, 1, 0], [1, 1], [1]],
    trajectories: [
      { group: 0, score: 2 },
      { group: 0, score: 0 },
    ],
  });
  assert.deepEqual(split.advantages, [[0, 1, 0], [1, 1], [-1]]);
});

test("reinforce++ through the registry by hand: returns over each trajectory's action tokens", () => {
  const out = computeAdvantages("reinforce++", { ...batch(), gamma: 0.5 });
  // trajectory 2: rewards [0.2, 0, 0, 0.3]
  const G = out.returns![2];
  assert.ok(close(G[0], 0.2 + 0.5 ** 3 * 0.3));
  assert.ok(close(G[3], 0.3));
  assert.deepEqual(out.returns![0], [0.5 * 1 * 0.5, 0.5 * 1, 1]);
  assert.deepEqual(out.returnMask, batch().mask);
});

test("bad inputs are InputErrors that name the field", () => {
  assert.throws(() => computeAdvantages("gae", batch()), /values is required/);
  assert.throws(
    () => computeAdvantages("gae-step", { ...batch(), values: [[0], [0], [0], [0]] }),
    /values\[0\] has 1 positions, mask\[0\] has 3/,
  );
  assert.throws(
    () =>
      computeAdvantages("gae-step", {
        ...batch(),
        values: batch().mask,
        steps: [[0, 0, 1], [-1, 0], [0, 1, 1, 1], [0]],
      }),
    /steps\[1\]\[0\] is -1 where mask is 1/,
  );
  assert.throws(
    () => computeAdvantages("gae-step", { ...batch(), values: batch().mask, steps: undefined }),
    /steps is required/,
  );
  assert.throws(() => computeAdvantages("reinforce++", { ...batch(), rewards: undefined }), /rewards is required/);
  assert.throws(
    () => computeAdvantages("reinforce++", { ...batch(), rewards: [[1], [0, 0], [0, 0, 0, 0], [0]] }),
    InputError,
  );
  assert.throws(
    () => computeAdvantages("grpo", { ...batch(), trajectory: [0, 2, 1, 3] }),
    (e: unknown) =>
      e instanceof InputError &&
      /trajectory\[2\] is 1 after 2/.test(e.message) &&
      /order the datums/.test(e.hint ?? ""),
  );
  assert.throws(
    () => computeAdvantages("grpo", { ...batch(), trajectory: [0, 1, 2, 4] }),
    /trajectory\[3\] must be an index into trajectories/,
  );
  assert.throws(
    () =>
      computeAdvantages("grpo", {
        ...batch(),
        trajectories: [{ group: 0, score: NaN }, ...batch().trajectories.slice(1)],
      }),
    /trajectories\[0\]\.score must be a finite number/,
  );
});
