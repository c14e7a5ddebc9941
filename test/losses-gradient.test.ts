/**
 * Policy losses on tensors (policy-train.ts) against the plain-number formulas
 * of src/rl (policy-loss.ts, kl.ts, aggregation.ts), and their gradients
 * against central finite differences.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { initBackend, tf } from "../src/engine/local/tfjs/tf-backend.js";
import { parseModelConfig, type ModelConfig } from "../src/model/config.js";
import { Transformer } from "../src/engine/local/tfjs/transformer.js";
import { parameterShapes } from "../src/model/parameter-shapes.js";
import type { HostTensor } from "../src/model/safetensors.js";
import { Trainable } from "../src/engine/local/tfjs/trainable.js";
import { computeLogprobs, policyForwardBackward } from "../src/engine/local/tfjs/policy-train.js";
import { aggregationCoefficients } from "../src/rl/aggregation.js";
import { klValue } from "../src/rl/kl.js";
import { policyTokenLoss, resolvedLoss, type ResolvedLoss } from "../src/rl/policy-loss.js";
import type { Datum, LossAggregation, LossSpec } from "../src/engine/types.js";
import { packMicroBatches } from "../src/engine/micro-batches.js";
import { Rng } from "../src/util/rng.js";

before(async () => {
  await initBackend();
});

// ---------------------------------------------------------------------------
// Hand-computed values of the plain formulas (these anchor the rest of the file).

const close = (a: number, b: number, tol = 1e-12) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));

test("by hand: policy token losses, KL forms, aggregation coefficients", () => {
  const ppo = resolvedLoss({ type: "ppo" }); // clip 0.2 / 0.2, dual clip 3
  const L = Math.log;
  // Inside the trust region: -r·A.
  assert.ok(close(policyTokenLoss(ppo, L(1.1), 0, 2).loss, -2.2));
  assert.equal(policyTokenLoss(ppo, L(1.1), 0, 2).clipped, false);
  // A > 0, r = 1.5 > 1.2: the clipped term -1.2·0.8 = -0.96 is the max.
  assert.ok(close(policyTokenLoss(ppo, L(1.5), 0, 0.8).loss, -0.96));
  assert.equal(policyTokenLoss(ppo, L(1.5), 0, 0.8).clipped, true);
  // A > 0, r = 0.5 < 0.8: unclipped -0.6 beats -0.96.
  assert.ok(close(policyTokenLoss(ppo, L(0.5), 0, 1.2).loss, -0.6));
  assert.equal(policyTokenLoss(ppo, L(0.5), 0, 1.2).clipped, false);
  // A < 0, r = 2: unclipped 2 beats clipped 1.2 and stays under the dual cap 3.
  assert.ok(close(policyTokenLoss(ppo, L(2), 0, -1).loss, 2));
  // A < 0, r = 5: unclipped 3.5 is capped at -A·3 = 2.1.
  assert.ok(close(policyTokenLoss(ppo, L(5), 0, -0.7).loss, 2.1));
  assert.equal(policyTokenLoss(ppo, L(5), 0, -0.7).clipped, true);
  // A < 0, r = 0.6: clipped 0.8·1.5 = 1.2 beats 0.9.
  assert.ok(close(policyTokenLoss(ppo, L(0.6), 0, -1.5).loss, 1.2));
  // Importance sampling and cross-entropy.
  assert.ok(close(policyTokenLoss(resolvedLoss({ type: "importance_sampling" }), -1, -1 - L(3), 0.5).loss, -1.5));
  assert.ok(close(policyTokenLoss(resolvedLoss({ type: "cross_entropy" }), -2.5, 0, 0).loss, 2.5));
  // CISPO, default bounds [1 - 1, 1 + 3] = [0, 4]: the clipped ratio weights -p·A.
  const cispo = resolvedLoss({ type: "cispo" });
  assert.ok(close(policyTokenLoss(cispo, L(0.5), 0, 2).loss, -0.5 * L(0.5) * 2)); // = ln 2
  assert.equal(policyTokenLoss(cispo, L(0.5), 0, 2).clipped, false);
  assert.ok(close(policyTokenLoss(cispo, L(5), 0, 1).loss, -4 * L(5) * 1)); // r = 5 clipped to 4
  assert.equal(policyTokenLoss(cispo, L(5), 0, 1).clipped, true);
  // DRO: -(p·A - ½·β·(p - q)²) with p = -1, q = -1.5, A = 2, β = 0.05.
  assert.ok(close(policyTokenLoss(resolvedLoss({ type: "dro" }), -1, -1.5, 2).loss, -(-1 * 2 - 0.5 * 0.05 * 0.5 ** 2)));
  // KL forms, p = -1, ref = -1.5.
  assert.ok(close(klValue(-1, -1.5, "k1"), 0.5));
  assert.ok(close(klValue(-1, -1.5, "k2"), 0.125));
  assert.ok(close(klValue(-1, -1.5, "k3"), Math.exp(-0.5) + 0.5 - 1)); // 0.10653
  assert.ok(close(klValue(-1, 2, "k3"), 10)); // e^3 - 4 = 16.09, clamped to 10
  // Aggregations for weights [[1,1,0],[0,1]].
  const w = [
    [1, 1, 0],
    [0, 1],
  ];
  const eq = (got: number[][], want: number[][]) =>
    got.forEach((r, i) => r.forEach((x, j) => assert.ok(close(x, want[i][j]), `${i},${j}: ${x} vs ${want[i][j]}`)));
  const rows = w.map((weights) => ({ weights }));
  eq(aggregationCoefficients(rows, "token-mean"), [
    [1 / 3, 1 / 3, 0],
    [0, 1 / 3],
  ]);
  eq(aggregationCoefficients(rows, "seq-mean-token-sum"), [
    [1 / 2, 1 / 2, 0],
    [0, 1 / 2],
  ]);
  eq(aggregationCoefficients(rows, "seq-mean-token-mean"), [
    [1 / 4, 1 / 4, 0],
    [0, 1 / 2],
  ]);
  eq(aggregationCoefficients(rows, "seq-mean-token-sum-norm", 4), [
    [1 / 4, 1 / 4, 0],
    [0, 1 / 4],
  ]);
  eq(aggregationCoefficients(rows, "sum"), [
    [1, 1, 0],
    [0, 1],
  ]);
});

// ---------------------------------------------------------------------------
// Set-up: a tiny Qwen2 with weights large enough that logprobs vary clearly.

const CFG: ModelConfig = parseModelConfig({
  model_type: "qwen2",
  vocab_size: 40,
  hidden_size: 24,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 32,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: true,
});

/** Deterministic pseudo-random numbers in [0, 1), for weights and tokens. */
function prng(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.next();
}

const HOST: Map<string, HostTensor> = (() => {
  const r = prng(42);
  const w = new Map<string, HostTensor>();
  for (const [name, shape] of parameterShapes(CFG)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const u = 2 * r() - 1;
      data[i] = name.endsWith("norm.weight") ? 1 + 0.2 * u : name.endsWith(".bias") ? 0.2 * u : 0.3 * u; // std ≈ 0.17
    }
    w.set(name, { shape, data });
  }
  return w;
})();

const fresh = () => new Trainable(Transformer.fromHostWeights(CFG, HOST, "(test)"));
const gradsOf = (tr: Trainable) => (tr as unknown as { grads: Map<string, tf.Tensor> }).grads;

/** Three sequences of different lengths; the first two positions of each are "prompt" (weight 0). */
const SEQS: number[][] = (() => {
  const r = prng(7);
  return [9, 6, 8].map((n) => Array.from({ length: n }, () => Math.floor(r() * CFG.vocabSize)));
})();

/**
 * (ratio, advantage, clipped by design) cycled over the weighted tokens, covering every PPO branch
 * for clip 0.2 / dual clip 3. Each ratio sits at least 0.1 in log space from a clip boundary, so
 * the finite-difference perturbations below never cross a kink (checked anyway).
 */
const PATTERN: [number, number, boolean][] = [
  [1.0, 1.0, false], // inside
  [1.5, 0.8, true], // A > 0, r > 1 + ε: clipped, no gradient
  [0.5, 1.2, false], // A > 0, r < 1 - ε: unclipped
  [2.0, -1.0, false], // A < 0, r > 1 + ε, under the dual cap: unclipped
  [5.0, -0.7, true], // A < 0, -rA over -A·3: dual clip, no gradient
  [0.6, -1.5, true], // A < 0, r < 1 - ε: clipped, no gradient
  [0.9, -0.5, false],
  [1.1, 2.0, false],
];
/** ref - p cycled over tokens for the KL term; 3.0 puts k3 on its clamp at 10. */
const REF_OFFSETS = [0.3, -0.5, 0.1, 3.0, -0.2, 0.05];

/** Datums built around the current logprobs `lp` so that the ratios follow PATTERN. */
function makeDatums(lp: number[][]): { datums: Datum[]; designedClipped: number; weighted: number } {
  let k = 0,
    j = 0,
    designedClipped = 0,
    weighted = 0;
  const datums = SEQS.map((s, i) => {
    const n = s.length - 1;
    const d: Datum = {
      tokens: s.slice(0, -1),
      targetTokens: s.slice(1),
      weights: [],
      advantages: [],
      logprobs: [],
      refLogprobs: [],
    };
    for (let t = 0; t < n; t++) {
      const w = t < 2 ? 0 : 1;
      const [r, a, clipped] = w ? PATTERN[k++ % PATTERN.length] : [1, 0.3, false];
      if (w) {
        weighted++;
        if (clipped) designedClipped++;
      }
      d.weights.push(w);
      d.advantages!.push(a);
      d.logprobs!.push(lp[i][t] - Math.log(r));
      d.refLogprobs!.push(lp[i][t] + REF_OFFSETS[j++ % REF_OFFSETS.length]);
    }
    return d;
  });
  return { datums, designedClipped, weighted };
}

/** The loss in plain numbers (float64) from per-token logprobs, with the formulas of src/rl. */
function plainLoss(datums: Datum[], lp: number[][], loss: ResolvedLoss): { loss: number; clipPattern: boolean[] } {
  const coef = aggregationCoefficients(datums, loss.aggregation, loss.normalizer);
  let total = 0;
  const clipPattern: boolean[] = [];
  datums.forEach((d, i) => {
    d.tokens.forEach((_, t) => {
      const p = lp[i][t];
      const pol = policyTokenLoss(loss, p, d.logprobs?.[t] ?? 0, d.advantages?.[t] ?? 0);
      let l = pol.loss;
      if (loss.kl) l += loss.kl.coef * klValue(p, d.refLogprobs![t], loss.kl.form);
      clipPattern.push(pol.clipped);
      total += coef[i][t] * l;
    });
  });
  return { loss: total, clipPattern };
}

/**
 * Target logprobs and next-token entropies straight from the model's logits, with the
 * tempered log-softmax done here in float64 (independent of policy-train.ts).
 */
function logitLogprobs(m: Transformer, temperature: number): { lp: number[][]; entropy: number[][] } {
  const V = CFG.vocabSize;
  const lp: number[][] = [],
    entropy: number[][] = [];
  for (const s of SEQS) {
    const T = s.length - 1;
    const t2 = tf.tidy(() =>
      m.logits(m.forward(tf.tensor2d([s.slice(0, -1)], [1, T], "int32")).hidden.reshape([T, -1]) as tf.Tensor2D),
    );
    const z = t2.dataSync();
    t2.dispose();
    const rowLp: number[] = [],
      rowH: number[] = [];
    for (let t = 0; t < T; t++) {
      const row = Array.from(z.subarray(t * V, (t + 1) * V), (x) => x / temperature);
      const mx = Math.max(...row);
      const lse = mx + Math.log(row.reduce((a, x) => a + Math.exp(x - mx), 0));
      rowLp.push(row[s[t + 1]] - lse);
      rowH.push(-row.reduce((a, x) => a + Math.exp(x - lse) * (x - lse), 0));
    }
    lp.push(rowLp);
    entropy.push(rowH);
  }
  return { lp, entropy };
}

/** Logprobs of every datum's targets under the current weights (forward only). */
function currentLogprobs(tr: Trainable, temperature: number): number[][] {
  return computeLogprobs(tr.model, SEQS, temperature, 10_000).map((r) => r.slice(1) as number[]);
}

const LOSSES: [string, LossSpec][] = [
  ["cross_entropy", { type: "cross_entropy" }],
  ["importance_sampling", { type: "importance_sampling" }],
  ["ppo", { type: "ppo" }],
  ["ppo+k1", { type: "ppo", kl: { coef: 0.3, form: "k1" } }],
  ["ppo+k2", { type: "ppo", kl: { coef: 0.3, form: "k2" } }],
  ["ppo+k3", { type: "ppo", kl: { coef: 0.3, form: "k3" } }],
  ["ppo, temperature 0.8", { type: "ppo", temperature: 0.8 }],
  ["dro", { type: "dro", beta: 0.3 }],
];
const AGGS: LossAggregation[] = [
  "token-mean",
  "seq-mean-token-sum",
  "seq-mean-token-mean",
  "seq-mean-token-sum-norm",
  "sum",
];

/** Tensors whose entries are checked against finite differences (in-memory layout). */
const CHECKED = [
  "model.embed_tokens.weight",
  "model.layers.0.self_attn.q_proj.weight",
  "model.layers.0.self_attn.k_proj.bias",
  "model.layers.0.input_layernorm.weight",
  "model.layers.1.mlp.down_proj.weight",
  "model.layers.1.self_attn.v_proj.weight",
  "model.norm.weight",
];

/** Sets one entry of a variable; returns the value actually stored (float32). */
function setEntry(v: tf.Variable, index: number, value: number): number {
  const data = (v.dataSync() as Float32Array).slice();
  data[index] = value;
  v.assign(tf.tensor(data, v.shape, "float32"));
  return data[index];
}

/**
 * Tolerance: compute is float32, so each logprob carries ~1e-6 absolute error and the loss
 * (≤ ~20 weighted tokens, coefficients ≤ 1) ~1e-6..1e-5. With eps = 1e-2 the central
 * difference then has a rounding error of ~1e-4 at worst, and a truncation error
 * eps²·|f'''|/6 of the same order for these O(0.2) weights. We require
 * |fd - g| ≤ 2e-2·|g| + 1e-3·G, G the largest |gradient| in that tensor (so entries with
 * tiny gradients are judged on the tensor's scale).
 */
const EPS = 1e-2,
  RTOL = 2e-2,
  ATOL_FRAC = 1e-3;

for (const [label, spec0] of LOSSES) {
  test(`forwardBackward loss and gradient: ${label}, every aggregation`, () => {
    const tr = fresh();
    try {
      const temperature = spec0.temperature ?? 1;
      const lp0 = currentLogprobs(tr, temperature);
      const direct = logitLogprobs(tr.model, temperature);
      lp0.forEach((r, i) =>
        r.forEach((p, t) =>
          assert.ok(Math.abs(p - direct.lp[i][t]) < 1e-5, `computeLogprobs ${p} vs ${direct.lp[i][t]}`),
        ),
      );
      const { datums, designedClipped, weighted } = makeDatums(lp0);
      let worst = 0;
      for (const aggregation of AGGS) {
        const spec = resolvedLoss({ ...spec0, aggregation, normalizer: 12 });
        const res = policyForwardBackward(tr, datums, spec, 10_000);
        // Returned logprobs are those of the current weights.
        res.logprobs.forEach((r, i) => r.forEach((p, t) => assert.ok(Math.abs(p - direct.lp[i][t]) < 1e-5)));
        let h = 0;
        datums.forEach((d, i) => d.weights.forEach((w, t) => w > 0 && (h += direct.entropy[i][t])));
        assert.ok(
          Math.abs(res.metrics.entropy! - h / weighted) < 1e-5,
          `entropy ${res.metrics.entropy} vs ${h / weighted}`,
        );
        // (a) the reported loss is the plain-number loss of the returned logprobs.
        const plain = plainLoss(datums, res.logprobs, spec);
        assert.ok(
          Math.abs(res.metrics.loss - plain.loss) <= 1e-5 * Math.max(1, Math.abs(plain.loss)),
          `${aggregation}: tensor loss ${res.metrics.loss}, plain ${plain.loss}`,
        );
        assert.equal(res.metrics.tokens, weighted);
        if (spec.type === "ppo")
          assert.ok(
            close(res.metrics.clipFraction!, designedClipped / weighted, 1e-9),
            `clipFraction ${res.metrics.clipFraction}`,
          );
        if (spec.kl) {
          let kl = 0;
          datums.forEach((d, i) =>
            d.weights.forEach((w, t) => w > 0 && (kl += klValue(res.logprobs[i][t], d.refLogprobs![t], spec.kl!.form))),
          );
          assert.ok(Math.abs(res.metrics.klRef! - kl / weighted) < 1e-9);
        }

        // (b) gradients against central differences.
        const grads = gradsOf(tr);
        const snapshot = new Map(CHECKED.map((n) => [n, Float32Array.from(grads.get(n)!.dataSync() as Float32Array)]));
        tr.zeroGrad();
        for (const name of CHECKED) {
          const g = snapshot.get(name)!;
          let G = 0,
            iMax = 0;
          g.forEach((x, i) => {
            if (Math.abs(x) > G) ((G = Math.abs(x)), (iMax = i));
          });
          assert.ok(G > 1e-3, `${aggregation} ${name}: gradient vanishes (max ${G})`);
          const iOther = (iMax * 7 + 13) % g.length;
          for (const idx of new Set([iMax, iOther])) {
            const v = tr.model.params.get(name)! as tf.Variable;
            const w0 = (v.dataSync() as Float32Array)[idx];
            const wp = setEntry(v, idx, w0 + EPS);
            const lpP = currentLogprobs(tr, temperature);
            const lossP = plainLoss(datums, lpP, spec);
            const wm = setEntry(v, idx, w0 - EPS);
            const lpM = currentLogprobs(tr, temperature);
            const lossM = plainLoss(datums, lpM, spec);
            setEntry(v, idx, w0);
            // No perturbation crossed a clip boundary, so the loss is smooth over [w0 - eps, w0 + eps].
            assert.deepEqual(lossP.clipPattern, plain.clipPattern);
            assert.deepEqual(lossM.clipPattern, plain.clipPattern);
            const fd = (lossP.loss - lossM.loss) / (wp - wm);
            const err = Math.abs(fd - g[idx]);
            worst = Math.max(worst, err / (RTOL * Math.abs(g[idx]) + ATOL_FRAC * G));
            assert.ok(
              err <= RTOL * Math.abs(g[idx]) + ATOL_FRAC * G,
              `${label} / ${aggregation} / ${name}[${idx}]: analytic ${g[idx]}, finite difference ${fd} (tensor max |g| ${G})`,
            );
          }
        }
      }
      if (process.env.LOSS_TEST_DEBUG) console.log(label, "worst error / tolerance", worst.toFixed(3));
    } finally {
      tr.dispose();
    }
  });
}

test("CISPO: the gradient is that of −w·p·A with the clipped ratio w held fixed (finite differences of that surrogate)", () => {
  const tr = fresh();
  try {
    const lp0 = currentLogprobs(tr, 1);
    const { datums } = makeDatums(lp0);
    const spec = resolvedLoss({ type: "cispo", clipLow: 0.3, clipHigh: 0.4, aggregation: "token-mean" });
    // The weights w = clip(r) at the current parameters, then the surrogate Σ c·(−w·p·A) in plain numbers.
    const coef = aggregationCoefficients(datums, spec.aggregation);
    const w = datums.map((d, i) =>
      d.tokens.map((_, t) => Math.max(0.7, Math.min(1.4, Math.exp(lp0[i][t] - d.logprobs![t])))),
    );
    assert.ok(w.flat().some((x) => x === 0.7) && w.flat().some((x) => x === 1.4), "both bounds are hit");
    const surrogate = (lp: number[][]) =>
      datums.reduce(
        (s, d, i) => s + d.tokens.reduce((u, _, t) => u + coef[i][t] * -w[i][t] * lp[i][t] * d.advantages![t], 0),
        0,
      );
    const res = policyForwardBackward(tr, datums, spec, 10_000);
    assert.ok(Math.abs(res.metrics.loss - surrogate(res.logprobs)) < 1e-5, `loss ${res.metrics.loss}`);
    const g = Float32Array.from(gradsOf(tr).get("model.layers.0.self_attn.q_proj.weight")!.dataSync() as Float32Array);
    tr.zeroGrad();
    let G = 0,
      iMax = 0;
    g.forEach((x, i) => {
      if (Math.abs(x) > G) ((G = Math.abs(x)), (iMax = i));
    });
    assert.ok(G > 1e-3, "the gradient does not vanish: clipped tokens keep theirs");
    const v = tr.model.params.get("model.layers.0.self_attn.q_proj.weight")! as tf.Variable;
    const w0 = (v.dataSync() as Float32Array)[iMax];
    const wp = setEntry(v, iMax, w0 + EPS);
    const up = surrogate(currentLogprobs(tr, 1));
    const wm = setEntry(v, iMax, w0 - EPS);
    const down = surrogate(currentLogprobs(tr, 1));
    setEntry(v, iMax, w0);
    const fd = (up - down) / (wp - wm);
    assert.ok(Math.abs(fd - g[iMax]) <= RTOL * Math.abs(g[iMax]) + ATOL_FRAC * G, `analytic ${g[iMax]}, fd ${fd}`);
    assert.ok(res.metrics.clipFraction! > 0, "clipped tokens are counted");
  } finally {
    tr.dispose();
  }
});

test("PPO gradient is zero exactly on clipped tokens and non-zero on the others", () => {
  // Single-token datums: each weighted token alone, so its gradient is its own.
  const tr = fresh();
  try {
    const lp0 = currentLogprobs(tr, 1);
    const { datums } = makeDatums(lp0);
    const spec = resolvedLoss({ type: "ppo", aggregation: "sum" });
    let k = 0;
    datums.forEach((d) => {
      d.weights.forEach((w, t) => {
        if (!w) return;
        const [, , clipped] = PATTERN[k++ % PATTERN.length];
        const only: Datum = { ...d, weights: d.weights.map((_, u) => (u === t ? 1 : 0)) };
        policyForwardBackward(tr, [only], spec, 10_000);
        const norm = tf.tidy(() => tf.addN([...gradsOf(tr).values()].map((g) => g.square().sum())).dataSync()[0]);
        tr.zeroGrad();
        if (clipped) assert.equal(norm, 0, `token ${k - 1}: clipped but gradient norm² ${norm}`);
        else assert.ok(norm > 1e-8, `token ${k - 1}: unclipped but no gradient`);
      });
    });
  } finally {
    tr.dispose();
  }
});

test("micro-batches: splitting one call gives the same loss and gradients", () => {
  // Datums 0 and 1 as one sequence (a split trajectory) or each its own.
  const cases: [LossSpec, LossAggregation, (number | undefined)[]][] = [];
  for (const spec0 of [{ type: "ppo", kl: { coef: 0.2, form: "k3" } }, { type: "cross_entropy" }] as LossSpec[]) {
    for (const aggregation of ["token-mean", "seq-mean-token-mean"] as LossAggregation[])
      cases.push([spec0, aggregation, [undefined, undefined, undefined]]);
  }
  cases.push([{ type: "ppo" }, "seq-mean-token-mean", [0, 0, 1]], [{ type: "ppo" }, "seq-mean-token-sum", [0, 0, 1]]);
  for (const [spec0, aggregation, sequences] of cases) {
    for (const budget of [8, 16]) {
      const spec = resolvedLoss({ ...spec0, aggregation });
      const one = fresh(),
        split = fresh();
      try {
        const datums = makeDatums(currentLogprobs(one, 1)).datums.map((d, i) =>
          sequences[i] === undefined ? d : { ...d, sequence: sequences[i] },
        );
        // Lengths 8, 5, 7: budget 8 puts each datum alone; 16 packs [0, 1] (padded) and [2].
        const lengths = datums.map((d) => d.tokens.length);
        assert.deepEqual(packMicroBatches(lengths, budget), budget === 8 ? [[0], [1], [2]] : [[0, 1], [2]]);
        assert.deepEqual(packMicroBatches(lengths, 10_000), [[0, 1, 2]]);
        const a = policyForwardBackward(one, datums, spec, 10_000); // one micro-batch of 3
        const b = policyForwardBackward(split, datums, spec, budget);
        assert.ok(
          Math.abs(a.metrics.loss - b.metrics.loss) <= 1e-5 * Math.max(1, Math.abs(a.metrics.loss)),
          `loss ${a.metrics.loss} vs ${b.metrics.loss}`,
        );
        a.logprobs.forEach((r, i) => r.forEach((p, t) => assert.ok(Math.abs(p - b.logprobs[i][t]) < 1e-5)));
        assert.ok(Math.abs(a.metrics.entropy! - b.metrics.entropy!) < 1e-5);
        const ga = gradsOf(one),
          gb = gradsOf(split);
        assert.equal(ga.size, gb.size);
        for (const [name, t] of ga) {
          const x = t.dataSync(),
            y = gb.get(name)!.dataSync();
          let scale = 0,
            diff = 0;
          for (let i = 0; i < x.length; i++) {
            scale = Math.max(scale, Math.abs(x[i]));
            diff = Math.max(diff, Math.abs(x[i] - y[i]));
          }
          assert.ok(
            diff <= 1e-5 * scale + 1e-9,
            `${aggregation} ${sequences.join()} ${name}: max diff ${diff}, scale ${scale}`,
          );
        }
        // Accumulation across calls: a second call doubles the gradient.
        const before = Float32Array.from(ga.get("model.norm.weight")!.dataSync() as Float32Array);
        policyForwardBackward(one, datums, spec, 10_000);
        const after = gradsOf(one).get("model.norm.weight")!.dataSync();
        before.forEach((x, i) => assert.ok(Math.abs(after[i] - 2 * x) <= 1e-5 * Math.abs(x) + 1e-9));
      } finally {
        one.dispose();
        split.dispose();
      }
    }
  }
});
