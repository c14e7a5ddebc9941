/**
 * The native engine's decoder (native/model/, src/engine/local/native/decoder.ts) against the TF.js
 * decoder (src/engine/local/tfjs/transformer.ts), the reference: logits, token log-probabilities, the gradient
 * of every parameter, KV-cached decoding (one sequence token by token, and sequences of different
 * cached lengths in one pass), the value head and its gradient; and the native backward against
 * central finite differences of the native forward.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { initBackend, tf } from "../src/engine/local/tfjs/tf-backend.js";
import { tokenLogprobs } from "../src/engine/local/tfjs/train-ops.js";
import { parseModelConfig, presetConfigJson, type ModelConfig } from "../src/model/config.js";
import { Transformer } from "../src/engine/local/tfjs/transformer.js";
import { parameterShapes, randomHostWeights } from "../src/model/parameter-shapes.js";
import type { HostTensor } from "../src/model/safetensors.js";
import { NativeDecoder, transpose } from "../src/engine/local/native/decoder.js";
import { Rng } from "../src/util/rng.js";

before(async () => {
  await initBackend();
});

function config(tied: boolean, extra: Record<string, unknown> = {}): ModelConfig {
  return parseModelConfig(presetConfigJson("tiny", 61, { tie_word_embeddings: tied, ...extra }));
}

/** Qwen3's shape on the tiny preset: per-head q/k norms, no q/k/v bias, head_dim 24 (not 64 / 4), untied head. */
const qwen3 = (): ModelConfig =>
  config(false, { model_type: "qwen3", architectures: ["Qwen3ForCausalLM"], head_dim: 24 });

/** Random weights with norms and biases moved off 1 and 0, so their paths and gradients show. */
function weights(c: ModelConfig, seed: number, head: "lm" | "value" = "lm"): Map<string, HostTensor> {
  const w = randomHostWeights(c, seed, head);
  const rng = new Rng(seed, 999);
  for (const [name, t] of w) {
    if (name.endsWith("norm.weight")) for (let i = 0; i < t.data.length; i++) t.data[i] = 1 + 0.3 * rng.normal();
    if (name.endsWith(".bias") || name === "score.weight")
      for (let i = 0; i < t.data.length; i++) t.data[i] = 0.1 * rng.normal();
  }
  return w;
}

const SEQS = [
  [3, 17, 5, 40, 22, 9, 11],
  [8, 1, 60, 33],
  [12, 12, 7, 2, 59, 31, 4, 4, 19, 50, 6],
];

/** TF.js hidden states (B, T, H) of right-padded sequences and the padded token matrix. */
function tfHidden(m: Transformer, seqs: number[][]) {
  const T = Math.max(...seqs.map((s) => s.length));
  const tok = new Int32Array(seqs.length * T);
  seqs.forEach((s, b) => tok.set(s, b * T));
  return { T, tokens: tf.tensor2d(tok, [seqs.length, T], "int32") };
}

/** Row-major values at the real (unpadded) positions of a (B, T, X) array. */
function realRows(data: Float32Array, seqs: number[][], T: number, X: number): Float32Array {
  const out: number[] = [];
  seqs.forEach((s, b) => {
    for (let t = 0; t < s.length; t++) for (let x = 0; x < X; x++) out.push(data[(b * T + t) * X + x]);
  });
  return Float32Array.from(out);
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

function maxAbs(a: ArrayLike<number>): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]));
  return d;
}

const targetsOf = (seqs: number[][]) => Int32Array.from(seqs.flatMap((s) => s.map((_, t) => s[(t + 1) % s.length])));

for (const [label, makeConfig] of [
  ["tied head", () => config(true)],
  ["untied head", () => config(false)],
  ["Qwen3: q/k norms, head_dim 24, untied head", qwen3],
] as const) {
  test(`native decoder = TF.js decoder: logits, logprobs and every gradient (${label})`, () => {
    const c = makeConfig();
    const tied = c.tieWordEmbeddings;
    const w = weights(c, 7);
    const ref = Transformer.fromHostWeights(c, w, "(test)");
    const nat = NativeDecoder.fromWeights(c, w, "(test)");
    const V = c.vocabSize,
      N = SEQS.reduce((a, s) => a + s.length, 0);

    // logits at every real position
    const { T, tokens } = tfHidden(ref, SEQS);
    const refLogits = tf.tidy(() =>
      ref.logits(ref.forward(tokens).hidden.reshape([SEQS.length * T, -1]) as tf.Tensor2D),
    );
    const want = realRows(refLogits.dataSync() as Float32Array, SEQS, T, V);
    refLogits.dispose();
    const pass = nat.forward(SEQS, true);
    const got = pass.logits(
      Int32Array.from({ length: N }, (_, i) => i),
      V,
    );
    assert.ok(maxAbsDiff(got, want) < 2e-5 * Math.max(1, maxAbs(want)), `logits differ by ${maxAbsDiff(got, want)}`);

    // log-probabilities at temperature 0.7, and the gradient of Σ c·logp
    const temp = 0.7,
      targets = targetsOf(SEQS);
    const rng = new Rng(3);
    const coef = Float32Array.from({ length: N }, () => rng.normal());
    const { logp } = pass.logprobs(targets, temp);
    const padT = new Int32Array(SEQS.length * T),
      padC = new Float32Array(SEQS.length * T);
    let o = 0;
    SEQS.forEach((s, b) =>
      s.forEach((_, t) => {
        padT[b * T + t] = targets[o];
        padC[b * T + t] = coef[o++];
      }),
    );
    let picked: Float32Array | undefined;
    const { grads } = tf.variableGrads(() => {
      const { hidden } = ref.forward(tokens);
      const p = tokenLogprobs(ref.logits(hidden.reshape([SEQS.length * T, -1]) as tf.Tensor2D), padT, temp).picked;
      picked = p.dataSync() as Float32Array;
      return p.mul(tf.tensor1d(padC)).sum() as tf.Scalar;
    }, [...ref.params.values()]);
    assert.ok(maxAbsDiff(logp, realRows(picked!, SEQS, T, 1)) < 2e-5, "logprobs differ");
    pass.backward(coef);
    pass.free();
    const byVar = new Map([...ref.params].map(([name, v]) => [v.name, name]));
    let checked = 0;
    for (const [varName, g] of Object.entries(grads)) {
      const name = byVar.get(varName)!;
      const p = nat.params.get(name)!;
      const refG = g.dataSync() as Float32Array; // TF.js holds linears (in, out), the embedding (V, H)
      const ours = name === "model.embed_tokens.weight" && tied ? transpose(p.grad!, p.shape[0], p.shape[1]) : p.grad!;
      const scale = Math.max(maxAbs(refG), 1e-6);
      assert.ok(
        maxAbsDiff(ours, refG) <= 2e-4 * scale,
        `${name}: gradients differ by ${maxAbsDiff(ours, refG)} (scale ${scale})`,
      );
      checked++;
    }
    assert.equal(checked, parameterShapes(c).size);
    tf.dispose(Object.values(grads));
    tokens.dispose();
    ref.dispose();
  });
}

for (const [label, makeConfig] of [
  ["Qwen2", () => config(true)],
  ["Qwen3", qwen3],
] as const)
  test(`native decoder: KV-cached decoding equals the full forward, one sequence and a ragged batch (${label})`, () => {
    kvCachedDecoding(makeConfig());
  });

function kvCachedDecoding(c: ModelConfig): void {
  const nat = NativeDecoder.fromWeights(c, weights(c, 11), "(test)", { train: "none" });
  const V = c.vocabSize,
    per = nat.kvFloatsPerToken,
    cap = 16;
  const full = nat.forward(SEQS, false);
  const N = SEQS.reduce((a, s) => a + s.length, 0);
  const want = full.logits(
    Int32Array.from({ length: N }, (_, i) => i),
    V,
  );
  full.free();
  const rowOf = (b: number, t: number) => SEQS.slice(0, b).reduce((a, s) => a + s.length, 0) + t;

  // sequence 2: prefill 4 tokens, then one token per pass
  const s = SEQS[2];
  const cache = new Float32Array(per * cap);
  let past = 0;
  const step = (toks: number[]) => {
    const p = nat.extend([toks], Int32Array.of(past), [cache], Int32Array.of(cap));
    const lg = p.logits(Int32Array.of(toks.length - 1), V);
    p.free();
    past += toks.length;
    return lg;
  };
  const check = (lg: Float32Array, t: number) => {
    const r = rowOf(2, t);
    const d = maxAbsDiff(lg, want.subarray(r * V, (r + 1) * V));
    assert.ok(d < 2e-5, `position ${t}: cached logits differ by ${d}`);
  };
  check(step(s.slice(0, 4)), 3);
  for (let t = 4; t < s.length; t++) check(step([s[t]]), t);

  // all three sequences in one pass, each with its own cached length: 3, 1 and 6 cached tokens
  const pasts = [3, 1, 6];
  const caches = SEQS.map(() => new Float32Array(per * cap));
  const caps = Int32Array.from(SEQS, () => cap);
  const pre = nat.extend(
    SEQS.map((q, b) => q.slice(0, pasts[b])),
    Int32Array.from(SEQS, () => 0),
    caches,
    caps,
  );
  pre.free();
  const rest = nat.extend(
    SEQS.map((q, b) => q.slice(pasts[b])),
    Int32Array.from(pasts),
    caches,
    caps,
  );
  let row = 0;
  SEQS.forEach((q, b) => {
    for (let t = pasts[b]; t < q.length; t++) {
      const lg = rest.logits(Int32Array.of(row++), V);
      const r = rowOf(b, t);
      assert.ok(maxAbsDiff(lg, want.subarray(r * V, (r + 1) * V)) < 2e-5, `sequence ${b} position ${t}`);
    }
  });
  rest.free();
}

test("native decoder: the value head and its gradient equal TF.js's", () => {
  const c = config(false);
  const w = weights(c, 5, "value");
  const ref = Transformer.fromHostWeights(c, w, "(test)", "value");
  const nat = NativeDecoder.fromWeights(c, w, "(test)", { head: "value" });
  const { T, tokens } = tfHidden(ref, SEQS);
  const N = SEQS.reduce((a, s) => a + s.length, 0);
  const rng = new Rng(4);
  const dv = Float32Array.from({ length: N }, () => rng.normal());
  const padC = new Float32Array(SEQS.length * T);
  let o = 0;
  SEQS.forEach((s, b) => s.forEach((_, t) => (padC[b * T + t] = dv[o++])));
  let vals: Float32Array | undefined;
  const { grads } = tf.variableGrads(() => {
    const v = ref.values(ref.forward(tokens).hidden.reshape([SEQS.length * T, -1]) as tf.Tensor2D);
    vals = v.dataSync() as Float32Array;
    return v.mul(tf.tensor1d(padC)).sum() as tf.Scalar;
  }, [...ref.params.values()]);
  const pass = nat.forward(SEQS, true);
  assert.ok(maxAbsDiff(pass.values(), realRows(vals!, SEQS, T, 1)) < 2e-5);
  pass.backwardValues(dv);
  pass.free();
  const byVar = new Map([...ref.params].map(([name, v]) => [v.name, name]));
  for (const [varName, g] of Object.entries(grads)) {
    const name = byVar.get(varName)!;
    const refG = g.dataSync() as Float32Array;
    const ours = nat.params.get(name)!.grad!;
    assert.ok(maxAbsDiff(ours, refG) <= 2e-4 * Math.max(maxAbs(refG), 1e-6), `${name}`);
  }
  tf.dispose(Object.values(grads));
  tokens.dispose();
  ref.dispose();
});

/** The native backward at a few entries of `probes` against central finite differences of its forward. */
function checkFiniteDifferences(c: ModelConfig, seed: number, probes: [string, number][]): void {
  const w = weights(c, seed);
  const nat = NativeDecoder.fromWeights(c, w, "(test)");
  const targets = targetsOf(SEQS);
  const N = targets.length;
  const rng = new Rng(8);
  const coef = Float32Array.from({ length: N }, () => rng.normal());
  const lossAt = () => {
    const p = nat.forward(SEQS, false);
    const { logp } = p.logprobs(targets, 1);
    p.free();
    let s = 0;
    for (let i = 0; i < N; i++) s += coef[i] * logp[i];
    return s;
  };
  const pass = nat.forward(SEQS, true);
  pass.logprobs(targets, 1);
  pass.backward(coef);
  pass.free();
  for (const [name, i] of probes) {
    const p = nat.params.get(name)!;
    const data = p.data as Float32Array;
    const x0 = data[i],
      eps = 1e-2;
    data[i] = x0 + eps;
    const up = lossAt();
    data[i] = x0 - eps;
    const down = lossAt();
    data[i] = x0;
    const fd = (up - down) / (2 * eps),
      an = p.grad![i];
    assert.ok(
      Math.abs(fd - an) <= 2e-2 * Math.max(1e-2, Math.abs(an)),
      `${name}[${i}]: finite difference ${fd}, backward ${an}`,
    );
  }
}

test("native decoder: the backward agrees with central finite differences of the forward", () => {
  // a few entries of matrices on every path: attention, MLP, norms, biases, the embedding
  checkFiniteDifferences(config(true), 21, [
    ["model.layers.0.self_attn.q_proj.weight", 5],
    ["model.layers.1.self_attn.k_proj.weight", 77],
    ["model.layers.0.self_attn.v_proj.bias", 3],
    ["model.layers.1.self_attn.o_proj.weight", 1000],
    ["model.layers.0.mlp.gate_proj.weight", 123],
    ["model.layers.1.mlp.down_proj.weight", 4000],
    ["model.layers.0.input_layernorm.weight", 9],
    ["model.norm.weight", 30],
    ["model.embed_tokens.weight", 17 * 61 + 5],
  ]);
});

test("native decoder, Qwen3: the backward through the q/k norms agrees with finite differences", () => {
  checkFiniteDifferences(qwen3(), 23, [
    ["model.layers.0.self_attn.q_norm.weight", 3],
    ["model.layers.1.self_attn.q_norm.weight", 20],
    ["model.layers.0.self_attn.k_norm.weight", 11],
    ["model.layers.1.self_attn.k_norm.weight", 0],
    ["model.layers.0.self_attn.q_proj.weight", 50],
    ["model.layers.1.self_attn.k_proj.weight", 300],
    ["model.layers.0.input_layernorm.weight", 7],
    ["lm_head.weight", 40],
  ]);
});

test("native decoder: with consume, each tensor leaves the loader's map once placed (load peaks near one copy)", () => {
  const c = config(false);
  const w = weights(c, 3);
  const names = [...w.keys()];
  const kept = NativeDecoder.fromWeights(c, new Map(w), "(test)");
  const taken = new Map(w);
  const d = NativeDecoder.fromWeights(c, taken, "(test)", { consume: true });
  assert.equal(taken.size, 0, `left behind: ${[...taken.keys()].join(", ")}`);
  for (const n of names) assert.deepEqual(d.params.get(n)!.data, kept.params.get(n)!.data, n);
});
