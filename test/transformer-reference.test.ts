/**
 * The tfjs decoder against an independent float64 reference written here in
 * plain TypeScript, reading the weights in Hugging Face names and layout
 * (linear weights (out, in)) from `toHostWeights()`.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { initBackend, tf } from "../src/engine/local/tfjs/tf-backend.js";
import { parseModelConfig, type ModelConfig } from "../src/model/config.js";
import { Transformer, disposeCache, type KVCache } from "../src/engine/local/tfjs/transformer.js";
import { parameterShapes } from "../src/model/parameter-shapes.js";
import { ropeInverseFrequencies } from "../src/model/rope.js";
import { Rng } from "../src/util/rng.js";
import { plainInvFreq, referenceLogits, type RefOptions, type Weights } from "./reference-model.js";

before(async () => {
  await initBackend();
});

// ---------------------------------------------------------------------------
// Helpers

/** Deterministic pseudo-random numbers in [0, 1), for weights and tokens. */
function prng(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.next();
}

/**
 * Weights larger than the 0.02 default init (so attention is far from uniform
 * and RoPE / head mapping mistakes move the logits well above the tolerance),
 * with non-trivial norm weights and biases.
 */
function randomHostWeights(c: ModelConfig, seed: number, scale = 0.25): Weights {
  const r = prng(seed);
  const w: Weights = new Map();
  for (const [name, shape] of parameterShapes(c)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const u = 2 * r() - 1;
      if (name.endsWith("norm.weight")) data[i] = 1 + 0.3 * u;
      else if (name.endsWith(".bias")) data[i] = 0.5 * u;
      else data[i] = scale * u * Math.sqrt(3); // std = scale
    }
    w.set(name, { shape, data });
  }
  return w;
}

function randomTokens(seed: number, B: number, T: number, V: number): number[][] {
  const r = prng(seed);
  return Array.from({ length: B }, () => Array.from({ length: T }, () => Math.floor(r() * V)));
}

/** Logits (B, T, V) of the tfjs model for the batch, as nested arrays. */
function modelLogits(m: Transformer, tokens: number[][]): number[][][] {
  const B = tokens.length,
    T = tokens[0].length,
    V = m.config.vocabSize;
  const data = tf.tidy(() => {
    const { hidden } = m.forward(tf.tensor2d(tokens, [B, T], "int32"));
    return m.logits(hidden.reshape([B * T, -1]) as tf.Tensor2D);
  });
  const flat = data.dataSync();
  data.dispose();
  return Array.from({ length: B }, (_, b) =>
    Array.from({ length: T }, (_, t) => Array.from(flat.subarray((b * T + t) * V, (b * T + t + 1) * V))),
  );
}

function maxAbsDiff(a: ArrayLike<number>[], b: ArrayLike<number>[]): number {
  let m = 0;
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) {
    assert.equal(a[i].length, b[i].length);
    for (let j = 0; j < a[i].length; j++) m = Math.max(m, Math.abs(a[i][j] - b[i][j]));
  }
  return m;
}

function maxAbs(a: ArrayLike<number>[]): number {
  let m = 0;
  for (const r of a) for (let j = 0; j < r.length; j++) m = Math.max(m, Math.abs(r[j]));
  return m;
}

const TOL = 1e-4;

/** Compares model and reference logits for a batch of 2 and returns the max diff. */
function checkAgainstReference(c: ModelConfig, m: Transformer, seed: number, T = 7, o: RefOptions = {}): number {
  const w = m.toHostWeights();
  const toks = randomTokens(seed, 2, T, c.vocabSize);
  const got = modelLogits(m, toks);
  let worst = 0;
  toks.forEach((seq, b) => {
    const ref = referenceLogits(c, w, seq, o);
    // Guard against a vacuous comparison: the logits must not be (near) zero.
    assert.ok(maxAbs(ref) > 0.1, `reference logits too small (${maxAbs(ref)})`);
    worst = Math.max(worst, maxAbsDiff(got[b], ref));
  });
  return worst;
}

function qwen2Config(extra: Record<string, unknown> = {}): ModelConfig {
  return parseModelConfig({
    model_type: "qwen2",
    vocab_size: 48,
    hidden_size: 32,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    intermediate_size: 48,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: true,
    ...extra,
  });
}

/** Qwen3's shape: q/k norms, no bias, an explicit head_dim wider than hidden / heads, untied head. */
function qwen3Config(extra: Record<string, unknown> = {}): ModelConfig {
  return parseModelConfig({
    model_type: "qwen3",
    vocab_size: 40,
    hidden_size: 24,
    head_dim: 12,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    intermediate_size: 36,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    tie_word_embeddings: false,
    attention_bias: false,
    use_sliding_window: false,
    sliding_window: null,
    ...extra,
  });
}

function llamaConfig(extra: Record<string, unknown> = {}): ModelConfig {
  return parseModelConfig({
    model_type: "llama",
    vocab_size: 56,
    hidden_size: 32,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    intermediate_size: 40,
    rms_norm_eps: 1e-5,
    rope_theta: 500000,
    tie_word_embeddings: false,
    ...extra,
  });
}

// ---------------------------------------------------------------------------

test("config parsing: Qwen2 has q/k/v bias and tied head; Llama has neither by default", () => {
  const q = qwen2Config();
  assert.equal(q.qkvBias, true);
  assert.equal(q.tieWordEmbeddings, true);
  assert.equal(q.headDim, 8);
  const l = llamaConfig();
  assert.equal(l.qkvBias, false);
  assert.equal(l.tieWordEmbeddings, false);
  assert.ok(parameterShapes(l).has("lm_head.weight"));
  assert.ok(!parameterShapes(q).has("lm_head.weight"));
});

test("Qwen2 (bias, tied head): logits match the float64 reference", () => {
  const c = qwen2Config();
  const m = Transformer.fromHostWeights(c, randomHostWeights(c, 1), "(test)");
  try {
    const d = checkAgainstReference(c, m, 11);
    assert.ok(d < TOL, `max |diff| ${d}`);
  } finally {
    m.dispose();
  }
});

test("Qwen2 from Transformer.random (default init) matches the reference", () => {
  const c = qwen2Config();
  const m = Transformer.random(c, 5);
  try {
    const w = m.toHostWeights();
    // HF layout: q_proj (out = nh*hd, in = H).
    assert.deepEqual(w.get("model.layers.0.self_attn.q_proj.weight")!.shape, [32, 32]);
    assert.deepEqual(w.get("model.layers.0.mlp.down_proj.weight")!.shape, [32, 48]);
    const toks = randomTokens(3, 2, 6, c.vocabSize);
    const got = modelLogits(m, toks);
    toks.forEach((seq, b) => {
      const ref = referenceLogits(c, w, seq);
      const d = maxAbsDiff(got[b], ref);
      assert.ok(d < TOL, `max |diff| ${d}`);
    });
  } finally {
    m.dispose();
  }
});

test("Qwen3 (q/k norms, explicit head_dim, untied head): config, shapes, and logits match the reference", () => {
  const c = qwen3Config();
  assert.equal(c.qkNorm, true);
  assert.equal(c.qkvBias, false);
  assert.equal(c.headDim, 12);
  const shapes = parameterShapes(c);
  assert.deepEqual(shapes.get("model.layers.1.self_attn.q_norm.weight"), [12]);
  assert.deepEqual(shapes.get("model.layers.1.self_attn.k_norm.weight"), [12]);
  assert.deepEqual(shapes.get("model.layers.0.self_attn.q_proj.weight"), [48, 24]);
  assert.ok(shapes.has("lm_head.weight") && !shapes.has("model.layers.0.self_attn.q_proj.bias"));
  const w = randomHostWeights(c, 31);
  const m = Transformer.fromHostWeights(c, w, "(test)");
  try {
    const d = checkAgainstReference(c, m, 32);
    assert.ok(d < TOL, `max |diff| ${d}`);
    // The norms matter: the reference without them is far off.
    const toks = randomTokens(32, 1, 7, c.vocabSize);
    const plain = referenceLogits({ ...c, qkNorm: false }, w, toks[0]);
    assert.ok(maxAbsDiff(modelLogits(m, toks)[0], plain) > 100 * TOL);
  } finally {
    m.dispose();
  }
});

test("Qwen3 and Qwen2 options the engine does not implement are refused naming the field", () => {
  const refused: [Record<string, unknown>, RegExp][] = [
    [{ use_sliding_window: true, sliding_window: 4096 }, /config\.json.*use_sliding_window.*not implemented/],
    [{ layer_types: ["full_attention", "sliding_attention"] }, /layer_types.*'sliding_attention'/],
    [{ num_experts: 128 }, /num_experts.*mixture-of-experts/],
    [{ rope_scaling: { rope_type: "yarn", factor: 4 } }, /rope_scaling\.rope_type.*unsupported rope scaling 'yarn'/],
  ];
  for (const [extra, re] of refused) assert.throws(() => qwen3Config(extra), re);
  assert.throws(() => qwen2Config({ use_sliding_window: true }), /use_sliding_window/);
  assert.throws(
    () => qwen3Config({ model_type: "qwen3_moe" }),
    /unsupported model_type 'qwen3_moe'; supported: qwen2, qwen3, llama/,
  );
  // what real Qwen3 configs say (sliding window off, full attention everywhere) loads
  assert.equal(qwen3Config({ layer_types: ["full_attention", "full_attention"], max_window_layers: 28 }).qkNorm, true);
});

test("Llama (no bias, separate lm_head): logits match the reference", () => {
  const c = llamaConfig();
  const w = randomHostWeights(c, 2);
  assert.ok(!w.has("model.layers.0.self_attn.q_proj.bias"));
  const m = Transformer.fromHostWeights(c, w, "(test)");
  try {
    const d = checkAgainstReference(c, m, 12);
    assert.ok(d < TOL, `max |diff| ${d}`);
    // The separate head matters: the reference with the tied head would be far off.
    const toks = randomTokens(12, 2, 7, c.vocabSize);
    const tiedRef = referenceLogits({ ...c, tieWordEmbeddings: true }, m.toHostWeights(), toks[0]);
    assert.ok(maxAbsDiff(modelLogits(m, toks)[0], tiedRef) > 100 * TOL);
  } finally {
    m.dispose();
  }
});

test("Llama with attention_bias: biases are applied", () => {
  const c = llamaConfig({ attention_bias: true });
  assert.equal(c.qkvBias, true);
  const m = Transformer.fromHostWeights(c, randomHostWeights(c, 21), "(test)");
  try {
    const d = checkAgainstReference(c, m, 22);
    assert.ok(d < TOL, `max |diff| ${d}`);
  } finally {
    m.dispose();
  }
});

test("explicit head_dim different from hidden / heads matches the reference", () => {
  // hidden 24 with 4 heads of dim 10: q is 40 wide, o_proj maps 40 -> 24.
  const c = qwen2Config({ hidden_size: 24, head_dim: 10, num_attention_heads: 4, num_key_value_heads: 1 });
  assert.equal(c.headDim, 10);
  const shapes = parameterShapes(c);
  assert.deepEqual(shapes.get("model.layers.0.self_attn.q_proj.weight"), [40, 24]);
  assert.deepEqual(shapes.get("model.layers.0.self_attn.k_proj.weight"), [10, 24]);
  assert.deepEqual(shapes.get("model.layers.0.self_attn.o_proj.weight"), [24, 40]);
  const m = Transformer.fromHostWeights(c, randomHostWeights(c, 3), "(test)");
  try {
    const d = checkAgainstReference(c, m, 13, 6);
    assert.ok(d < TOL, `max |diff| ${d}`);
  } finally {
    m.dispose();
  }
});

test("grouped-query attention: query head h reads kv head floor(h / G), not h mod kv", () => {
  const c = qwen2Config({ num_attention_heads: 4, num_key_value_heads: 2 });
  const m = Transformer.fromHostWeights(c, randomHostWeights(c, 4), "(test)");
  try {
    assert.ok(checkAgainstReference(c, m, 14) < TOL);
    // The reference is sensitive to the mapping: the interleaved one disagrees clearly.
    const wrong = checkAgainstReference(c, m, 14, 7, { kvHeadOf: (h, _nh, kv) => h % kv });
    assert.ok(wrong > 100 * TOL, `wrong mapping only differs by ${wrong}`);
  } finally {
    m.dispose();
  }
});

/** Llama 3 frequency rescaling written out per the published formula (float64). */
function llama3InvFreqByHand(
  theta: number,
  hd: number,
  factor: number,
  low: number,
  high: number,
  orig: number,
): number[] {
  return plainInvFreq(theta, hd).map((f) => {
    const wavelen = (2 * Math.PI) / f;
    const lowWavelen = orig / low,
      highWavelen = orig / high;
    if (wavelen < highWavelen) return f; // high frequency: kept
    if (wavelen > lowWavelen) return f / factor; // low frequency: slowed down
    const smooth = (orig / wavelen - low) / (high - low);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}

test("Llama 3 rope_scaling: inverse frequencies by hand, and logits match the reference", () => {
  // hd = 8, theta = 10000: inv_freq = [1, 0.1, 0.01, 0.001], wavelengths 2π·[1, 10, 100, 1000].
  // orig = 64, low 1, high 4: lowWavelen 64, highWavelen 16, so
  //   i=0 (6.28 < 16) kept, i=1 (62.8 in [16, 64]) interpolated with smooth = (64/62.83 - 1)/(4 - 1), i=2, 3 (> 64) divided by 8.
  const json = {
    rope_theta: 10000,
    rope_scaling: {
      rope_type: "llama3",
      factor: 8,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 64,
    },
  };
  const c = llamaConfig(json);
  assert.deepEqual(c.ropeScaling, { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPosition: 64 });
  const smooth = (64 / (2 * Math.PI * 10) - 1) / 3; // (1.0185916 - 1) / 3 = 0.0061972
  const byHand = [1, (1 - smooth) * (0.1 / 8) + smooth * 0.1, 0.01 / 8, 0.001 / 8];
  assert.ok(Math.abs(smooth - 0.0061972) < 1e-7);
  const got = Array.from(ropeInverseFrequencies(c));
  assert.equal(got.length, 4);
  got.forEach((f, i) =>
    assert.ok(
      Math.abs(f - byHand[i]) <= 1e-12 * Math.max(1, byHand[i]),
      `inv_freq[${i}] = ${f}, expected ${byHand[i]}`,
    ),
  );
  const formula = llama3InvFreqByHand(10000, 8, 8, 1, 4, 64);
  formula.forEach((f, i) => assert.ok(Math.abs(f - got[i]) < 1e-15, `formula inv_freq[${i}]`));

  // A wider spread: hd 16 with theta 500000 and the usual 8192 context.
  const c2 = llamaConfig({
    hidden_size: 64,
    rope_scaling: { rope_type: "llama3", factor: 32, original_max_position_embeddings: 8192 },
  });
  const f2 = llama3InvFreqByHand(500000, 16, 32, 1, 4, 8192);
  Array.from(ropeInverseFrequencies(c2)).forEach((f, i) =>
    assert.ok(Math.abs(f - f2[i]) <= 1e-15 * Math.max(1, f2[i]), `c2 inv_freq[${i}]`),
  );
  // No scaling: the plain formula.
  const plain = plainInvFreq(500000, 8);
  Array.from(ropeInverseFrequencies(llamaConfig())).forEach((f, i) => assert.ok(Math.abs(f - plain[i]) <= 1e-15));

  const m = Transformer.fromHostWeights(c, randomHostWeights(c, 6), "(test)");
  try {
    const d = checkAgainstReference(c, m, 15, 8, { invFreq: byHand });
    assert.ok(d < TOL, `max |diff| ${d}`);
    // The scaling must actually be used: the unscaled frequencies disagree.
    const unscaled = checkAgainstReference(c, m, 15, 8, { invFreq: plainInvFreq(10000, 8) });
    assert.ok(unscaled > 100 * TOL, `unscaled frequencies only differ by ${unscaled}`);
  } finally {
    m.dispose();
  }
});

/** Runs the model over `tokens` in chunks of the given sizes with the KV cache; logits (B, T, V). */
function chunkedLogits(m: Transformer, tokens: number[][], chunks: number[]): number[][][] {
  const B = tokens.length,
    V = m.config.vocabSize;
  const out: number[][][] = tokens.map(() => []);
  let cache: KVCache | undefined;
  let pos = 0;
  for (const n of chunks) {
    const chunk = tokens.map((s) => s.slice(pos, pos + n));
    const res = tf.tidy(() => {
      const r = m.forward(tf.tensor2d(chunk, [B, n], "int32"), cache);
      return { logits: m.logits(r.hidden.reshape([B * n, -1]) as tf.Tensor2D), k: r.cache.k, v: r.cache.v };
    });
    const len: number = (cache?.length ?? 0) + n;
    disposeCache(cache);
    cache = { k: res.k as tf.Tensor4D[], v: res.v as tf.Tensor4D[], length: len };
    const flat = res.logits.dataSync();
    res.logits.dispose();
    for (let b = 0; b < B; b++)
      for (let t = 0; t < n; t++) out[b].push(Array.from(flat.subarray((b * n + t) * V, (b * n + t + 1) * V)));
    pos += n;
  }
  assert.equal(cache!.length, pos);
  disposeCache(cache);
  return out;
}

test("KV cache: token-by-token decoding and chunked prefill give the full-forward logits", () => {
  for (const c of [
    qwen2Config(),
    llamaConfig({
      rope_scaling: { rope_type: "llama3", factor: 8, original_max_position_embeddings: 64 },
      rope_theta: 10000,
    }),
  ]) {
    const m = Transformer.fromHostWeights(c, randomHostWeights(c, 7), "(test)");
    try {
      const before = tf.memory().numTensors;
      const toks = randomTokens(16, 2, 9, c.vocabSize);
      const full = modelLogits(m, toks);
      // One token at a time.
      const stepwise = chunkedLogits(m, toks, Array(9).fill(1));
      for (let b = 0; b < 2; b++) {
        const d = maxAbsDiff(stepwise[b], full[b]);
        assert.ok(d < TOL, `token-by-token, seq ${b}: max |diff| ${d}`);
      }
      // A prefill of 4, then chunks of 3 and 2 (several new tokens over a cache).
      const chunked = chunkedLogits(m, toks, [4, 3, 2]);
      for (let b = 0; b < 2; b++) {
        const d = maxAbsDiff(chunked[b], full[b]);
        assert.ok(d < TOL, `chunked, seq ${b}: max |diff| ${d}`);
      }
      // And the full forward is itself right.
      toks.forEach((seq, b) =>
        assert.ok(
          maxAbsDiff(
            full[b],
            referenceLogits(
              c,
              m.toHostWeights(),
              seq,
              c.ropeScaling ? { invFreq: llama3InvFreqByHand(10000, 8, 8, 1, 4, 64) } : {},
            ),
          ) < TOL,
        ),
      );
      assert.equal(tf.memory().numTensors, before, "tensors leaked by cached decoding");
    } finally {
      m.dispose();
    }
  }
});

test("a batch is the same as its sequences run one at a time (no cross-talk between rows)", () => {
  const c = llamaConfig();
  const m = Transformer.fromHostWeights(c, randomHostWeights(c, 8), "(test)");
  try {
    const toks = randomTokens(17, 2, 6, c.vocabSize);
    const both = modelLogits(m, toks);
    for (let b = 0; b < 2; b++) {
      const alone = modelLogits(m, [toks[b]]);
      assert.ok(maxAbsDiff(both[b], alone[0]) < 1e-5);
    }
  } finally {
    m.dispose();
  }
});
