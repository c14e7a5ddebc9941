/**
 * The memory plan (src/engine/local/native/memory-plan.ts): Qwen2.5-0.5B's figures by hand, the one-line
 * refusal, and the native engine end to end: a budget too small to load, one that samples but
 * refuses to train the full weights (LoRA then fits), and sampling rows held back by what the
 * plan leaves for their keys and values.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseModelConfig } from "../src/model/config.js";
import { QWEN25_05B_CONFIG } from "../bench/qwen-model.js";
import { checkMemoryPlan, planMemory, type MemoryNeeds } from "../src/engine/local/native/memory-plan.js";
import { initModel } from "../src/model/init-model.js";
import { readModelConfig } from "../src/model/model-dir.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { memoryNeeds } from "../src/engine/local/native/native-backend.js";
import type { LoraSpec } from "../src/model/peft.js";
import { InputError } from "../src/util/errors.js";
import { ENGINES } from "./engine-internals.js";

const GiB = 2 ** 30,
  MiB = 2 ** 20;
const QWEN_05B = parseModelConfig(QWEN25_05B_CONFIG);

test("Qwen2.5-0.5B in bf16: the parts by hand, sampling, LoRA and full training", () => {
  // Matrices: the tied embedding, and per layer q, o (896 x 896), k, v (128 x 896), gate, up, down (4864 x 896).
  const matrices = 151936 * 896 + 24 * (2 * 896 * 896 + 2 * 128 * 896 + 3 * 4864 * 896);
  // Vectors: two norms and the q, k, v biases per layer, and the final norm.
  const vectors = 24 * (2 * 896 + 896 + 2 * 128) + 896;
  assert.equal(matrices + vectors, 494_032_768);
  const kvRow = 4 * 24 * 2 * 2 * 64 * 32768; // float32 keys and values of one 32768-token sequence
  const needs: MemoryNeeds = {
    config: QWEN_05B,
    matrixBytes: 2,
    train: "none",
    activationBytes: GiB,
    prefixCacheBytes: 256 * MiB,
    contextBytes: kvRow,
  };
  const sample = planMemory(needs);
  assert.deepEqual(sample, {
    weights: 2 * matrices + 4 * vectors,
    training: 0,
    activations: 0,
    kv: 256 * MiB + kvRow,
    total: 2 * matrices + 4 * vectors + 256 * MiB + kvRow,
  });
  assert.equal((sample.weights / GiB).toFixed(2), "0.92"); // "about 1 GB"
  // LoRA rank 32 on attention and MLP: r x (in + out) floats per module, 16 bytes each (value, gradient, two moments).
  const perLayer = 32 * (2 * (896 + 896) + 2 * (896 + 128) + 3 * (896 + 4864));
  const lora = planMemory({ ...needs, train: "lora", loraFloats: 24 * perLayer });
  assert.equal(lora.training, 16 * 24 * perLayer);
  assert.equal(lora.activations, GiB);
  assert.ok(lora.total < 6 * GiB, `LoRA plan ${(lora.total / GiB).toFixed(2)} GiB is within the issue's 6 GiB`);
  const full = planMemory({ ...needs, train: "full" });
  assert.equal(full.weights, 4 * (matrices + vectors));
  assert.equal(full.training, 12 * (matrices + vectors));
  // The critic adds a float32 copy, trained in full.
  assert.equal(planMemory({ ...needs, train: "full", critic: "full" }).total - full.total, 16 * (matrices + vectors));
  // In a LoRA run the critic shares the base: only its adapters and its value head (896) train.
  const ppo = planMemory({
    ...needs,
    train: "lora",
    loraFloats: 24 * perLayer,
    critic: "lora",
    criticLoraFloats: 24 * perLayer,
  });
  assert.equal(ppo.weights, lora.weights, "one copy of the base weights");
  assert.equal(ppo.total - lora.total, 16 * (24 * perLayer + 896));
  assert.ok(ppo.total < 6 * GiB, `LoRA PPO+GAE plan ${(ppo.total / GiB).toFixed(2)} GiB`);
});

test("over the budget: one line with the total, the parts, the budget and what to change", () => {
  const plan = { weights: 3 * GiB, training: 9 * GiB, activations: GiB, kv: 512 * MiB, total: 13.5 * GiB };
  checkMemoryPlan(plan, { bytes: 14 * GiB, source: "engine.memoryGb" }, { model: "m", doing: "x", hint: "h" });
  assert.throws(
    () =>
      checkMemoryPlan(
        plan,
        { bytes: 8 * GiB, source: "engine.memoryGb" },
        { model: "/models/q", doing: "training the full weights", hint: "train LoRA adapters instead (engine.lora)" },
      ),
    (e: unknown) =>
      e instanceof InputError &&
      e.message ===
        "/models/q: training the full weights needs 13.5 GiB (weights 3.0 GiB, gradients and optimizer state 9.0 GiB, " +
          "a micro-batch's activations 1.0 GiB, KV cache 512 MiB), over the budget of 8.0 GiB (engine.memoryGb); " +
          "train LoRA adapters instead (engine.lora)" &&
      !e.message.includes("\n"),
  );
});

const skip = !ENGINES.includes("native") && "the native addon is not built";
let root: string, tiny: string;
before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-memplan-"));
  tiny = path.join(root, "tiny");
  await initModel({ preset: "tiny", out: tiny, seed: 2 });
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

const spec: LoraSpec = { rank: 4, alpha: 4, dropout: 0, targets: ["q_proj", "v_proj"], rslora: false };
const small = { workers: 0, backend: "native" as const, prefixCacheBytes: 0, microBatchBytes: 64 * 1024 };
const datum = { tokens: [5, 6, 7, 8], targetTokens: [6, 7, 8, 9], weights: [1, 1, 1, 1] };

test("native engine: too small to load; samples but will not train in full; LoRA fits", { skip }, async () => {
  const config = readModelConfig(tiny);
  const total = (train: MemoryNeeds["train"], s?: LoraSpec) => planMemory(memoryNeeds(config, train, small, s)).total;
  const [none, withLora, full] = [total("none"), total("lora", spec), total("full")];
  assert.ok(none < withLora && withLora < full, `${none} < ${withLora} < ${full}`);

  await assert.rejects(
    () => LocalEngine.load(tiny, { ...small, memoryGb: (0.9 * none) / GiB }),
    (e: unknown) =>
      e instanceof InputError && /^.*tiny: loading needs .* over the budget of .*engine\.memoryGb/.test(e.message),
  );
  const memoryGb = (withLora + full) / 2 / GiB;
  const e = await LocalEngine.load(tiny, { ...small, memoryGb });
  try {
    const out = await e.sample([5, 6, 7], { maxTokens: 4, stop: [], seed: 1 });
    assert.equal(out.sequences[0].tokens.length, 4, "sampling works within the budget");
    await assert.rejects(
      () => e.forwardBackward([datum], { type: "cross_entropy" }),
      (err: unknown) =>
        err instanceof InputError &&
        /training the full weights needs .*; train LoRA adapters instead \(engine\.lora\)/.test(err.message),
    );
    // Refused before anything changed: the engine still samples the same tokens.
    const again = await e.sample([5, 6, 7], { maxTokens: 4, stop: [], seed: 1 });
    assert.deepEqual(again.sequences[0].tokens, out.sequences[0].tokens);
  } finally {
    await e.dispose();
  }
  const l = await LocalEngine.load(tiny, { ...small, memoryGb, lora: { spec } });
  try {
    const fb = await l.forwardBackward([datum], { type: "cross_entropy" });
    assert.ok(Number.isFinite(fb.metrics.loss));
    assert.equal((await l.optimStep({ lr: 1e-3 })).skipped, false);
  } finally {
    await l.dispose();
  }
});

test("native engine: rows wait while their keys and values would pass what the plan leaves", { skip }, async () => {
  const config = readModelConfig(tiny);
  const prompts = [0, 1, 2, 3].map((i) => [5 + i, 6, 7]);
  const run = async (memoryGb?: number) => {
    const e = await LocalEngine.load(tiny, { ...small, ...(memoryGb ? { memoryGb } : {}) });
    try {
      const outs = await Promise.all(prompts.map((p, i) => e.sample(p, { maxTokens: 6, stop: [], seed: i })));
      const s = (await e.stats()).scheduler;
      return { tokens: outs.map((o) => o.sequences[0].tokens), rows: s.decodedRows, steps: s.decodeSteps };
    } finally {
      await e.dispose();
    }
  };
  const free = await run();
  assert.ok(free.rows > free.steps, "without a limit the four requests decode together");
  // A budget the plan fills exactly leaves nothing for a second row: one row at a time.
  const tight = await run(planMemory(memoryNeeds(config, "none", small)).total / GiB);
  assert.equal(tight.rows, tight.steps, "one row per decode step");
  assert.deepEqual(tight.tokens, free.tokens, "the same tokens either way");
});

test("engine.maxContextTokens caps the keys and values the plan reserves for one sequence", () => {
  const kvPerToken = 4 * 24 * 2 * 2 * 64;
  assert.equal(memoryNeeds(QWEN_05B, "lora", {}).contextBytes, kvPerToken * 32768);
  assert.equal(memoryNeeds(QWEN_05B, "lora", { maxContextTokens: 4096 }).contextBytes, kvPerToken * 4096);
  // above the model's own limit it changes nothing
  assert.equal(memoryNeeds(QWEN_05B, "lora", { maxContextTokens: 1e6 }).contextBytes, kvPerToken * 32768);
});
