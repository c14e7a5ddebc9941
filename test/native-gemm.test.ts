/**
 * The project's own matrix products (native/gemm.c, gemm_x86.c) against a plain float64 loop,
 * on every micro-kernel this CPU runs (AVX-512, AVX2, portable), on one and two threads: odd
 * shapes that leave edge tiles everywhere, shapes that cross every block size, one-row products
 * (the decode path), transposes, broadcast batches, and views that start anywhere on a shared
 * buffer, with guard floats around the output to catch a write out of bounds. Where the addon
 * was built with a system BLAS, both implementations are also compared with each other.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { loadNative, type NativeAddon } from "../src/engine/local/native.js";
import { Rng } from "../src/util/rng.js";
import { native } from "./native-helpers.js";

function addonOrFail(): NativeAddon {
  const st = loadNative();
  assert.ok(st.ok, `the native addon did not load: ${st.ok ? "" : st.reason}`);
  return st.addon;
}

after(() => {
  const st = loadNative();
  if (!st.ok) return;
  st.addon.setGemmKernel("auto");
  st.addon.setThreads(1);
});

const KERNELS = ["avx512", "avx2", "portable"] as const;

/** (m, n, k): edge tiles in every direction, one row, k = 1, tall-skinny, and products past the block sizes. */
const SHAPES: [number, number, number][] = [
  [1, 1, 1],
  [1, 7, 5],
  [1, 2051, 37],
  [2, 3, 1],
  [13, 17, 19],
  [37, 41, 53],
  [20, 30, 1],
  [513, 3, 67],
  [3, 700, 5],
  [12, 32, 16],
  [25, 65, 33],
  [150, 97, 400],
  [290, 70, 130],
  [2, 4099, 3],
];

const rand = (rng: Rng, n: number) => Float32Array.from({ length: n }, () => rng.normal());

/** C (batch, m, n) = op(A_{ai}) @ op(B_{bi}) in float64, as the addon's gemm defines it. */
function reference(
  a: Float32Array,
  b: Float32Array,
  batch: number,
  m: number,
  n: number,
  k: number,
  ta: boolean,
  tb: boolean,
  aIndex?: Int32Array | null,
  bIndex?: Int32Array | null,
): Float64Array {
  const out = new Float64Array(batch * m * n);
  for (let i = 0; i < batch; i++) {
    const ao = (aIndex ? aIndex[i] : i) * m * k,
      bo = (bIndex ? bIndex[i] : i) * k * n;
    for (let r = 0; r < m; r++)
      for (let c = 0; c < n; c++) {
        let s = 0;
        for (let j = 0; j < k; j++) s += a[ao + (ta ? j * m + r : r * k + j)] * b[bo + (tb ? c * k + j : j * n + c)];
        out[(i * m + r) * n + c] = s;
      }
  }
  return out;
}

/** Each entry within float32 rounding of a k-term sum: |got - want| <= 1e-6 * (k + 8) * Σ|a||b| scale. */
function assertProduct(got: Float32Array, want: Float64Array, k: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  let scale = 1e-30;
  for (const w of want) scale = Math.max(scale, Math.abs(w));
  const tol = 1e-6 * (k + 8) * Math.max(1, scale / Math.sqrt(k));
  for (let i = 0; i < got.length; i++) {
    if (!(Math.abs(got[i] - want[i]) <= tol))
      assert.fail(`${what}: entry ${i} is ${got[i]}, want ${want[i]} (tolerance ${tol.toExponential(2)})`);
  }
}

test("own gemm on every micro-kernel and on 1 and 2 threads: odd shapes, transposes, block edges", native, () => {
  const addon = addonOrFail();
  addon.setBlas("own");
  const rng = new Rng(11);
  const ran: string[] = [];
  for (const kernel of KERNELS) {
    if (!addon.setGemmKernel(kernel)) continue; // this CPU cannot run it
    assert.equal(addon.info().kernel, kernel);
    ran.push(kernel);
    for (const threads of [1, 2]) {
      addon.setThreads(threads);
      for (const [m, n, k] of SHAPES)
        for (const ta of [false, true])
          for (const tb of [false, true]) {
            const a = rand(rng, m * k),
              b = rand(rng, k * n),
              c = new Float32Array(m * n).fill(Number.NaN);
            addon.gemm(a, b, c, 1, m, n, k, ta, tb);
            assertProduct(
              c,
              reference(a, b, 1, m, n, k, ta, tb),
              k,
              `${kernel} x${threads} (${m},${n},${k}) ${ta ? "T" : "N"}${tb ? "T" : "N"}`,
            );
          }
    }
  }
  assert.ok(ran.includes("portable"), "the portable kernel runs everywhere");
  assert.equal(addon.setGemmKernel("sse9" as "auto"), false, "an unknown kernel is refused");
  addon.setGemmKernel("auto");
  addon.setThreads(1);
});

test(
  "own gemm on views that start anywhere in a shared buffer: results exact to the reference, guards untouched",
  native,
  () => {
    const addon = addonOrFail();
    addon.setBlas("own");
    const rng = new Rng(12);
    for (const kernel of KERNELS) {
      if (!addon.setGemmKernel(kernel)) continue;
      for (const [m, n, k] of [
        [7, 33, 9],
        [1, 45, 17],
        [29, 5, 31],
      ] as [number, number, number][]) {
        for (const offset of [1, 3, 5]) {
          // One buffer holds a, b and c at odd float offsets, with 16 guard floats around c.
          const buf = new Float32Array(offset + m * k + 1 + k * n + 2 + 16 + m * n + 16);
          const a = buf.subarray(offset, offset + m * k);
          const b = buf.subarray(offset + m * k + 1, offset + m * k + 1 + k * n);
          const cStart = offset + m * k + 1 + k * n + 2 + 16;
          const c = buf.subarray(cStart, cStart + m * n);
          a.set(rand(rng, m * k));
          b.set(rand(rng, k * n));
          buf.fill(-777, cStart - 16, cStart);
          buf.fill(-777, cStart + m * n);
          for (const [ta, tb] of [
            [false, false],
            [true, true],
          ] as [boolean, boolean][]) {
            addon.gemm(a, b, c, 1, m, n, k, ta, tb);
            assertProduct(c, reference(a, b, 1, m, n, k, ta, tb), k, `${kernel} view +${offset} (${m},${n},${k})`);
            for (const i of [...Array(16).keys()]
              .map((j) => cStart - 16 + j)
              .concat([...Array(16).keys()].map((j) => cStart + m * n + j)))
              assert.equal(
                buf[i],
                -777,
                `${kernel} view +${offset} (${m},${n},${k}): guard float ${i - cStart} changed`,
              );
          }
        }
      }
    }
    addon.setGemmKernel("auto");
  },
);

test("own gemm: a row gets the same bits alone as inside a larger product (batch-invariant decoding)", native, () => {
  const addon = addonOrFail();
  addon.setBlas("own");
  const rng = new Rng(15);
  for (const kernel of KERNELS) {
    if (!addon.setGemmKernel(kernel)) continue;
    for (const [n, k] of [
      [1536, 512],
      [37, 900],
      [2050, 17],
    ] as [number, number][]) {
      for (const m of [2, 7, 32, 150]) {
        const a = rand(rng, m * k),
          b = rand(rng, k * n),
          all = new Float32Array(m * n),
          one = new Float32Array(n);
        addon.gemm(a, b, all, 1, m, n, k, false, false);
        for (const r of [0, m - 1]) {
          addon.gemm(a.subarray(r * k, (r + 1) * k), b, one, 1, 1, n, k, false, false);
          const row = all.subarray(r * n, (r + 1) * n);
          const at = one.findIndex((x, j) => x !== row[j]);
          assert.equal(
            at,
            -1,
            `${kernel} (${m},${n},${k}) row ${r}: alone ${one[at]} vs in the batch ${row[at]} at column ${at}`,
          );
        }
      }
    }
  }
  addon.setGemmKernel("auto");
});

test("own gemm: batches broadcast through index arrays, both operands", native, () => {
  const addon = addonOrFail();
  addon.setBlas("own");
  const rng = new Rng(13);
  const [m, n, k] = [9, 21, 14];
  const a = rand(rng, 2 * m * k),
    b = rand(rng, 3 * k * n),
    c = new Float32Array(4 * m * n);
  const aIndex = Int32Array.of(1, 0, 1, 0),
    bIndex = Int32Array.of(2, 2, 0, 1);
  for (const [ta, tb] of [
    [false, true],
    [true, false],
  ] as [boolean, boolean][]) {
    addon.gemm(a, b, c, 4, m, n, k, ta, tb, aIndex, bIndex);
    assertProduct(
      c,
      reference(a, b, 4, m, n, k, ta, tb, aIndex, bIndex),
      k,
      `broadcast ${ta ? "T" : "N"}${tb ? "T" : "N"}`,
    );
  }
});

test("own gemm agrees with the system BLAS on the engine's shapes (where the addon has one)", native, (t) => {
  const addon = addonOrFail();
  if (addon.info().system === null) {
    // CI installs libopenblas-dev so that this runs; elsewhere it is optional.
    assert.notEqual(process.env.CI, "true", "under CI the addon must be built with the system BLAS");
    t.skip("this addon was built without a system BLAS");
    return;
  }
  const rng = new Rng(14);
  // A decode step of batch 32, a training micro-batch's projections and their gradients, attention.
  const shapes: [number, number, number, boolean, boolean][] = [
    [32, 1536, 512, false, false],
    [1, 2048, 512, false, false],
    [512, 512, 1536, false, true],
    [512, 1536, 512, true, false],
    [256, 64, 256, false, false],
    [256, 256, 64, false, true],
  ];
  for (const [m, n, k, ta, tb] of shapes) {
    const a = rand(rng, m * k),
      b = rand(rng, k * n);
    const own = new Float32Array(m * n),
      sys = new Float32Array(m * n);
    addon.setBlas("own");
    addon.gemm(a, b, own, 1, m, n, k, ta, tb);
    addon.setBlas("system");
    addon.gemm(a, b, sys, 1, m, n, k, ta, tb);
    assertProduct(own, Float64Array.from(sys), k, `own vs system (${m},${n},${k}) ${ta ? "T" : "N"}${tb ? "T" : "N"}`);
  }
  addon.setBlas("own");
  assert.equal(addon.info().blas, "own");
});

test(
  "setBlas: own always; system only in a build that has one; anything else is an error naming the choices",
  native,
  () => {
    const addon = addonOrFail();
    addon.setBlas("own");
    assert.equal(addon.info().blas, "own");
    if (addon.info().system === null) assert.throws(() => addon.setBlas("system"), /no system BLAS/);
    assert.throws(() => addon.setBlas("mkl" as "own"), /"own" or "system"/);
    assert.equal(addon.info().blas, "own", "a refused choice changes nothing");
  },
);
