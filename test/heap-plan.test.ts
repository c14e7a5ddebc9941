/**
 * Training that cannot fit the 4 GiB TF.js wasm heap is refused before any tensor work, with one
 * line naming the size and the fix (src/engine/local/tfjs/heap-plan.ts); sampling still works.
 * The plan's arithmetic on Qwen2.5-0.5B's real config, each hint, and one cheap end-to-end probe.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { parameterCount, parseModelConfig } from "../src/model/config.js";
import { activationBytes, packMicroBatches } from "../src/engine/micro-batches.js";
import {
  checkTrainingHeap,
  largestMicroBatch,
  trainingHeapBytes,
  type HeapPlanInput,
} from "../src/engine/local/tfjs/heap-plan.js";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { tf } from "../src/engine/local/tfjs/tf-backend.js";
import { InputError } from "../src/util/errors.js";
import type { Datum } from "../src/engine/types.js";
import { tempDir } from "./helpers.js";

const GiB = 2 ** 30,
  MiB = 2 ** 20;

/** Qwen/Qwen2.5-0.5B-Instruct's config.json (the fields the engine reads). */
const QWEN_05B = parseModelConfig({
  architectures: ["Qwen2ForCausalLM"],
  model_type: "qwen2",
  vocab_size: 151936,
  hidden_size: 896,
  intermediate_size: 4864,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  hidden_act: "silu",
  max_position_embeddings: 32768,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
});
const qwenShape = { vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14 };

const NATIVE =
  "; or train on the native engine (engine.backend: native), which holds the model outside the wasm heap and can train LoRA adapters (engine.lora)";

test("Qwen2.5-0.5B: parameters and one 128-token sequence's activations, by hand", () => {
  // Per layer: q and o 896x896, k and v 896x128 (2 kv heads x head_dim 64), q/k/v biases, SwiGLU 3 x 896x4864, two norms.
  const layer = 896 * 896 * 2 + 896 * 128 * 2 + (896 + 128 * 2) + 3 * 896 * 4864 + 2 * 896;
  assert.equal(parameterCount(QWEN_05B), 24 * layer + 896 + 151936 * 896); // final norm, tied embeddings
  assert.equal(parameterCount(QWEN_05B), 494_032_768);
  // activationBytes: 4 bytes x 128 tokens x (24 layers x (24·896 + 6·4864 + 4·14·128) + 4·151936).
  assert.equal(activationBytes(qwenShape, 128), 4 * 128 * (24 * (24 * 896 + 6 * 4864 + 4 * 14 * 128) + 4 * 151936));
});

test("Qwen2.5-0.5B does not train in one replica: the line names the size and the fix", () => {
  const params = 494_032_768;
  const plan: HeapPlanInput = {
    parameters: [params],
    prefixCacheBytes: 256 * MiB,
    microBatch: { sequences: 1, tokens: 128, activationBytes: activationBytes(qwenShape, 128) },
  };
  const weights = 10.5 * 4 * params,
    activations = 2.75 * activationBytes(qwenShape, 128);
  assert.deepEqual(trainingHeapBytes(plan), {
    weights,
    activations,
    prefixCache: 256 * MiB,
    total: weights + activations + 256 * MiB,
  });
  const gib = (n: number) => (n / GiB).toFixed(2);
  assert.equal(gib(weights + activations + 256 * MiB), "22.19");
  // Room for weights: 4 GiB less 256 MiB headroom less the 256 MiB prefix cache, over 10.5 x 4 bytes per parameter.
  const most = Math.floor((4 * GiB - 256 * MiB - 256 * MiB) / (10.5 * 4) / 1e6);
  assert.equal(most, 89);
  assert.throws(
    () => checkTrainingHeap(plan),
    (e: unknown) =>
      e instanceof InputError &&
      e.message ===
        `training needs ~22.19 GiB of wasm heap (weights ${gib(4 * params)} GiB x10.5 for gradients, Adam moments and working copies` +
          ` + activations ${gib(activations)} GiB for 1 x 128 tokens + prefix cache 0.25 GiB); the TF.js engine holds 4.00 GiB per replica` &&
      e.hint ===
        "train a smaller model (89M parameters at most, this one has 494M; sampling and scoring this one still work)" +
          NATIVE,
  );
  // optimStep has no micro-batch: the weights alone are refused.
  assert.throws(() => checkTrainingHeap({ ...plan, microBatch: undefined }), /^InputError: training needs ~19\.57 GiB/);
  assert.equal(gib(10.5 * 4 * params + 256 * MiB), "19.57");
});

test("what fits passes; each cause gets its own fix", () => {
  const mb = (sequences: number, tokens: number, bytes: number) => ({ sequences, tokens, activationBytes: bytes });
  const fits: HeapPlanInput = {
    parameters: [15e6, 15e6],
    prefixCacheBytes: 256 * MiB,
    microBatch: mb(4, 256, 640 * MiB),
  };
  // 10.5 x 4 x 30e6 bytes of weights + 2.75 x 640 MiB + 256 MiB = 3.14 GiB, under 4 GiB - 256 MiB = 3.75 GiB.
  assert.equal(((10.5 * 4 * 30e6 + 2.75 * 640 * MiB + 256 * MiB) / GiB).toFixed(2), "3.14");
  checkTrainingHeap(fits);
  const hint = (p: HeapPlanInput) => {
    try {
      checkTrainingHeap(p);
    } catch (e) {
      return (e as InputError).hint;
    }
    return "fits";
  };
  // Four sequences of 1280 MiB in all: 4.86 GiB; one alone (320 MiB): 2.28 GiB fits.
  assert.equal(((10.5 * 4 * 30e6 + 2.75 * 1280 * MiB + 256 * MiB) / GiB).toFixed(2), "4.86");
  assert.equal(
    hint({ ...fits, microBatch: mb(4, 256, 1280 * MiB) }),
    "lower engine.microBatchMb, so that a micro-batch holds fewer than 4 sequences of 256 tokens" + NATIVE,
  );
  assert.equal(
    hint({ ...fits, microBatch: mb(1, 8192, 2 * GiB) }),
    "shorten the sequences (rollout.maxTotalTokens): this one has 8192 tokens" + NATIVE,
  );
  // 1.26e9 + 2.75 x 0.8 GiB = 3.37 GiB fits without the cache, not with its 1 GiB (4.37 GiB).
  assert.equal(((10.5 * 4 * 30e6 + 2.75 * 0.8 * GiB) / GiB).toFixed(2), "3.37");
  assert.equal(
    hint({ ...fits, prefixCacheBytes: GiB, microBatch: mb(1, 512, 0.8 * GiB) }),
    "lower engine.prefixCacheMb (now 1024)" + NATIVE,
  );
});

test("the largest micro-batch of a call, as the planner packs it", () => {
  const shape = { vocabSize: 100, hiddenSize: 8, intermediateSize: 16, numLayers: 1, numHeads: 2 };
  // Budget 10 padded tokens: [4, 3] pad to 2 x 4 = 8, then 6 alone, then [2, 2].
  const plan = (lengths: number[]) => packMicroBatches(lengths, 10);
  assert.deepEqual(plan([4, 3, 6, 2, 2]), [[0, 1], [2], [3, 4]]);
  const big = largestMicroBatch(shape, plan, [4, 3, 6, 2, 2])!;
  // 2 x activationBytes(4) = 2 x 4·4·(24·8 + 6·16 + 4·2·4 + 4·100) = 2 x 11520 beats activationBytes(6) = 4·6·(320 + 8·6 + 400) = 18432.
  assert.equal(activationBytes(shape, 4), 4 * 4 * (24 * 8 + 6 * 16 + 4 * 2 * 4 + 4 * 100));
  assert.equal(activationBytes(shape, 6), 4 * 6 * (24 * 8 + 6 * 16 + 4 * 2 * 6 + 4 * 100));
  assert.deepEqual(big, { sequences: 2, tokens: 4, activationBytes: 2 * 11520 });
  assert.equal(largestMicroBatch(shape, plan, []), undefined);
});

let root: string;
let wide: string;
let tiny: string;

before(async () => {
  root = tempDir("agent-r1-heap-");
  wide = join(root, "wide-vocab");
  // Tiny layers under Qwen's vocabulary: 39 MB of weights, but a 2,048-token datum's logits alone are ~5 GiB of tape.
  await initModel({ preset: "tiny", out: wide, seed: 0, overrides: { vocab_size: 151936 } });
  tiny = join(root, "tiny");
  await initModel({ preset: "tiny", out: tiny, seed: 0 });
});

after(() => rmSync(root, { recursive: true, force: true }));

const datum = (len: number): Datum => {
  const s = Array.from({ length: len + 1 }, (_, i) => 3 + (i % 500));
  return { tokens: s.slice(0, -1), targetTokens: s.slice(1), weights: s.slice(1).map(() => 1) };
};

test("end to end: a datum whose tape cannot fit is refused before any tensor work; the engine then trains and samples", async () => {
  const engine = await LocalEngine.load(wide, { workers: 0, backend: "tfjs" });
  try {
    const tensors = tf.memory().numTensors;
    await assert.rejects(engine.forwardBackward([datum(2048)], { type: "cross_entropy" }), (e: unknown) => {
      assert.ok(e instanceof InputError);
      assert.match(
        e.message,
        /^training needs ~\d+\.\d\d GiB of wasm heap \(weights 0\.04 GiB x10\.5 for gradients, .* activations \d+\.\d\d GiB for 1 x 2048 tokens/,
      );
      assert.match(e.hint ?? "", /^shorten the sequences \(rollout.maxTotalTokens\): this one has 2048 tokens/);
      return true;
    });
    assert.equal(tf.memory().numTensors, tensors, "no tensor was made");
    const fb = await engine.forwardBackward([datum(16)], { type: "cross_entropy" });
    assert.ok(Number.isFinite(fb.metrics.loss));
    assert.equal((await engine.optimStep({ lr: 1e-3 })).skipped, false);
    const s = await engine.sample([3, 4, 5], { maxTokens: 4, seed: 1 });
    assert.equal(s.sequences[0].tokens.length, 4);
  } finally {
    await engine.dispose();
  }
});

test("after optimizer steps the heap holds the weights and Adam's two moments, nothing more", async () => {
  const engine = await LocalEngine.load(tiny, { workers: 0, backend: "tfjs" });
  try {
    const weights = engine.trainable.size * 4;
    const before = tf.memory().numBytes;
    for (let step = 0; step < 2; step++) {
      await engine.forwardBackward([datum(16)], { type: "cross_entropy" });
      await engine.optimStep({ lr: 1e-3 });
      // m and v: 2 x the weights. (The zeros each moment starts from once stayed alive as well: 4 x.)
      assert.equal(tf.memory().numBytes - before, 2 * weights);
    }
    // Moments read back from a checkpoint: weights and two moments, through a step, and nothing left once disposed.
    const saved = join(root, "tiny-trained");
    await engine.save(saved);
    const start = tf.memory().numBytes;
    const again = await LocalEngine.load(saved, { workers: 0, backend: "tfjs" });
    assert.equal(tf.memory().numBytes - start, 3 * weights);
    await again.forwardBackward([datum(16)], { type: "cross_entropy" });
    await again.optimStep({ lr: 1e-3 });
    assert.equal(tf.memory().numBytes - start, 3 * weights);
    await again.dispose();
    assert.equal(tf.memory().numBytes, start);
  } finally {
    await engine.dispose();
  }
});
