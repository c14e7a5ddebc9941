import { test } from "node:test";
import assert from "node:assert/strict";
import { TrajectoryBuilder } from "../src/agent/trajectory.js";
import { actionMask, batchDatums, trajectoryDatums } from "../src/rl/datums.js";

const step = (action: number[], logprobs: number[], observation: number[]) => ({
  action,
  logprobs,
  observation,
  stopReason: "stop" as const,
  reward: 0,
  done: false,
  toolCalls: [],
  info: {},
  timing: { sampleMs: 0, envMs: 0 },
});

test("a two-turn trajectory becomes one datum with action tokens weighted and labelled by step, by hand", () => {
  const b = new TrajectoryBuilder("t", 0, 0);
  b.add([1, 2, 3], step([4, 5], [-0.1, -0.2], [6, 7]));
  b.add([1, 2, 3, 4, 5, 6, 7], step([8], [-0.3], [9]));
  const { datums, steps } = trajectoryDatums(b.finish("done"));
  assert.equal(datums.length, 1);
  const d = datums[0];
  assert.deepEqual(d.tokens, [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(d.targetTokens, [2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(d.weights, [0, 0, 1, 1, 0, 0, 1]);
  assert.deepEqual(d.logprobs, [0, 0, -0.1, -0.2, 0, 0, -0.3]);
  assert.equal(d.advantages, undefined); // advantages come later, on these positions
  // Target 2 is token 4, the first token step 0 generated; target 6 is token 8, step 1's.
  assert.deepEqual(steps, [[-1, -1, 0, 0, -1, -1, 1]]);
  assert.deepEqual(actionMask(steps), [[0, 0, 1, 1, 0, 0, 1]]);
});

test("a rewritten context starts a new datum; a zero weight masks the trajectory", () => {
  const b = new TrajectoryBuilder("t", 0, 0);
  b.add([1, 2], step([3], [-1], [4]));
  b.add([1, 9], step([5, 6], [-2, -3], [])); // the flow dropped the old turn
  const { datums, steps } = trajectoryDatums(b.finish("done"), 0);
  assert.equal(datums.length, 2);
  assert.deepEqual(datums[0].tokens, [1, 2]);
  assert.deepEqual(datums[0].targetTokens, [2, 3]);
  assert.deepEqual(datums[1].tokens, [1, 9, 5]);
  assert.deepEqual(datums[1].targetTokens, [9, 5, 6]);
  assert.deepEqual(datums[1].logprobs, [0, -2, -3]);
  assert.ok(datums.every((d) => d.weights.every((w) => w === 0)));
  // The action mask does not depend on the weight: the estimators still see the tokens.
  assert.deepEqual(steps, [
    [-1, 0],
    [-1, 1, 1],
  ]);
});

test("batchDatums: trajectories in order, a split trajectory is one sequence, weights per trajectory", () => {
  const a = new TrajectoryBuilder("a", 0, 0);
  a.add([1], step([2], [-1], []));
  const b = new TrajectoryBuilder("b", 0, 1);
  b.add([1, 2], step([3], [-1], [4]));
  b.add([1, 9], step([5], [-2], []));
  const batch = batchDatums([a.finish("done"), b.finish("done")], [1, 0.5]);
  assert.deepEqual(batch.trajectory, [0, 1, 1]);
  assert.deepEqual(
    batch.datums.map((d) => d.sequence),
    [0, 1, 1],
  );
  assert.deepEqual(
    batch.datums.map((d) => d.weights),
    [[1], [0, 0.5], [0, 0.5]],
  );
  assert.deepEqual(batch.steps, [[0], [-1, 0], [-1, 1]]);
});
