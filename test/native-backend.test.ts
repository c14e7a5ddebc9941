/**
 * The native backend (matrix products on BLAS through the C addon) against the
 * TF.js wasm path it replaces, and the choice between them.
 *
 * The addon must be built for these tests: they fail when it is missing (CI builds
 * it), and skip only when AGENT_R1_NATIVE_DISABLE is set. Tolerances are float32's:
 * BLAS sums in a different order than XNNPACK, so results agree to rounding
 * (about 1e-7 relative per product), never bit for bit. The fused element-wise
 * kernels (fused-ops.ts) follow their TF.js compositions operation by operation,
 * so they too agree to float32 rounding: reduction order, and an exp within 1 ulp.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { loadNative, type BackendName } from "../src/engine/local/addon.js";
import {
  broadcastBatch,
  fusedOpsActive,
  matmulBackend,
  setFusedOps,
  setMatmulBackend,
  tf,
} from "../src/engine/local/tfjs/tf-backend.js";
import {
  attentionSoftmax,
  biasAdd,
  FUSED_KERNELS,
  maskRows,
  rmsNorm,
  rope,
  swiglu,
} from "../src/engine/local/tfjs/fused-ops.js";
import { Transformer } from "../src/engine/local/tfjs/transformer.js";
import { parseModelConfig, presetConfigJson } from "../src/model/config.js";
import { InputError } from "../src/util/errors.js";
import { runCli } from "../src/cli/main.js";
import { loadConfig } from "../src/train/load-config.js";
import { Rng } from "../src/util/rng.js";
import type { Datum } from "../src/engine/types.js";
import { spawnSync } from "node:child_process";
import { captureIO, cliEntry } from "./helpers.js";
import { assertClose, diff, fusedVsReference, kernelsRun, native, normal, tinyModelFixture } from "./native-helpers.js";

const fx = tinyModelFixture("agent-r1-native-", 0);

/** Plain float64 reference: out (...outer, m, n) = op(a) @ op(b) with broadcast batch dims. */
function referenceMatMul(a: tf.Tensor, b: tf.Tensor, ta: boolean, tb: boolean): Float64Array {
  const A = a.dataSync(),
    B = b.dataSync();
  const ra = a.rank,
    rb = b.rank;
  const m = ta ? a.shape[ra - 1] : a.shape[ra - 2],
    k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  const { outer, aIndex, bIndex } = broadcastBatch(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const batch = outer.reduce((x, y) => x * y, 1);
  const out = new Float64Array(batch * m * n);
  for (let i = 0; i < batch; i++) {
    const ao = (aIndex ? aIndex[i] : i) * m * k,
      bo = (bIndex ? bIndex[i] : i) * k * n;
    for (let r = 0; r < m; r++) {
      for (let c = 0; c < n; c++) {
        let s = 0;
        for (let j = 0; j < k; j++) s += A[ao + (ta ? j * m + r : r * k + j)] * B[bo + (tb ? c * k + j : j * n + c)];
        out[(i * m + r) * n + c] = s;
      }
    }
  }
  return out;
}

test("the native addon is built and loads (set AGENT_R1_NATIVE_DISABLE to run without it)", native, () => {
  const st = loadNative();
  assert.ok(st.ok, `the native addon did not load: ${st.ok ? "" : st.reason}`);
  const info = st.addon.info();
  assert.match(info.blas, /\S/);
});

test(
  "addon gemm: every transpose combination and indexed (broadcast) batches against a float64 reference",
  native,
  () => {
    const st = loadNative();
    assert.ok(st.ok);
    const { addon } = st;
    const rng = new Rng(3);
    const rand = (n: number) => Float32Array.from({ length: n }, () => rng.normal());
    const m = 5,
      n = 4,
      k = 7;
    for (const ta of [false, true]) {
      for (const tb of [false, true]) {
        const a = rand(2 * m * k),
          b = rand(3 * k * n),
          c = new Float32Array(3 * m * n);
        const aIndex = Int32Array.of(1, 0, 1),
          bIndex = null; // a broadcast by index, b item by item
        addon.gemm(a, b, c, 3, m, n, k, ta, tb, aIndex, bIndex);
        const want = new Float64Array(3 * m * n);
        for (let i = 0; i < 3; i++) {
          const ao = aIndex[i] * m * k,
            bo = i * k * n;
          for (let r = 0; r < m; r++)
            for (let col = 0; col < n; col++) {
              let s = 0;
              for (let j = 0; j < k; j++)
                s += a[ao + (ta ? j * m + r : r * k + j)] * b[bo + (tb ? col * k + j : j * n + col)];
              want[(i * m + r) * n + col] = s;
            }
        }
        assertClose(c, want, 1e-5, `gemm transA=${ta} transB=${tb}`);
      }
    }
    // k = 0: an empty sum writes zeros.
    const z = new Float32Array(6).fill(7);
    addon.gemm(new Float32Array(0), new Float32Array(0), z, 1, 2, 3, 0, false, false);
    assert.deepEqual([...z], [0, 0, 0, 0, 0, 0]);
  },
);

test("addon gemm: a bad shape or a too-short array raises an error naming it", native, () => {
  const st = loadNative();
  assert.ok(st.ok);
  const { addon } = st;
  const a = new Float32Array(12),
    b = new Float32Array(8),
    c = new Float32Array(6); // (3,4) @ (4,2)
  addon.gemm(a, b, c, 1, 3, 2, 4, false, false);
  const cases: [() => void, RegExp][] = [
    [() => addon.gemm(a, b, new Float32Array(5), 1, 3, 2, 4, false, false), /c holds 5 floats/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 5, false, false), /a holds 12 floats/],
    [() => addon.gemm(a, new Float32Array(7), c, 1, 3, 2, 4, false, false), /b holds 7 floats/],
    [() => addon.gemm(a, b, c, 2, 3, 2, 4, false, false), /c holds 6 floats/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, false, false, Int32Array.of(1)), /a holds 12 floats, too short for item 1/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, false, false, Int32Array.of(-1)), /aIndex\[0\] = -1/],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, false, false, null, Int32Array.of(0, 0)), /bIndex has 2 entries/],
    [() => addon.gemm(a, b, c, 1, -3, 2, 4, false, false), /m must be a non-negative integer/],
    [() => addon.gemm(a, b, c, 1, 2.5, 2, 4, false, false), /m must be a non-negative integer/],
    [
      () => addon.gemm(Array.from(a) as unknown as Float32Array, b, c, 1, 3, 2, 4, false, false),
      /a must be a Float32Array/,
    ],
    [
      () => addon.gemm(a, new Float64Array(8) as unknown as Float32Array, c, 1, 3, 2, 4, false, false),
      /b must be a Float32Array/,
    ],
    [() => addon.gemm(a, b, c, 1, 3, 2, 4, 1 as unknown as boolean, false), /transA must be a boolean/],
    [() => (addon.gemm as unknown as (...x: unknown[]) => void)(a, b, c), /at least 9 arguments/],
  ];
  for (const [fn, re] of cases) assert.throws(fn, (e: unknown) => e instanceof Error && re.test(e.message), String(re));
});

test("BatchMatMul on native equals the wasm path: transposes, batches, broadcasting", native, () => {
  const cases: [number[], number[], boolean, boolean][] = [
    [[5, 7], [7, 3], false, false],
    [[7, 5], [7, 3], true, false],
    [[5, 7], [3, 7], false, true],
    [[7, 5], [3, 7], true, true],
    [[4, 5, 7], [4, 7, 3], false, false],
    [[4, 7, 5], [4, 3, 7], true, true],
    [[4, 5, 7], [1, 7, 3], false, false], // b broadcast over the batch
    [[1, 7, 5], [4, 7, 3], true, false], // a broadcast over the batch
    [[4, 5, 7], [7, 3], false, false], // rank 3 @ rank 2
    [[2, 3, 9, 16], [2, 3, 11, 16], false, true], // attention scores: (B, heads, T, hd) @ (B, heads, S, hd)^T
    [[64, 256], [256, 96], false, false], // large enough for the wasm path's fast (looped) branch
    [[256, 64], [256, 96], true, false],
    [[3, 64, 40], [3, 96, 40], false, true],
  ];
  const rng = new Rng(11);
  for (const [sa, sb, ta, tb] of cases) {
    const a = tf.tensor(
      Float32Array.from({ length: sa.reduce((x, y) => x * y) }, () => rng.normal()),
      sa,
    );
    const b = tf.tensor(
      Float32Array.from({ length: sb.reduce((x, y) => x * y) }, () => rng.normal()),
      sb,
    );
    setMatmulBackend("tfjs");
    const wasm = tf.matMul(a, b, ta, tb);
    setMatmulBackend("native");
    assert.equal(matmulBackend(), "native");
    const nat = tf.matMul(a, b, ta, tb);
    const what = `[${sa}]${ta ? "^T" : ""} @ [${sb}]${tb ? "^T" : ""}`;
    assert.deepEqual(nat.shape, wasm.shape, `${what}: shape`);
    assertClose(nat.dataSync(), wasm.dataSync(), 1e-5, `${what} native vs wasm`);
    assertClose(nat.dataSync(), referenceMatMul(a, b, ta, tb), 1e-5, `${what} native vs float64`);
    tf.dispose([a, b, wasm, nat]);
  }
  setMatmulBackend("tfjs");
});

test("BatchMatMul on native: two-sided broadcasting (2,1) x (1,3), and a bad shape raises an Error", native, () => {
  setMatmulBackend("native");
  try {
    const rng = new Rng(5);
    const a = tf.tensor(
      Float32Array.from({ length: 2 * 4 * 6 }, () => rng.normal()),
      [2, 1, 4, 6],
    );
    const b = tf.tensor(
      Float32Array.from({ length: 3 * 6 * 5 }, () => rng.normal()),
      [1, 3, 6, 5],
    );
    const c = tf.matMul(a, b);
    assert.deepEqual(c.shape, [2, 3, 4, 5]);
    assertClose(c.dataSync(), referenceMatMul(a, b, false, false), 1e-5, "two-sided broadcast");
    assert.throws(
      () => tf.matMul(tf.zeros([3, 4]), tf.zeros([5, 2])),
      (e: unknown) => e instanceof Error && /inner/.test(e.message),
    );
    assert.throws(
      () => tf.matMul(tf.zeros([2, 3, 4]), tf.zeros([3, 4, 2])),
      (e: unknown) => e instanceof Error && /broadcast/.test(e.message),
    );
    tf.dispose([a, b, c]);
  } finally {
    setMatmulBackend("tfjs");
  }
});

// ---------------------------------------------------------------------------
// Fused element-wise kernels (native/fused_ops.c via src/engine/local/tfjs/fused-ops.ts)
// ---------------------------------------------------------------------------

/** A causal additive mask (G*T, S) as the model builds it: row g*T+t sees keys 0..start+t. */
function causal(T: number, start: number, G: number): tf.Tensor2D {
  const S = start + T;
  const m = new Float32Array(G * T * S);
  for (let g = 0; g < G; g++)
    for (let t = 0; t < T; t++) for (let s = start + t + 1; s < S; s++) m[(g * T + t) * S + s] = -1e9;
  return tf.tensor2d(m, [G * T, S]);
}

// Tolerance of every fused-vs-composition comparison below: max |fused - reference| <= 1e-5 · max |reference|
// (float32 rounding of different reduction orders; measured up to about 3e-7).
const FUSED_REL = 1e-5;

const fusedCases: { name: string; kernel: string; f: (...xs: tf.Tensor[]) => tf.Tensor; inputs: () => tf.Tensor[] }[] =
  [
    {
      name: "rmsNorm (B, T, H), H a multiple of 8",
      kernel: FUSED_KERNELS.rmsNorm,
      f: (x, w) => rmsNorm(x, w, 1e-6),
      inputs: () => [normal([2, 5, 64], 1, 3), normal([64], 2)],
    },
    {
      name: "rmsNorm, H = 37 (vector tails)",
      kernel: FUSED_KERNELS.rmsNorm,
      f: (x, w) => rmsNorm(x, w, 1e-5),
      inputs: () => [normal([3, 4, 37], 3), normal([37], 4)],
    },
    {
      name: "rope, shared tables (1, T, 1, hd/2)",
      kernel: FUSED_KERNELS.rope,
      f: (x, c, s) => rope(x as tf.Tensor4D, c, s),
      inputs: () => [normal([2, 5, 3, 16], 5), normal([1, 5, 1, 8], 6), normal([1, 5, 1, 8], 7)],
    },
    {
      name: "rope, per-row tables (B, 1, 1, hd/2) as in batched decoding",
      kernel: FUSED_KERNELS.rope,
      f: (x, c, s) => rope(x as tf.Tensor4D, c, s),
      inputs: () => [normal([4, 1, 2, 6], 8), normal([4, 1, 1, 3], 9), normal([4, 1, 1, 3], 10)],
    },
    {
      name: "attention softmax with a causal (G*T, S) mask, S = 9",
      kernel: FUSED_KERNELS.softmax,
      f: (x, m) => attentionSoftmax(x, m, 0.25),
      inputs: () => [normal([2, 3, 2 * 4, 9], 11, 4), causal(4, 5, 2)],
    },
    {
      name: "attention softmax with a per-row (B, 1, 1, S) key mask, S = 40",
      kernel: FUSED_KERNELS.softmax,
      f: (x, m) => attentionSoftmax(x, m, 0.3),
      inputs: () => [normal([3, 2, 4, 40], 12, 4), normal([3, 1, 1, 40], 13)],
    },
    {
      name: "swiglu, large |gate| (sigmoid saturates)",
      kernel: FUSED_KERNELS.swiglu,
      f: (g, u) => swiglu(g, u),
      inputs: () => [normal([3, 4, 45], 14, 8), normal([3, 4, 45], 15)],
    },
    {
      name: "bias add (N, n) + (n)",
      kernel: FUSED_KERNELS.biasAdd,
      f: (x, b) => biasAdd(x, b),
      inputs: () => [normal([37, 24], 16), normal([24], 17)],
    },
    {
      name: "gather of rows (embedding lookup)",
      kernel: "GatherV2",
      f: (t) => tf.gather(t, tf.tensor1d([3, 0, 3, 5, 1], "int32")),
      inputs: () => [normal([6, 7], 18)],
    },
  ];

for (const [i, c] of fusedCases.entries()) {
  test(`fused ${c.name}: forward and every input's gradient equal the TF.js composition`, native, async () => {
    const xs = c.inputs();
    const { ref, fused } = fusedVsReference(c.f, xs, 100 + i);
    assert.equal(fused.length, xs.length + 1);
    ["forward", ...xs.map((_, j) => `gradient of input ${j}`)].forEach((what, j) =>
      assertClose(fused[j], ref[j], FUSED_REL, `${c.name}: ${what}`),
    );
    // The fused path really runs the native kernel (and the composition does not).
    setMatmulBackend("native");
    try {
      assert.ok((await kernelsRun(() => c.f(...xs))).has(c.kernel), `${c.kernel} ran`);
      setFusedOps(false);
      if (c.kernel !== "GatherV2")
        assert.ok(
          !(await kernelsRun(() => c.f(...xs))).has(c.kernel),
          `${c.kernel} did not run with the fused kernels off`,
        );
    } finally {
      setMatmulBackend("tfjs");
    }
    tf.dispose(xs);
  });
}

test("fused kernels: gradients match central finite differences (float64 sums of float32 evaluations)", native, () => {
  setMatmulBackend("native");
  try {
    assert.ok(fusedOpsActive());
    const cases: { name: string; f: (...xs: tf.Tensor[]) => tf.Tensor; xs: tf.Tensor[] }[] = [
      { name: "rmsNorm", f: (x, w) => rmsNorm(x, w, 1e-6), xs: [normal([2, 3, 12], 21), normal([12], 22)] },
      {
        name: "attention softmax",
        f: (x, m) => attentionSoftmax(x, m, 0.5),
        xs: [normal([1, 2, 2 * 3, 5], 23), causal(3, 2, 2)],
      },
      { name: "swiglu", f: (g, u) => swiglu(g, u), xs: [normal([4, 10], 24, 2), normal([4, 10], 25)] },
      {
        name: "rope",
        f: (x, c, s) => rope(x as tf.Tensor4D, c, s),
        xs: [normal([1, 3, 2, 4], 26), normal([1, 3, 1, 2], 27), normal([1, 3, 1, 2], 28)],
      },
    ];
    for (const c of cases) {
      const w = normal(c.f(...c.xs).shape, 29);
      const loss = (xs: tf.Tensor[]) =>
        tf.tidy(() => {
          const y = c.f(...xs).dataSync(),
            wd = w.dataSync();
          let s = 0;
          for (let i = 0; i < y.length; i++) s += y[i] * wd[i];
          return s;
        });
      const grads = tf.tidy(() =>
        tf
          .grads((...a: tf.Tensor[]) =>
            c
              .f(...a)
              .mul(w)
              .sum(),
          )(c.xs)
          .map((g) => Float32Array.from(g.dataSync())),
      );
      const h = 1e-2;
      c.xs.forEach((x, j) => {
        if (c.name === "attention softmax" && j === 1) return; // the mask: ±1e9 entries, no useful finite difference
        const base = Float32Array.from(x.dataSync());
        let maxErr = 0,
          maxG = 0;
        for (let k = 0; k < base.length; k++) {
          const at = (d: number) => {
            const v = base.slice();
            v[k] += d;
            const xt = tf.tensor(v, x.shape);
            const xs = c.xs.map((t, q) => (q === j ? xt : t));
            const l = loss(xs);
            xt.dispose();
            return l;
          };
          const fd = (at(h) - at(-h)) / (2 * h);
          maxErr = Math.max(maxErr, Math.abs(fd - grads[j][k]));
          maxG = Math.max(maxG, Math.abs(grads[j][k]));
        }
        // Central differences: O(h²) truncation plus float32 rounding of the loss over 2h.
        assert.ok(
          maxErr <= 2e-3 * Math.max(1, maxG),
          `${c.name}: gradient of input ${j} off finite differences by ${maxErr} (max |g| ${maxG})`,
        );
      });
      w.dispose();
    }
    tf.dispose(cases.flatMap((c) => c.xs));
  } finally {
    setMatmulBackend("tfjs");
  }
});

test("fused kernels: no tensor leaks through forward and gradient", native, () => {
  setMatmulBackend("native");
  try {
    const x = normal([2, 4, 3, 8], 31),
      cos = normal([1, 4, 1, 4], 32),
      sin = normal([1, 4, 1, 4], 33),
      w = normal([8], 34);
    const scores = normal([2, 1, 6, 6], 35),
      mask = causal(6, 0, 1),
      b = normal([8], 36);
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) {
      tf.tidy(() => {
        const f = (xx: tf.Tensor, ww: tf.Tensor, s: tf.Tensor, bb: tf.Tensor) =>
          swiglu(rmsNorm(rope(xx as tf.Tensor4D, cos, sin), ww, 1e-6), biasAdd(xx, bb))
            .sum()
            .add(attentionSoftmax(s, mask, 0.5).square().sum());
        tf.grads(f)([x, w, scores, b]);
      });
    }
    assert.equal(tf.memory().numTensors, before);
    tf.dispose([x, cos, sin, w, scores, mask, b]);
  } finally {
    setMatmulBackend("tfjs");
  }
});

test("fused kernels: the mask layouts the model uses map to (row / div) % mod; others fall back", () => {
  assert.deepEqual(maskRows([2, 3, 8, 9], [8, 9]), { div: 1, mod: 8 }); // causal (G*T, S)
  assert.deepEqual(maskRows([4, 2, 3, 9], [4, 1, 1, 9]), { div: 6, mod: 4 }); // decoding (B, 1, 1, S)
  assert.deepEqual(maskRows([4, 2, 3, 9], [9]), { div: 1, mod: 1 });
  assert.deepEqual(maskRows([4, 1, 3, 9], [4, 1, 3, 9]), { div: 1, mod: 12 }); // a size-1 axis inside the block
  assert.equal(maskRows([4, 2, 3, 9], [4, 1, 3, 9]), undefined); // broadcast in the middle: not one block
  assert.equal(maskRows([4, 2, 3, 9], [3, 1]), undefined); // a broadcast key axis
});

test("addon fused kernels: a wrong length or type raises an error naming the argument", native, () => {
  const st = loadNative();
  assert.ok(st.ok);
  const a = st.addon;
  const f = (n: number) => new Float32Array(n);
  const cases: [() => void, RegExp][] = [
    [
      () => a.rmsNormForward(f(12), f(3), f(12), 3, 4, 1e-6),
      /rmsNormForward: weight holds 3 floats, expected cols = 4/,
    ],
    [
      () => a.rmsNormForward(f(12), f(4), f(11), 3, 4, 1e-6),
      /rmsNormForward: y holds 11 floats, expected rows\*cols = 12/,
    ],
    [() => a.rmsNormForward(f(12), f(4), f(12), 3, 4, NaN), /rmsNormForward: eps must be finite/],
    [() => a.rmsNormBackward(f(12), f(4), f(12), f(12), f(5), 3, 4, 1e-6), /rmsNormBackward: dweight holds 5 floats/],
    [() => a.rmsNormBackward(f(12), f(4), f(10), f(12), f(4), 3, 4, 1e-6), /rmsNormBackward: dy holds 10 floats/],
    [
      () => a.softmaxForward(f(12), f(7), f(12), 3, 4, 1, 1, 2),
      /softmaxForward: mask holds 7 floats, expected maskMod\*cols = 8/,
    ],
    [() => a.softmaxForward(f(12), f(8), f(12), 3, 4, 1, 0, 2), /softmaxForward: maskDiv must be at least 1/],
    [() => a.softmaxForward(f(12), null, f(12), 3, -4, 1, 1, 1), /softmaxForward: cols must be a non-negative integer/],
    [() => a.softmaxBackward(f(12), f(12), f(13), 3, 4, 1), /softmaxBackward: dx holds 13 floats/],
    [() => a.ropeForward(f(48), f(12), f(12), f(48), 2, 3, 2, 5, 1, false), /ropeForward: headDim must be even, got 5/],
    [
      () => a.ropeForward(f(48), f(12), f(12), f(48), 2, 3, 2, 4, 3, false),
      /ropeForward: tableRows must be 1 or batch = 2, got 3/,
    ],
    [
      () => a.ropeForward(f(48), f(5), f(6), f(48), 2, 3, 2, 4, 1, false),
      /ropeForward: cos holds 5 floats, expected tableRows\*seq\*headDim\/2 = 6/,
    ],
    [
      () => a.ropeForward(f(48), f(6), f(6), f(48), 2, 3, 2, 4, 1, 0 as unknown as boolean),
      /ropeForward: inverse must be a boolean/,
    ],
    [() => a.swigluForward(f(5), f(4), f(5), 5), /swigluForward: up holds 4 floats, expected n = 5/],
    [
      () => a.swigluBackward(f(5), f(5), f(5), f(5), new Float64Array(5) as unknown as Float32Array, 5),
      /swigluBackward: dup must be a Float32Array/,
    ],
    [() => a.biasAddForward(f(6), f(2), f(6), 2, 3), /biasAddForward: bias holds 2 floats, expected cols = 3/],
    [() => a.sumRows(f(6), f(2), 2, 3), /sumRows: out holds 2 floats, expected cols = 3/],
    [() => a.gatherRows(f(6), Int32Array.of(0, 2), f(6), 2, 3), /gatherRows: indices\[1\] = 2 is outside \[0, 2\)/],
    [() => a.gatherRows(f(6), Int32Array.of(0, -1), f(6), 2, 3), /gatherRows: indices\[1\] = -1 is outside/],
    [
      () => a.gatherRows(f(6), Int32Array.of(0), f(6), 2, 3),
      /gatherRows: out holds 6 floats, expected indices.length\*cols = 3/,
    ],
    [() => (a.rmsNormForward as unknown as (...x: unknown[]) => void)(f(1)), /needs 6 arguments/],
  ];
  for (const [fn, re] of cases) assert.throws(fn, (e: unknown) => e instanceof Error && re.test(e.message), String(re));
  // A kernel that throws frees its output: a bad index through tf.gather leaves no tensor behind.
  setMatmulBackend("native");
  try {
    const table = normal([4, 3], 41),
      before = tf.memory();
    assert.throws(
      () => tf.gather(table, tf.tensor1d([0, 9], "int32")),
      /gatherRows: indices\[1\] = 9 is outside \[0, 4\)/,
    );
    assert.equal(tf.memory().numBytes, before.numBytes + 8); // only the index tensor (2 x int32), tracked outside any tidy
    table.dispose();
  } finally {
    setMatmulBackend("tfjs");
  }
});

test(
  "the model routes RMSNorm, RoPE, the attention softmax, SwiGLU and the biases through the fused kernels on native only",
  native,
  async () => {
    const cfg = parseModelConfig(presetConfigJson("tiny", 64));
    const m = Transformer.random(cfg, 1);
    try {
      const run = () => tf.tidy(() => m.forward(tf.tensor2d([[5, 6, 7, 8]], [1, 4], "int32")).hidden);
      const fused = [
        FUSED_KERNELS.rmsNorm,
        FUSED_KERNELS.rope,
        FUSED_KERNELS.softmax,
        FUSED_KERNELS.swiglu,
        ...(cfg.qkvBias ? [FUSED_KERNELS.biasAdd] : []),
      ];
      setMatmulBackend("native");
      setFusedOps(true); // whatever env AGENT_R1_FUSED says
      const onNative = await kernelsRun(run);
      for (const k of fused) assert.ok(onNative.has(k), `${k} runs on native`);
      setMatmulBackend("tfjs");
      const onTfjs = await kernelsRun(run);
      for (const k of Object.values(FUSED_KERNELS)) assert.ok(!onTfjs.has(k), `${k} does not run on tfjs`);
    } finally {
      setMatmulBackend("tfjs");
      m.dispose();
    }
  },
);

/** Scales the weights so attention and the next-token distribution are far from uniform. */
function sharpen(e: LocalEngine, factor = 6): void {
  for (const [name, v] of e.model.params) {
    if (name.endsWith("_proj.weight") || name === "model.embed_tokens.weight") tf.tidy(() => v.assign(v.mul(factor)));
  }
}

interface Run {
  logits: Float32Array;
  logprobs: number[];
  loss: number;
  grads: Float32Array;
  weightsAfter: Float32Array;
  backend: BackendName;
}

async function engineRun(kernels: "wasm" | "addon"): Promise<Run> {
  const e = await LocalEngine.load(fx.base, { workers: 0, backend: "tfjs", tfjsKernels: kernels });
  try {
    sharpen(e);
    const rng = new Rng(21);
    const V = e.config.vocabSize;
    const seqs = [0, 1, 2].map((i) => Array.from({ length: 20 + 7 * i }, () => 3 + rng.int(V - 3)));
    const model = e.model;
    const logits = tf.tidy(() => {
      const tokens = tf.tensor2d(seqs[0], [1, seqs[0].length], "int32");
      const { hidden } = model.forward(tokens);
      return model.logits(hidden.reshape([-1, hidden.shape[2]]) as tf.Tensor2D);
    });
    const logitsData = Float32Array.from(logits.dataSync());
    logits.dispose();
    const lps = (await e.computeLogprobs(seqs)).flat().filter((x): x is number => x !== null);
    const datums: Datum[] = seqs.map((s, i) => ({
      tokens: s.slice(0, -1),
      targetTokens: s.slice(1),
      weights: s.slice(1).map((_, t) => (t >= 5 ? 1 : 0)),
      advantages: s.slice(1).map(() => (i % 2 ? -1 : 1) * (0.5 + i)),
      logprobs: s.slice(1).map(() => -Math.log(V)),
    }));
    const fb = await e.forwardBackward(datums, { type: "ppo" });
    const grads = new Float32Array(e.trainable.size);
    e.trainable.exportGradients(grads);
    await e.optimStep({ lr: 1e-3, eps: 1e-6 });
    const weightsAfter = new Float32Array(e.trainable.size);
    let o = 0;
    for (const v of model.params.values()) {
      weightsAfter.set(v.dataSync(), o);
      o += v.size;
    }
    const stats = await e.stats();
    return { logits: logitsData, logprobs: lps, loss: fb.metrics.loss, grads, weightsAfter, backend: stats.backend };
  } finally {
    await e.dispose();
  }
}

test(
  "TF.js engine parity, wasm vs the addon's kernels: logits, computeLogprobs, a forwardBackward's loss and gradients, an AdamW step",
  native,
  async () => {
    const t = await engineRun("wasm");
    const n = await engineRun("addon");
    assert.equal(t.backend, "tfjs");
    assert.equal(n.backend, "tfjs");
    // Logits: float32 rounding of the summation order only.
    assertClose(n.logits, t.logits, 1e-5, "logits");
    // Per-token logprobs, absolute (nats).
    const lp = diff(n.logprobs, t.logprobs);
    assert.ok(lp.abs <= 1e-4, `logprobs: max abs diff ${lp.abs}`);
    assert.ok(Math.abs(n.loss - t.loss) <= 1e-5 * Math.max(1, Math.abs(t.loss)), `loss ${n.loss} vs ${t.loss}`);
    // Gradients: relative to the largest gradient entry.
    assertClose(n.grads, t.grads, 1e-4, "gradients");
    // After one AdamW step (lr 1e-3, eps 1e-6) the weights agree to a tenth of the step size: Adam's
    // first step is about lr·g/(|g| + eps), so rounding noise in a near-zero gradient moves its weight
    // by a fraction of lr; elsewhere the steps agree to float32 rounding.
    const w = diff(n.weightsAfter, t.weightsAfter);
    assert.ok(w.abs <= 1e-4, `weights after a step: max abs diff ${w.abs}`);
  },
);

test(
  "TF.js engine in a worker thread on the addon's kernels: the addon loads there and agrees with the in-process wasm engine",
  native,
  async () => {
    const rng = new Rng(4);
    const seqs = [Array.from({ length: 30 }, () => 3 + rng.int(200))];
    const w = await LocalEngine.load(fx.base, { workers: 1, backend: "tfjs", tfjsKernels: "addon" });
    let remote: (number | null)[][];
    try {
      assert.equal((await w.stats()).backend, "tfjs");
      remote = await w.computeLogprobs(seqs);
    } finally {
      await w.dispose();
    }
    const local = await LocalEngine.load(fx.base, { workers: 0, backend: "tfjs", tfjsKernels: "wasm" });
    try {
      const here = await local.computeLogprobs(seqs);
      const d = diff(remote[0].slice(1) as number[], here[0].slice(1) as number[]);
      assert.ok(d.abs <= 1e-4, `logprobs: max abs diff ${d.abs}`);
    } finally {
      await local.dispose();
    }
  },
);

test(
  "one thread runs one set of TF.js kernels: a second TF.js engine on the other kernels is an error until the first is disposed",
  native,
  async () => {
    const a = await LocalEngine.load(fx.base, { workers: 0, backend: "tfjs", tfjsKernels: "addon" });
    try {
      await assert.rejects(
        () => LocalEngine.load(fx.base, { workers: 0, backend: "tfjs", tfjsKernels: "wasm" }),
        (e: unknown) => e instanceof InputError && /already loaded in this thread/.test((e as Error).message),
      );
    } finally {
      await a.dispose();
    }
    const b = await LocalEngine.load(fx.base, { workers: 0, backend: "tfjs", tfjsKernels: "wasm" });
    assert.equal(b.backend, "tfjs");
    await b.dispose();
  },
);

/** Runs fn with env AGENT_R1_NATIVE_DISABLE=1 (the loader then reports the addon as unavailable). */
async function withoutAddon<T>(fn: () => Promise<T>): Promise<T> {
  const before = process.env.AGENT_R1_NATIVE_DISABLE;
  process.env.AGENT_R1_NATIVE_DISABLE = "1";
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.AGENT_R1_NATIVE_DISABLE;
    else process.env.AGENT_R1_NATIVE_DISABLE = before;
  }
}

test("without the addon: native is an error naming the reason, auto falls back and says why, the CLI prints one line once", async () => {
  await withoutAddon(async () => {
    await assert.rejects(
      () => LocalEngine.load(fx.base, { workers: 0, backend: "native" }),
      (e: unknown) =>
        e instanceof InputError &&
        /native backend is unavailable: disabled by AGENT_R1_NATIVE_DISABLE/.test((e as Error).message),
    );
    const e = await LocalEngine.load(fx.base, { workers: 0, backend: "auto" });
    try {
      assert.equal(e.backend, "tfjs");
      const stats = await e.stats();
      assert.equal(stats.backend, "tfjs");
      assert.match(stats.backendFallback ?? "", /AGENT_R1_NATIVE_DISABLE/);
    } finally {
      await e.dispose();
    }

    const input = path.join(fx.root, "score.jsonl");
    fs.writeFileSync(input, JSON.stringify({ tokens: [5, 6, 7, 8] }) + "\n");
    const first = captureIO();
    assert.equal(await runCli(["score", "--model", fx.base, "--input", input], first), 0, first.stderr.join("\n"));
    assert.equal(first.stderr.length, 1, first.stderr.join("\n"));
    assert.match(
      first.stderr[0],
      /^agent-r1: native backend unavailable \(disabled by AGENT_R1_NATIVE_DISABLE\); using tfjs$/,
    );
    assert.equal(first.stdout.length, 1);
    const second = captureIO();
    assert.equal(await runCli(["score", "--model", fx.base, "--input", input, "--backend", "auto"], second), 0);
    assert.deepEqual(second.stderr, [], "the fallback line prints once per process");

    const forced = captureIO();
    assert.equal(await runCli(["score", "--model", fx.base, "--input", input, "--backend", "native"], forced), 1);
    assert.equal(forced.stderr.length, 1);
    assert.match(forced.stderr[0], /^error: the native backend is unavailable: disabled by AGENT_R1_NATIVE_DISABLE/);
  });
});

test("without the addon, a command that fails to load its model still fails with one line (the fallback is said only after a load)", () => {
  const input = path.join(fx.root, "one.jsonl");
  fs.writeFileSync(input, JSON.stringify({ tokens: [5, 6, 7] }) + "\n");
  const missing = path.join(fx.root, "no-such-model");
  for (const args of [
    ["generate", "--model", missing, "--prompt", "hi"],
    ["score", "--model", missing, "--input", input],
    ["eval", "--model", missing, "--task", "calc"],
    ["chat", "--model", missing, "--task", "calc"],
  ]) {
    const res = spawnSync(process.execPath, [...process.execArgv, cliEntry(), ...args], {
      encoding: "utf8",
      input: "",
      env: { ...process.env, AGENT_R1_NATIVE_DISABLE: "1", AGENT_R1_DEBUG: "" },
    });
    assert.equal(res.status, 1, `${args[0]}: ${res.stderr}`);
    const lines = res.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${args[0]} printed ${lines.length} lines:\n${res.stderr}`);
    assert.match(lines[0], /^error: .*no-such-model/, args[0]);
  }
});

test("backend choice: bad values name the allowed ones; env AGENT_R1_BACKEND is the default; engine.backend in the config", async () => {
  const io = captureIO();
  assert.equal(
    await runCli(["score", "--model", fx.base, "--input", "x.jsonl", "--backend", "gpu"], io),
    2,
    "a usage error",
  );
  assert.match(io.stderr.join("\n"), /score: --backend: unknown backend 'gpu'; choose one of: auto, native, tfjs/);

  const before = process.env.AGENT_R1_BACKEND;
  process.env.AGENT_R1_BACKEND = "tfjs";
  try {
    const e = await LocalEngine.load(fx.base, { workers: 0 });
    assert.equal(e.backend, "tfjs");
    await e.dispose();
    process.env.AGENT_R1_BACKEND = "cuda";
    await assert.rejects(() => LocalEngine.load(fx.base, { workers: 0 }), /AGENT_R1_BACKEND: unknown backend 'cuda'/);
  } finally {
    if (before === undefined) delete process.env.AGENT_R1_BACKEND;
    else process.env.AGENT_R1_BACKEND = before;
  }

  assert.equal(loadConfig(undefined, ["engine.backend=tfjs"]).engine.backend, "tfjs");
  assert.equal(loadConfig(undefined, []).engine.backend, undefined);
  assert.throws(() => loadConfig(undefined, ["engine.backend=gpu"]), /engine\.backend/);
});
