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
