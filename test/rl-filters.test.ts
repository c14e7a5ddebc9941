import { test } from "node:test";
import assert from "node:assert/strict";
import { dropUniformGroups, maskOverlong } from "../src/rl/filters.js";
import { grpoAdvantages } from "../src/rl/advantages/grpo.js";

test("dropUniformGroups drops groups with all-equal scores (singletons included) and counts them", () => {
  const scores = [1, 1, 1, 0, 1, 2, 3, 3];
  const groups = ["a", "a", "a", "b", "b", "c", "d", "d"];
  assert.deepEqual(dropUniformGroups(scores, groups), { keep: [3, 4], droppedGroups: 3, droppedTrajectories: 6 });
  // The same group gets all-zero advantages, which is why it is dropped.
  assert.deepEqual(grpoAdvantages([1, 1, 1], ["a", "a", "a"]), [0, 0, 0]);
});

test("dropUniformGroups with a tolerance", () => {
  assert.deepEqual(dropUniformGroups([0.5, 0.5 + 1e-12, 0, 1], [0, 0, 1, 1]).keep, [0, 1, 2, 3]);
  assert.deepEqual(dropUniformGroups([0.5, 0.5 + 1e-12, 0, 1], [0, 0, 1, 1], 1e-9).keep, [2, 3]);
});

test("maskOverlong gives weight 0 to length-truncated trajectories", () => {
  assert.deepEqual(maskOverlong(["stop", "length", "stop", "length"]), { weights: [1, 0, 1, 0], masked: 2 });
  assert.deepEqual(maskOverlong([]), { weights: [], masked: 0 });
});
