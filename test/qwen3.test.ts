/**
 * Qwen3 end to end on a tiny model the test writes (per-head q/k norms, no q/k/v bias, an untied
 * head, head_dim 24 where hidden / heads is 16): both backends' logprobs against the float64
 * reference (./reference-model.ts); two LoRA steps on the native engine; the LoRA checkpoint
 * exported as PEFT adapters and as a merged model with its GGUF file, each read back.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { loadModelDir, writeModelDir } from "../src/model/model-dir.js";
import type { ModelConfig } from "../src/model/config.js";
import type { HostTensor } from "../src/model/safetensors.js";
import { readPeftAdapter, type LoraSpec } from "../src/model/peft.js";
import { ggufTensorName } from "../src/model/gguf.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { Datum } from "../src/engine/types.js";
import { runCli } from "../src/cli/main.js";
import { Rng } from "../src/util/rng.js";
import { captureIO, tempDir } from "./helpers.js";
import { ENGINES } from "./engine-internals.js";
import { referenceLogits } from "./reference-model.js";
import { readGguf } from "./gguf-reader.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
let root: string, base: string, config: ModelConfig, w: Map<string, HostTensor>;

const QWEN3 = {
  model_type: "qwen3",
  architectures: ["Qwen3ForCausalLM"],
  head_dim: 24,
  tie_word_embeddings: false,
  attention_bias: false,
  rope_theta: 1000000,
  use_sliding_window: false,
  sliding_window: null,
};

before(async () => {
  root = tempDir("agent-r1-qwen3-");
  const init = join(root, "init");
  await initModel({ preset: "tiny", out: init, seed: 6, overrides: QWEN3 });
  // Larger weights than the 0.02 init and norms off 1, so attention is far from uniform and a
  // missing or misplaced q/k norm moves the logprobs well past the tolerance.
  const m = loadModelDir(init);
  const rng = new Rng(6, 1);
  for (const [name, t] of m.weights)
    for (let i = 0; i < t.data.length; i++)
      t.data[i] = name.endsWith("norm.weight") ? 1 + 0.3 * rng.normal() : t.data[i] * 8;
  base = join(root, "base");
  writeModelDir(base, { config: m.config.raw, weights: m.weights, tokenizerFrom: init });
  ({ config, weights: w } = loadModelDir(base));
});

after(() => rmSync(root, { recursive: true, force: true }));

/** log-softmax(logits)[target], in float64. */
function logprobOf(logits: Float64Array, target: number): number {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let z = 0;
  for (const x of logits) z += Math.exp(x - max);
  return logits[target] - max - Math.log(z);
}

const SEQS = [
  [5, 90, 17, 300, 44, 8, 1021, 9, 77],
  [12, 600, 3, 3, 250],
];

test("Qwen3: the config reads q/k norms, no bias, head_dim 24 and an untied head", () => {
  assert.equal(config.modelType, "qwen3");
  assert.equal(config.qkNorm, true);
  assert.equal(config.qkvBias, false);
  assert.equal(config.headDim, 24);
  assert.notEqual(config.headDim, config.hiddenSize / config.numHeads);
  assert.equal(config.tieWordEmbeddings, false);
  assert.ok(w.has("model.layers.1.self_attn.k_norm.weight") && w.has("lm_head.weight"));
});

for (const backend of ENGINES)
  test(`Qwen3 on the ${backend} backend: logprobs equal the float64 reference`, async () => {
    const e = await LocalEngine.load(base, { workers: 0, backend });
    try {
      const got = await e.computeLogprobs(SEQS);
      let worst = 0,
        spread = 0;
      SEQS.forEach((s, b) => {
        const ref = referenceLogits(config, w, s);
        for (let t = 1; t < s.length; t++) {
          const want = logprobOf(ref[t - 1], s[t]);
          worst = Math.max(worst, Math.abs(got[b][t]! - want));
          spread = Math.max(spread, Math.abs(want + Math.log(config.vocabSize)));
        }
      });
      assert.ok(spread > 0.5, `the reference is near uniform (${spread}), so the check would be vacuous`);
      assert.ok(worst < 1e-4, `logprobs differ from the reference by ${worst}`);
    } finally {
      await e.dispose();
    }
  });

const spec: LoraSpec = {
  rank: 4,
  alpha: 8,
  dropout: 0,
  targets: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"],
  rslora: false,
};

function datums(): Datum[] {
  return SEQS.map((s, i) => ({
    tokens: s.slice(0, -1),
    targetTokens: s.slice(1),
    weights: s.slice(1).map(() => 1),
    advantages: s.slice(1).map(() => (i === 0 ? 1 : -1)),
    logprobs: s.slice(1).map(() => -7),
  }));
}

async function exportOk(...args: string[]): Promise<void> {
  const io = captureIO();
  assert.equal(await runCli(["export", ...args], io), 0, io.stderr.join("\n"));
}

function maxDiff(a: (number | null)[][], b: (number | null)[][]): number {
  let d = 0;
  a.forEach((row, i) => row.forEach((x, j) => x !== null && (d = Math.max(d, Math.abs(x - b[i][j]!)))));
  return d;
}

test("Qwen3 LoRA: two steps, then PEFT adapters and a merged model with GGUF, each read back", { skip }, async () => {
  const e = await LocalEngine.load(base, { workers: 0, backend: "native", lora: { spec, seed: 3 } });
  const loaded: LocalEngine[] = [];
  try {
    const before = await e.computeLogprobs(SEQS);
    for (let i = 0; i < 2; i++) {
      await e.forwardBackward(datums(), { type: "ppo" });
      assert.equal((await e.optimStep({ lr: 2e-2 })).skipped, false);
    }
    const trained = await e.computeLogprobs(SEQS);
    assert.ok(maxDiff(trained, before) > 1e-3, "two LoRA steps did not change the model");
    const ckpt = join(root, "ckpt");
    await e.save(ckpt);

    // PEFT adapters: Qwen3's module names, loaded next to the base, the trained model's logprobs
    const peftDir = join(root, "peft");
    await exportOk("--checkpoint", ckpt, "--out", peftDir);
    const peft = readPeftAdapter(peftDir, config);
    assert.deepEqual(peft.spec.targets, spec.targets);
    assert.ok(peft.adapters.has("model.layers.1.self_attn.k_proj") && peft.adapters.has("lm_head"));
    const fromPeft = await LocalEngine.load(peftDir, { workers: 0, backend: "native" });
    loaded.push(fromPeft);
    assert.ok(maxDiff(await fromPeft.computeLogprobs(SEQS), trained) < 1e-6, "PEFT adapters reload differently");

    // merged full weights, on the TF.js backend, and the same weights in the GGUF file
    const mergedDir = join(root, "merged");
    await exportOk("--checkpoint", ckpt, "--merge", "--gguf", "--out", mergedDir);
    const merged = await LocalEngine.load(mergedDir, { workers: 0, backend: "tfjs" });
    loaded.push(merged);
    assert.ok(maxDiff(await merged.computeLogprobs(SEQS), trained) < 1e-4, "the merged model differs");
    const buf = readFileSync(join(mergedDir, "model.gguf"));
    const g = readGguf(buf);
    assert.equal(g.meta.get("general.architecture"), "qwen3");
    assert.equal(g.meta.get("qwen3.attention.key_length"), 24);
    assert.equal(g.meta.get("qwen3.block_count"), config.numLayers);
    const mergedWeights = loadModelDir(mergedDir).weights;
    for (const hf of [
      "model.layers.0.self_attn.q_norm.weight",
      "model.layers.1.self_attn.k_norm.weight",
      "lm_head.weight",
    ]) {
      const info = g.tensors.find((t) => t.name === ggufTensorName(hf));
      assert.ok(info, `${hf} is in the GGUF file`);
      const want = mergedWeights.get(hf)!;
      assert.deepEqual(info.dims, [...want.shape].reverse());
      const at = g.data + info.offset;
      const got = new Float32Array(buf.buffer.slice(buf.byteOffset + at, buf.byteOffset + at + want.data.byteLength));
      assert.deepEqual(got, want.data, `${hf}: the merged weights`);
    }
    assert.ok(g.tensors.some((t) => t.name === "blk.1.attn_k_norm.weight"));
  } finally {
    await e.dispose();
    for (const x of loaded) await x.dispose();
  }
});
