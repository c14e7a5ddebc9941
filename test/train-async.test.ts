/**
 * Asynchronous training (train.async, src/train/async/) with no model: the recipe's checks, the
 * staleness rules by hand, the bounded producer on its own, and the trainer over a scripted engine
 * whose training can be held until the producer has drawn a given number of samples, so each test
 * fixes the interleaving by counting work, never by timing: the staleness bound (onStale wait and
 * drop), the version on every datum, lockstep unchanged without train.async, and a resume.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../src/train/load-config.js";
import { Trainer } from "../src/train/trainer.js";
import { RolloutProducer } from "../src/train/async/rollout-producer.js";
import { judgeStaleness, lookahead, trajectoryVersion } from "../src/train/async/staleness.js";
import type { Trajectory } from "../src/agent/trajectory.js";
import { toyTask } from "./fixtures/toy-task.js";
import { rowOf, tracingEngines, type TracingEngine } from "./fixtures/tracing-engine.js";
import { tempDir } from "./helpers.js";

const ASYNC_KEYS = [
  "policy_version",
  "staleness_mean",
  "staleness_max",
  "stale_groups_dropped",
  "learner_wait_s",
  "producer_wait_s",
  "iteration_s",
];

/** 2 rows x 4 samples = 8 one-turn episodes (8 sample calls) per batch; 2 mini-batches = 2 optimizer steps per iteration. */
const config = (iterations: number, async?: object) =>
  parseConfig({
    rollout: { n: 4, maxTurns: 1, maxTokensPerTurn: 8, maxTotalTokens: 512 },
    algorithm: { filterConstantGroups: false },
    train: {
      iterations,
      batchSize: 2,
      miniBatches: 2,
      valEvery: 0,
      checkpointEvery: 1,
      keepCheckpoints: 2,
      samplesPerIteration: 1,
      ...(async ? { async } : {}),
    },
  });

const metrics = (out: string) =>
  readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);

const ticks = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

/** A trajectory of `row` whose steps were sampled at `versions` (undefined: not recorded). */
function traj(row: number, versions: (number | undefined)[]): Trajectory {
  return {
    id: `r${row}`,
    rowIndex: row,
    sampleIndex: 0,
    steps: versions.map((v) => ({
      extendsPrevious: false,
      context: [1],
      action: [2],
      logprobs: [-1],
      stopReason: "stop" as const,
      observation: [],
      reward: 0,
      done: true,
      toolCalls: [],
      info: {},
      timing: { sampleMs: 0, envMs: 0 },
      ...(v !== undefined ? { policyVersion: v } : {}),
    })),
    reward: 0,
    endReason: "done",
    metrics: {
      turns: 1,
      actionTokens: 1,
      observationTokens: 0,
      finalTokens: 2,
      toolCalls: 0,
      toolErrors: {} as Trajectory["metrics"]["toolErrors"],
      wallMs: 0,
    },
  };
}

test("train.async is checked in one line naming the field", () => {
  const bad = (train: object) => () => parseConfig({ train });
  assert.throws(bad({ async: { maxStaleness: 0 } }), /config: train\.async\.maxStaleness: .*>0|too small/);
  assert.throws(
    bad({ async: { maxStaleness: 1, onStale: "later" } }),
    /train\.async\.onStale: must be one of "drop", "wait"/,
  );
  assert.throws(bad({ async: { maxStaleness: 1, ahead: 2 } }), /unknown key 'train\.async\.ahead'/);
  assert.throws(
    bad({ miniBatches: 2, async: { maxStaleness: 1 } }),
    /config: train\.async\.maxStaleness: 1 is below the optimizer steps of one iteration .* = 2\), .*give at least 2, or onStale drop$/,
  );
  // drop may run ahead of a bound below one iteration's steps (it drops what comes out too old).
  assert.equal(
    parseConfig({ train: { miniBatches: 2, async: { maxStaleness: 1, onStale: "drop" } } }).train.async?.maxStaleness,
    1,
  );
  assert.deepEqual(parseConfig({ train: { async: { maxStaleness: 3 } } }).train.async, {
    maxStaleness: 3,
    onStale: "wait",
  });
  assert.equal(parseConfig({}).train.async, undefined);
});

test("staleness by hand: a trajectory is as old as its oldest step, a group as its oldest trajectory", () => {
  assert.equal(trajectoryVersion(traj(0, [5, 3, 4]), 0), 3);
  assert.equal(
    trajectoryVersion(traj(0, [5, undefined]), 2),
    2,
    "a step without a version counts as the batch's start",
  );
  assert.equal(lookahead({ maxStaleness: 5, onStale: "wait" }, 2), 2);
  assert.equal(lookahead({ maxStaleness: 5, onStale: "drop" }, 2), 5);
  // Learner at version 10, k = 2: row 0's trajectories are 0 and 1 behind (kept); row 1 has one 3 behind (its group goes).
  const batch = [traj(0, [10]), traj(0, [9, 10]), traj(1, [8]), traj(1, [7, 9])];
  const v = judgeStaleness(batch, { version: 10, maxStaleness: 2, fallback: 0 });
  assert.deepEqual(
    v.kept.map((t) => t.rowIndex),
    [0, 0],
  );
  assert.equal(v.staleGroups, 1);
  assert.equal(v.mean, 0.5);
  assert.equal(v.max, 1);
  const none = judgeStaleness([traj(3, [1])], { version: 9, maxStaleness: 2, fallback: 0 });
  assert.deepEqual([none.kept.length, none.staleGroups, none.mean, none.max], [0, 1, 0, 0]);
});

test("the producer starts batch i once the learner has finished i - 1 - lookahead, and hands batches over in order", async () => {
  let learnerDone = 0;
  const started: { it: number; learnerDone: number }[] = [];
  const p = new RolloutProducer<number>({
    first: 1,
    last: 6,
    lookahead: 2,
    produce: async (it) => {
      started.push({ it, learnerDone });
      await ticks(1);
      return it * 10;
    },
  });
  p.start();
  await ticks(30);
  assert.deepEqual(
    started.map((s) => s.it),
    [1, 2, 3],
    "the batch the learner is about to take and 2 ahead",
  );
  for (let it = 1; it <= 6; it++) {
    const got = await p.take(it);
    assert.equal(got.value, it * 10);
    learnerDone = it;
    p.finished(it);
    await ticks(30);
    assert.equal(started.length, Math.min(6, it + 3), `after iteration ${it}`);
  }
  for (const s of started) assert.ok(s.learnerDone >= s.it - 1 - 2, `batch ${s.it} started at ${s.learnerDone}`);
  await p.stop();
  await assert.rejects(p.take(7), /no batch after iteration 6/);
});

test("a failed batch reaches the learner when it takes it; stop aborts the batch in production", async () => {
  const failing = new RolloutProducer<number>({
    first: 1,
    last: 4,
    lookahead: 3,
    produce: async (it) => {
      if (it === 2) throw new Error("env broke");
      return it;
    },
  });
  assert.equal((await failing.take(1)).value, 1);
  await assert.rejects(failing.take(2), /env broke/);
  await assert.rejects(failing.take(3), /env broke/);

  let aborted = 0;
  const stopping = new RolloutProducer<number>({
    first: 1,
    last: 4,
    lookahead: 0,
    produce: (_it, signal) =>
      new Promise((_res, rej) => signal.addEventListener("abort", () => (aborted++, rej(signal.reason)))),
  });
  stopping.start();
  await ticks(5);
  await stopping.stop();
  assert.equal(aborted, 1, "the batch in production saw the abort");
  await assert.rejects(stopping.take(1), /stopped/);
});

/**
 * Holds each iteration's first forwardBackward until the next batch has been sampled (8 samples a
 * batch), then for 30 more turns of the event loop: time enough for a producer allowed further
 * ahead to start the batch after it (which the test would see).
 */
function holdUntilNextBatch(iterations: number) {
  return (e: TracingEngine) => {
    e.holdTraining = async (steps) => {
      if (steps % 2 !== 0) return;
      await e.samplesDone(Math.min(8 * (steps / 2 + 2), 8 * iterations));
      await ticks(30);
    };
  };
}

/** At each training call, the version the batch was consumed at (every iteration here takes 0 or 2 steps). */
const consumedAt = (steps: number) => steps - (steps % 2);

test("onStale wait: the producer runs at most floor(k / S) batches ahead, nothing is stale, every datum has its version", async () => {
  const out = tempDir(),
    made: TracingEngine[] = [];
  const t = await Trainer.open(config(4, { maxStaleness: 2, onStale: "wait" }), {
    out,
    task: toyTask(),
    engines: tracingEngines(made, holdUntilNextBatch(4)),
  });
  await t.run();
  await t.close();
  const e = made[0];
  assert.equal(e.sampleSteps.length, 4 * 8);
  // S = 2 steps per iteration, lookahead floor(2 / 2) = 1: batch b starts once iteration b - 2 has trained ...
  e.sampleSteps.forEach((steps, k) => {
    const b = Math.floor(k / 8) + 1;
    assert.ok(steps >= 2 * (b - 2), `sample ${k} of batch ${b} made at ${steps} steps`);
  });
  // ... and it did run ahead: batch b was sampled while iteration b - 1 trained.
  for (const b of [2, 3, 4]) assert.equal(e.sampleSteps[8 * (b - 1)], 2 * (b - 2), `batch ${b}`);
  const m = metrics(out);
  assert.deepEqual(
    m.map((x) => [x.staleness_max, x.stale_groups_dropped, x.policy_version]),
    [
      [0, 0, 0],
      [2, 0, 2],
      [2, 0, 4],
      [2, 0, 6],
    ],
  );
  for (const x of m) for (const k of ASYNC_KEYS) assert.equal(typeof x[k], "number", k);
  assert.equal(e.training.length, 4 * 2);
  for (const call of e.training)
    for (const d of call.datums) {
      assert.equal(typeof d.policyVersion, "number", "every datum records its version");
      assert.ok(consumedAt(call.steps) - d.policyVersion! <= 2, `datum of version ${d.policyVersion} at ${call.steps}`);
    }
});

test("onStale drop: groups more than k versions old are dropped and counted; what trains is within k", async () => {
  const out = tempDir(),
    made: TracingEngine[] = [];
  // Only the first training pass waits, for batch 2: it is then sampled at version 0 and taken at 2.
  const hold = (e: TracingEngine) =>
    (e.holdTraining = (steps) => (steps === 0 ? e.samplesDone(16) : Promise.resolve()));
  const t = await Trainer.open(config(5, { maxStaleness: 1, onStale: "drop" }), {
    out,
    task: toyTask(),
    engines: tracingEngines(made, hold),
  });
  await t.run();
  await t.close();
  const m = metrics(out);
  assert.equal(m[1].stale_groups_dropped, 2, "both groups of batch 2 were 2 versions behind");
  for (const x of m) assert.ok(x.staleness_max <= 1, `iteration ${x.iteration}: staleness ${x.staleness_max}`);
  const e = made[0];
  for (const call of e.training)
    for (const d of call.datums)
      assert.ok(consumedAt(call.steps) - d.policyVersion! <= 1, `datum of version ${d.policyVersion} at ${call.steps}`);
  // An iteration that trains takes 2 passes over its 2 groups; the other groups were counted as dropped.
  assert.equal(
    m.reduce((a, x) => a + x.stale_groups_dropped, 0),
    2 * 5 - e.training.length,
  );
});

test("without train.async nothing changes: no versions, no async metrics, every batch sampled after the previous update", async () => {
  const out = tempDir(),
    made: TracingEngine[] = [];
  const t = await Trainer.open(config(3), { out, task: toyTask(), engines: tracingEngines(made) });
  await t.run();
  await t.close();
  const e = made[0];
  e.sampleSteps.forEach((steps, k) => assert.equal(steps, 2 * Math.floor(k / 8), `sample ${k}`));
  for (const call of e.training) for (const d of call.datums) assert.equal("policyVersion" in d, false);
  for (const x of metrics(out)) for (const k of ASYNC_KEYS) assert.equal(k in x, false, k);
});

/** Per iteration, the rows its training passes saw (each iteration takes 2 steps). */
function rowsByIteration(engines: TracingEngine[], offset = 0): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (const e of engines)
    for (const call of e.training) {
      const it = Math.floor(call.steps / 2) + 1 + offset;
      out.set(
        it,
        [...new Set([...(out.get(it) ?? []), ...call.datums.map(rowOf)])].sort((a, b) => a - b),
      );
    }
  return out;
}

test("a resumed async run trains the same rows per iteration as an uninterrupted one: batches in flight are drawn again", async () => {
  const whole = tempDir(),
    broken = tempDir(),
    a: TracingEngine[] = [],
    b: TracingEngine[] = [];
  const cfg = config(4, { maxStaleness: 2, onStale: "wait" });
  const t = await Trainer.open(cfg, { out: whole, task: toyTask(), engines: tracingEngines(a) });
  await t.run();
  await t.close();

  // Two iterations, the second holding its training until batch 3 is sampled: then the run stops.
  const hold = (e: TracingEngine) =>
    (e.holdTraining = (steps) => (steps === 2 ? e.samplesDone(24) : Promise.resolve()));
  const first = await Trainer.open(cfg, { out: broken, task: toyTask(), engines: tracingEngines(b, hold) });
  await first.step();
  await first.step();
  await first.close();
  assert.ok(b[0].returned >= 24, "batch 3 was sampled before the stop, and is discarded");
  const again = await Trainer.open(cfg, { out: broken, task: toyTask(), engines: tracingEngines(b), resume: true });
  assert.equal(again.iteration, 2);
  await again.run();
  await again.close();

  assert.deepEqual([...rowsByIteration(b).entries()].sort(), [...rowsByIteration(a).entries()].sort());
  assert.deepEqual(
    metrics(broken).map((x) => x.data_position),
    metrics(whole).map((x) => x.data_position),
  );
  const trained = [...rowsByIteration(b).values()].flat();
  assert.equal(trained.length, 4 * 2);
  assert.equal(new Set(trained).size, trained.length, "no row trained twice");
});
