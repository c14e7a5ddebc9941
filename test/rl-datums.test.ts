import { test } from "node:test";
import assert from "node:assert/strict";
import { TrajectoryBuilder } from "../src/agent/trajectory.js";
import { gatherActionValues, gatherStepValues, trajectoryDatums } from "../src/rl/datums.js";

const step = (action: number[], logprobs: number[], observation: number[]) => ({
  action, logprobs, observation, stopReason: "stop" as const, reward: 0, done: false, toolCalls: [], info: {}, timing: { sampleMs: 0, envMs: 0 },
});

test("a two-turn trajectory becomes one datum with action tokens weighted, by hand", () => {
  const b = new TrajectoryBuilder("t", 0, 0);
  b.add([1, 2, 3], step([4, 5], [-0.1, -0.2], [6, 7]));
  b.add([1, 2, 3, 4, 5, 6, 7], step([8], [-0.3], [9]));
  const t = b.finish("done");
  const { datums, slots } = trajectoryDatums(t, [0.5, 0.6, 0.7]);
  assert.equal(datums.length, 1);
  const d = datums[0];
  assert.deepEqual(d.tokens, [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(d.targetTokens, [2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(d.weights, [0, 0, 1, 1, 0, 0, 1]);
  assert.deepEqual(d.advantages, [0, 0, 0.5, 0.6, 0, 0, 0.7]);
  assert.deepEqual(d.logprobs, [0, 0, -0.1, -0.2, 0, 0, -0.3]);
  assert.deepEqual(slots, [{ datum: 0, target: 2 }, { datum: 0, target: 3 }, { datum: 0, target: 6 }]);
  // The critic's output at input position i predicts target i: action token 4 is generated from the state after token 3.
  const values = [[10, 11, 12, 13, 14, 15, 16]];
  assert.deepEqual(gatherActionValues(slots, values), [12, 13, 16]);
  assert.deepEqual(gatherStepValues(t, slots, values), [12, 16]);
});

test("a rewritten context starts a new datum; a zero weight masks the trajectory", () => {
  const b = new TrajectoryBuilder("t", 0, 0);
  b.add([1, 2], step([3], [-1], [4]));
  b.add([1, 9], step([5, 6], [-2, -3], [])); // the flow dropped the old turn
  const { datums, slots } = trajectoryDatums(b.finish("done"), [1, 2, 3], 0);
  assert.equal(datums.length, 2);
  assert.deepEqual(datums[0].tokens, [1, 2]);
  assert.deepEqual(datums[0].targetTokens, [2, 3]);
  assert.deepEqual(datums[1].tokens, [1, 9, 5]);
  assert.deepEqual(datums[1].targetTokens, [9, 5, 6]);
  assert.deepEqual(datums[1].advantages, [0, 2, 3]);
  assert.ok(datums.every((d) => d.weights.every((w) => w === 0)));
  assert.deepEqual(slots, [{ datum: 0, target: 1 }, { datum: 1, target: 1 }, { datum: 1, target: 2 }]);
  assert.throws(() => trajectoryDatums(b.finish("done"), [1, 2]), /2 advantages for 3 action tokens/);
});
