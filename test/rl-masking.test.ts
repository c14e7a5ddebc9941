/**
 * Masks: what sits at weight-0 positions (prompt and tool-output targets, their
 * advantages and logprobs, and observation tokens after the last action) must
 * not move the gradient; a group of equal rewards gives no gradient at all.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { initBackend, tf } from "../src/engine/local/tfjs/tf-backend.js";
import { parseModelConfig } from "../src/model/config.js";
import { Transformer } from "../src/engine/local/tfjs/transformer.js";
import { Trainable } from "../src/engine/local/tfjs/trainable.js";
import { policyPass } from "../src/engine/local/tfjs/policy-train.js";
import { resolvedLoss } from "../src/rl/policy-loss.js";
import { grpoAdvantages } from "../src/rl/advantages/grpo.js";
import type { Datum } from "../src/engine/types.js";

const config = parseModelConfig({
  model_type: "qwen2",
  vocab_size: 40,
  hidden_size: 16,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 32,
  tie_word_embeddings: true,
});

before(async () => {
  await initBackend();
});

function gradients(datums: Datum[]): Map<string, Float32Array> {
  const tr = new Trainable(Transformer.random(config, 5));
  policyPass(tr, datums, resolvedLoss({ type: "ppo" }), 1e9);
  const grads = (tr as unknown as { grads: Map<string, tf.Tensor> }).grads;
  const out = new Map([...grads].map(([k, g]) => [k, g.dataSync().slice() as Float32Array]));
  tr.dispose();
  return out;
}

// prompt [1 2 3] → action [4 5] → tool output [6 7] → action [8] → final observation [9 10]
const base: Datum = {
  tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9],
  targetTokens: [2, 3, 4, 5, 6, 7, 8, 9, 10],
  weights: [0, 0, 1, 1, 0, 0, 1, 0, 0],
  advantages: [0, 0, 0.7, 0.7, 0, 0, 0.7, 0, 0],
  logprobs: [0, 0, -3.5, -3.6, 0, 0, -3.7, 0, 0],
};

test("changing targets, advantages and logprobs at masked positions leaves the gradient unchanged", () => {
  const g0 = gradients([base]);
  const masked = base.weights.map((w, i) => (w === 0 ? i : -1)).filter((i) => i >= 0);
  const changed: Datum = {
    ...base,
    targetTokens: base.targetTokens.map((t, i) => (masked.includes(i) ? (t * 7 + 3) % 40 : t)),
    advantages: base.advantages!.map((a, i) => (masked.includes(i) ? -5 + i : a)),
    logprobs: base.logprobs!.map((l, i) => (masked.includes(i) ? -0.01 * i : l)),
    // The observation after the last action is input no weighted target can see (causal attention).
    tokens: base.tokens.map((t, i) => (i === 8 ? 33 : t)),
  };
  const g1 = gradients([changed]);
  for (const [k, g] of g0) assert.deepEqual(g1.get(k), g, k);
  // And a change the loss does see moves it: the advantage of an action token.
  const g2 = gradients([{ ...base, advantages: base.advantages!.map((a, i) => (i === 3 ? -0.7 : a)) }]);
  assert.ok([...g0].some(([k, g]) => g.some((x, i) => x !== g2.get(k)![i])));
});

test("a group whose rewards are all equal contributes no gradient", () => {
  const adv = grpoAdvantages([0.5, 0.5, 0.5], [0, 0, 0]);
  assert.deepEqual(adv, [0, 0, 0]);
  const datums = adv.map((a) => ({ ...base, advantages: base.weights.map((w) => w * a) }));
  for (const g of gradients(datums).values()) assert.ok(g.every((x) => x === 0));
});
