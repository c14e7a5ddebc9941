/**
 * prepareBatch end to end on fixed batches (test/fixtures/prepare-batch-cases.ts):
 * every estimator and option gives bit-for-bit the datums, value datums,
 * reference logprobs and counts that the code before the datum-position layout
 * gave. The digests below were printed by
 *   node --import tsx test/fixtures/prepare-batch-cases.ts
 * run against that code (commit 1b04c8d, where advantages were computed per
 * action token and scattered onto skeleton datums through index maps).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  FIXTURE_CASES,
  canonical,
  digest,
  fixtureModels,
  fixtureTrajectories,
  runCase,
} from "./fixtures/prepare-batch-cases.js";
import { prepareBatch, type BatchModels } from "../src/train/prepare-batch.js";
import type { Datum } from "../src/engine/types.js";
import { parseConfig } from "../src/train/load-config.js";

const BEFORE: Record<string, string> = {
  grpo: "e542782d0f0f5706",
  "grpo, process 0.5, overlong masked, KL k3 in the loss": "ab25a07bb453a381",
  "dr-grpo, no group filter": "783184de93dfde81",
  "rloo, KL k1 in the reward": "e7cdbfe810e8b96d",
  reinforce: "e8b08da74e5044e9",
  "reinforce++, γ 0.9, process 0.3, KL k2 in the reward": "16b8f33065ee5de9",
  "reinforce++-baseline, overlong masked": "87d5fead6946e4f4",
  "gae, γ 0.9, λ 0.8, process 0.5": "be299741d61e485e",
  "gae-step, γ 0.95, λ 0.9, process 0.5, KL k3 in the reward": "99a9417a22c4b40e",
  "gae, no group filter, overlong masked, KL k1 in the loss": "c54993620791d88d",
};

for (const c of FIXTURE_CASES) {
  test(`prepareBatch is unchanged bit for bit: ${c.name}`, async () => {
    assert.equal(digest(canonical(await runCase(c))), BEFORE[c.name]);
  });
}

test("a trajectory split by a context rewrite is one sequence: its datums share the id", async () => {
  const b = await prepareBatch(
    fixtureTrajectories(),
    parseConfig({ algorithm: { estimator: "grpo", filterConstantGroups: false } }),
    {},
    0,
  );
  assert.deepEqual(
    b.kept.map((t) => t.id),
    ["a0", "a1", "a2", "b0", "b1", "c0", "c1", "d0"],
  );
  // b0 and b1 (kept[3], kept[4]) each rewrote their context once: two datums each.
  assert.deepEqual(
    b.datums.map((d) => d.sequence),
    [0, 1, 2, 3, 3, 4, 4, 5, 6, 7],
  );
});

test("by hand: grpo advantages on the action tokens of a split trajectory, 0 on prompt and observation targets", async () => {
  const b = await prepareBatch(
    fixtureTrajectories(),
    parseConfig({ algorithm: { estimator: "dr-grpo" } }),
    fixtureModels,
    0,
  );
  // Group 1, process weight 0 (the default): the scores are the outcomes, the last steps' rewards:
  // b0 0.75, b1 0.2. Dr. GRPO: s − μ.
  const [d0, d1] = b.datums.filter((d) => d.sequence === 3);
  const a = 0.75 - (0.75 + 0.2) / 2;
  assert.deepEqual(d0.targetTokens, [7, 22, 23]);
  assert.deepEqual(d0.advantages, [0, a, a]);
  // Second datum: context [1, 9], step 1's action, its observation, step 2's action.
  assert.deepEqual(d1.targetTokens, [9, 24, 25, 26, 5, 27]);
  assert.deepEqual(d1.advantages, [0, a, a, a, 0, a]);
  assert.deepEqual(d1.weights, [0, 1, 1, 1, 0, 1]);
});

test("loss.offPolicy and loss.tis: the learner scores once; masks judged on the sampler's logprobs; unset, nothing changes", async () => {
  const cfg = (loss: Record<string, unknown>) =>
    parseConfig({ algorithm: { estimator: "grpo", filterConstantGroups: false }, loss });
  const plain = await prepareBatch(fixtureTrajectories(), cfg({}), {}, 0);
  // A learner that agrees with the sampler on every action token except b1's (sequence 4: actions
  // [28] then [29, 30], 3 tokens), where it is 3 nats lower: r = e⁻³ ≈ 0.0498 there, 1 elsewhere.
  // The batch has 29 action tokens (a0 5, a1 3, a2 4, b0 6, b1 3, c0 2, c1 1, d0 5) in 8 sequences.
  const far = (d: Datum, t: number) => d.sequence === 4 && d.weights[t] > 0;
  const rows = new Map(
    plain.datums.map((d) => [
      JSON.stringify([...d.tokens, d.targetTokens[d.targetTokens.length - 1]]),
      [null, ...d.logprobs!.map((q, t) => (far(d, t) ? q - 3 : q))],
    ]),
  );
  let calls = 0;
  const models: BatchModels = {
    learnerLogprobs: async (seqs) => (calls++, seqs.map((s) => rows.get(JSON.stringify(s))!)),
  };
  // Neither configured: the learner is never asked and the batch is the same, bit for bit.
  const none = await prepareBatch(fixtureTrajectories(), cfg({}), models, 0);
  assert.equal(calls, 0);
  assert.equal(canonical(none), canonical(plain));
  assert.equal(none.offPolicy, undefined);
  // seqMask [0.5, 2]: b1's geometric mean e⁻³ is below 0.5, every other sequence's is 1.
  const masked = await prepareBatch(fixtureTrajectories(), cfg({ offPolicy: { seqMask: [0.5, 2] } }), models, 0);
  assert.equal(calls, 1);
  masked.datums.forEach((d, j) => {
    const want = plain.datums[j];
    assert.deepEqual(d.weights, d.sequence === 4 ? want.weights.map(() => 0) : want.weights, `datum ${j} weights`);
    assert.deepEqual({ ...d, weights: [] }, { ...want, weights: [] }, `datum ${j}: nothing else changes`);
  });
  assert.deepEqual(masked.offPolicy, { maskedTokens: 3 / 29, maskedSequences: 1 / 8 });
  // With TIS (cap 2): one scoring serves both; TIS re-anchors on the learner and measures all 29 tokens.
  const both = await prepareBatch(
    fixtureTrajectories(),
    cfg({ tis: { cap: 2 }, offPolicy: { tokenMask: [0.5, 2] } }),
    models,
    0,
  );
  assert.equal(calls, 2);
  const b1 = both.datums.filter((d) => d.sequence === 4);
  assert.deepEqual(
    b1.map((d) => d.weights),
    b1.map((d) => d.weights.map(() => 0)),
  );
  assert.deepEqual(
    both.datums.map((d) => d.logprobs),
    plain.datums.map((d) => d.logprobs!.map((q, t) => (far(d, t) ? q - 3 : q))),
  );
  assert.ok(Math.abs(both.tis!.drift - (3 * 3) / 29) < 1e-12);
  assert.deepEqual(both.offPolicy, { maskedTokens: 3 / 29, maskedSequences: 1 / 8 });
});

/** A teacher for the fixtures: log q(tok) = −(tok mod 4)/4 − 0.125, whatever the context. */
const teacherLp = (tok: number) => -(tok % 4) / 4 - 0.125;
function fixtureTeacher(): { calls: number[][][]; teacherLogprobs: NonNullable<BatchModels["teacherLogprobs"]> } {
  const calls: number[][][] = [];
  return {
    calls,
    teacherLogprobs: async (seqs) => (
      calls.push(seqs),
      seqs.map((s) => s.map((tok, i) => (i === 0 ? null : teacherLp(tok))))
    ),
  };
}

test("algorithm.distill: the teacher's −coef·(s − q) is added on action tokens only, in every datum; every group is kept", async () => {
  const cfg = (distill?: Record<string, unknown>, filterConstantGroups = true) =>
    parseConfig({ algorithm: { estimator: "dr-grpo", filterConstantGroups, ...(distill ? { distill } : {}) } });
  const plain = await prepareBatch(fixtureTrajectories(), cfg(undefined, false), {}, 0);
  const teacher = fixtureTeacher();
  const b = await prepareBatch(fixtureTrajectories(), cfg({ teacher: "unused-dir", coef: 2 }), teacher, 0);
  // The constant group c (c0, c1) is kept despite filterConstantGroups: it carries the teacher's signal.
  assert.deepEqual(
    b.kept.map((t) => t.id),
    ["a0", "a1", "a2", "b0", "b1", "c0", "c1", "d0"],
  );
  assert.equal(b.droppedGroups, 0);
  assert.equal(teacher.calls.length, 1, "one scoring for the batch");
  assert.equal(teacher.calls[0].length, b.datums.length, "every datum, the split trajectories' two included");
  // By hand, b0's second datum (context [1, 9]; step 1 acts [24, 25, 26], observation [5], step 2 acts [27]):
  // its first action token 24 was sampled at s = −((24·7 + 0) mod 13)/10 − 0.05 = −1.25 and the teacher gives
  // q = −(24 mod 4)/4 − 0.125 = −0.125: d = −1.125, so the teacher adds −2·(−1.125) = +2.25 to the task's advantage.
  const j = b.datums.findIndex((d) => d.sequence === 3 && d.targetTokens[1] === 24);
  assert.deepEqual(b.datums[j].targetTokens, [9, 24, 25, 26, 5, 27]);
  const task = plain.datums[j].advantages!;
  assert.ok(Math.abs(b.datums[j].advantages![1] - (task[1] + 2.25)) < 1e-12);
  // The observation target 5 (position 4) and the context target 9 (position 0) get nothing.
  assert.equal(b.datums[j].advantages![4], 0);
  assert.equal(b.datums[j].advantages![0], 0);
  // Everywhere: task advantage + (action token ? −2·(s − q) : 0); nothing else in a datum changes.
  let tokens = 0,
    sumQ = 0,
    sumD = 0;
  b.datums.forEach((d, k) => {
    const want = plain.datums[k];
    d.advantages!.forEach((a, i) => {
      const action = want.weights[i] > 0;
      const s = want.logprobs![i],
        q = teacherLp(want.targetTokens[i]);
      if (action) [tokens, sumQ, sumD] = [tokens + 1, sumQ + q, sumD + (s - q)];
      const expected = want.advantages![i] + (action ? -2 * (s - q) : 0);
      assert.ok(Math.abs(a - expected) < 1e-12, `datum ${k} position ${i}: ${a} vs ${expected}`);
    });
    assert.deepEqual({ ...d, advantages: [] }, { ...want, advantages: [] });
  });
  assert.equal(tokens, 29);
  assert.equal(b.distill!.tokens, 29);
  assert.ok(Math.abs(b.distill!.teacherLogprob - sumQ / 29) < 1e-12);
  assert.ok(Math.abs(b.distill!.reverseKl - sumD / 29) < 1e-12);
  assert.equal(b.distill!.student, "sampler");
  assert.ok(b.distill!.seconds >= 0);
});

test("algorithm.distill with taskReward false: the teacher alone, the estimator not run; with loss.tis the learner is the student", async () => {
  const alone = parseConfig({ algorithm: { distill: { teacher: "unused-dir", taskReward: false } } });
  let valuesAsked = 0;
  const models = { ...fixtureTeacher(), values: async (s: number[][]) => (valuesAsked++, fixtureModels.values!(s)) };
  const b = await prepareBatch(fixtureTrajectories(), alone, models, 0);
  assert.equal(valuesAsked, 0);
  b.datums.forEach((d, k) =>
    d.advantages!.forEach((a, i) => {
      const expected = d.weights[i] > 0 ? -(d.logprobs![i] - teacherLp(d.targetTokens[i])) : 0;
      assert.ok(Math.abs(a - expected) < 1e-12, `datum ${k} position ${i}`);
    }),
  );
  // loss.tis: the learner scores each action token 1 nat below the sampler. The student's logprob is the
  // learner's, s − 1, so the teacher's advantage is −(s − 1 − q); TIS then weights it by e⁻¹ (under the cap).
  const tis = parseConfig({
    algorithm: { distill: { teacher: "unused-dir", taskReward: false } },
    loss: { tis: { cap: 2 } },
  });
  const rows = new Map(
    b.datums.map((d) => [
      JSON.stringify([...d.tokens, d.targetTokens[d.targetTokens.length - 1]]),
      [null, ...d.logprobs!.map((q, t) => (d.weights[t] > 0 ? q - 1 : q))],
    ]),
  );
  const learner = async (seqs: number[][]) => seqs.map((s) => rows.get(JSON.stringify(s))!);
  const c = await prepareBatch(fixtureTrajectories(), tis, { ...fixtureTeacher(), learnerLogprobs: learner }, 0);
  assert.equal(c.distill!.student, "learner");
  c.datums.forEach((d, k) =>
    d.advantages!.forEach((a, i) => {
      const s = b.datums[k].logprobs![i] - 1;
      const expected = d.weights[i] > 0 ? Math.exp(-1) * -(s - teacherLp(d.targetTokens[i])) : 0;
      assert.ok(Math.abs(a - expected) < 1e-12, `datum ${k} position ${i}: ${a} vs ${expected}`);
    }),
  );
});
