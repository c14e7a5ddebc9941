import { test } from "node:test";
import assert from "node:assert/strict";
import { learningRate } from "../src/train/lr-schedule.js";
import { epochOrder, nextBatch } from "../src/train/data-order.js";

test("learning-rate schedules by hand", () => {
  const base = { lr: 1, warmupSteps: 4, minLrRatio: 0.1 };
  assert.equal(learningRate({ ...base, schedule: "constant" }, 0, 10), 1);
  assert.equal(learningRate({ ...base, schedule: "warmup" }, 0, 10), 1 / 4);
  assert.equal(learningRate({ ...base, schedule: "warmup" }, 3, 10), 4 / 4);
  assert.equal(learningRate({ ...base, schedule: "warmup" }, 9, 10), 1);
  // Cosine: after warm-up, from lr down to 0.1 lr at the last step (9); halfway (step 4 + 2.5) is the mean.
  assert.equal(learningRate({ ...base, schedule: "cosine" }, 4, 10), 1);
  assert.ok(Math.abs(learningRate({ ...base, schedule: "cosine" }, 9, 10) - 0.1) < 1e-12);
  const mid = learningRate({ ...base, schedule: "cosine" }, 6, 10); // progress 2/5
  assert.ok(Math.abs(mid - (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * 0.4)))) < 1e-12);
});

test("data order: a permutation per epoch, fixed by the seed; cursors resume exactly", () => {
  const o = epochOrder(10, 7, 0);
  assert.deepEqual(
    [...o].sort((a, b) => a - b),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
  );
  assert.deepEqual(epochOrder(10, 7, 0), o);
  assert.notDeepEqual(epochOrder(10, 7, 1), o);
  assert.notDeepEqual(epochOrder(10, 8, 0), o);
  // Three batches of 4 in one go equal the same batches taken across a "restart".
  let cur = { epoch: 0, position: 0 };
  const all: number[] = [];
  for (let i = 0; i < 3; i++) {
    const b = nextBatch(10, 7, cur, 4);
    all.push(...b.indices);
    cur = JSON.parse(JSON.stringify(b.cursor));
  }
  assert.deepEqual(all.slice(0, 10), o);
  assert.deepEqual(all.slice(10), epochOrder(10, 7, 1).slice(0, 2));
  assert.deepEqual(cur, { epoch: 1, position: 2 });
});
