/**
 * The project's own matrix products (native/gemm.c, gemm_x86.c) against a plain float64 loop,
 * on every micro-kernel this CPU runs (AVX-512, AVX2, portable), on one and two threads: odd
 * shapes that leave edge tiles everywhere, shapes that cross every block size, one-row products
 * (the decode path), transposes, broadcast batches, and views that start anywhere on a shared
 * buffer, with guard floats around the output to catch a write out of bounds. Where the addon
 * was built with a system BLAS, both implementations are also compared with each other.
 * gemmEx (the engine's blas_gemm) with B in bfloat16 and float16, and C accumulated into: against
 * the same reference, bit for bit against float32 B holding the widened values, batch-invariant.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { loadAddon, type Addon } from "../src/engine/local/addon.js";
import { f32BitsToBF16, f32BitsToF16 } from "../src/model/safetensors.js";
import { Rng } from "../src/util/rng.js";
import { native } from "./native-helpers.js";

function addonOrFail(): Addon {
  const st = loadAddon();
  assert.ok(st.ok, `the native addon did not load: ${st.ok ? "" : st.reason}`);
  return st.addon;
}

after(() => {
  const st = loadAddon();
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

type HalfDtype = "bf16" | "f16";
const DTYPES = ["f32", "bf16", "f16"] as const;

/** The values of every bfloat16 / float16 bit pattern, decoded here (not by the code under test). */
const HALF_VALUES: Record<HalfDtype, Float32Array> = {
  bf16: new Float32Array(Uint32Array.from({ length: 65536 }, (_, h) => h << 16).buffer),
  f16: Float32Array.from({ length: 65536 }, (_, h) => {
    const sign = h & 0x8000 ? -1 : 1,
      e = (h >> 10) & 0x1f,
      m = h & 0x3ff;
    return e === 0 ? sign * m * 2 ** -24 : e === 31 ? (m ? NaN : sign * Infinity) : sign * (1024 + m) * 2 ** (e - 25);
  }),
};

/** x rounded to dtype: its bit patterns and their values as float32. */
function toHalf(x: Float32Array, dtype: HalfDtype): { bits: Uint16Array; values: Float32Array } {
  const u32 = new Uint32Array(x.buffer, x.byteOffset, x.length),
    bits = new Uint16Array(x.length),
    values = new Float32Array(x.length),
    table = HALF_VALUES[dtype];
  for (let i = 0; i < x.length; i++) {
    bits[i] = dtype === "bf16" ? f32BitsToBF16(u32[i]) : f32BitsToF16(u32[i]);
    values[i] = table[bits[i]];
  }
  return { bits, values };
}

/** B's random values: normal, and one in 13 tiny (below float16's smallest normal, 6.1e-5). */
const randB = (rng: Rng, n: number) =>
  Float32Array.from({ length: n }, (_, i) => rng.normal() * (i % 13 === 5 ? 1e-6 : 1));

/** B for gemmEx in dtype: the array to pass and the float32 values it holds. */
function bIn(
  rng: Rng,
  n: number,
  dtype: (typeof DTYPES)[number],
): { b: Float32Array | Uint16Array; values: Float32Array } {
  const x = randB(rng, n);
  if (dtype === "f32") return { b: x, values: x };
  const { bits, values } = toHalf(x, dtype);
  return { b: bits, values };
}

/** (m, n, k): gemm's shapes, plus k = 0, GEMV rows past the kc block and split across threads, and
 * products just below and above the row counts that read B in place (48 for AVX-512). */
const EX_SHAPES: [number, number, number][] = [
  ...SHAPES,
  [3, 5, 0],
  [1, 9, 0],
  [1, 1543, 401],
  [47, 63, 385],
  [49, 130, 390],
  [64, 33, 17],
];

function firstDiff(x: Float32Array, y: Float32Array): number {
  return x.findIndex((v, i) => !Object.is(v, y[i]));
}

test(
  "own gemmEx: B in float32, bfloat16 and float16, written or accumulated, on every kernel and 1 and 2 threads",
  native,
  () => {
    const addon = addonOrFail();
    addon.setBlas("own");
    const rng = new Rng(21);
    const kernels = KERNELS.filter((kn) => addon.setGemmKernel(kn));
    assert.ok(kernels.includes("portable"));
    for (const [m, n, k] of EX_SHAPES)
      for (const ta of [false, true])
        for (const tb of [false, true])
          for (const dtype of DTYPES)
            for (const accumulate of [false, true]) {
              const a = rand(rng, m * k),
                { b, values } = bIn(rng, k * n, dtype),
                c0 = rand(rng, m * n);
              const want = reference(a, values, 1, m, n, k, ta, tb);
              if (accumulate) for (let i = 0; i < want.length; i++) want[i] += c0[i];
              const what = (kernel: string, threads: number) =>
                `${kernel} x${threads} ${dtype}${accumulate ? " +=" : ""} (${m},${n},${k}) ${ta ? "T" : "N"}${tb ? "T" : "N"}`;
              let asF32: Float32Array | undefined; // the product of the widened values as a float32 B
              for (const kernel of kernels) {
                addon.setGemmKernel(kernel);
                for (const threads of [1, 2]) {
                  addon.setThreads(threads);
                  const c = accumulate ? c0.slice() : new Float32Array(m * n).fill(Number.NaN);
                  addon.gemmEx(a, b, c, m, n, k, ta, tb, dtype, accumulate);
                  if (k === 0) {
                    assert.equal(firstDiff(c, accumulate ? c0 : new Float32Array(m * n)), -1, what(kernel, threads));
                    continue;
                  }
                  assertProduct(c, want, k, what(kernel, threads));
                  if (dtype === "f32") continue;
                  // Widening is exact and every path sums in the same order: the same bits as float32 B.
                  if (threads === 1) {
                    asF32 = accumulate ? c0.slice() : new Float32Array(m * n);
                    addon.gemmEx(a, values, asF32, m, n, k, ta, tb, "f32", accumulate);
                  }
                  const at = firstDiff(c, asF32!);
                  assert.equal(at, -1, `${what(kernel, threads)}: ${c[at]} vs ${asF32![at]} with float32 B at ${at}`);
                }
              }
            }
    addon.setGemmKernel("auto");
    addon.setThreads(1);
  },
);

test(
  "own gemmEx: a row gets the same bits alone as in a batch, for bfloat16 and float16 B too, B transposed or not",
  native,
  () => {
    const addon = addonOrFail();
    addon.setBlas("own");
    const rng = new Rng(22);
    const kernels = KERNELS.filter((kn) => addon.setGemmKernel(kn));
    // Batch sizes on both sides of where each kernel stops reading B in place (48, 24, 16 rows), each
    // written or accumulated into.
    const batches: [number, boolean][] = [
      [2, false],
      [13, true],
      [32, false],
      [47, true],
      [49, false],
      [64, true],
    ];
    for (const [n, k] of [
      [1536, 512],
      [37, 900],
      [2050, 17],
      [63, 385],
    ] as [number, number][])
      for (const dtype of DTYPES) {
        const { b } = bIn(rng, k * n, dtype);
        for (const kernel of kernels) {
          addon.setGemmKernel(kernel);
          for (const threads of [1, 2]) {
            addon.setThreads(threads);
            for (const [m, accumulate] of batches)
              for (const tb of [false, true]) {
                // B is (k, n), or with tb the same floats as (n, k): the engine holds weights (out, in)
                const a = rand(rng, m * k),
                  c0 = rand(rng, m * n),
                  all = accumulate ? c0.slice() : new Float32Array(m * n);
                addon.gemmEx(a, b, all, m, n, k, false, tb, dtype, accumulate);
                for (const r of [0, m - 1]) {
                  const one = accumulate ? c0.slice(r * n, (r + 1) * n) : new Float32Array(n);
                  addon.gemmEx(a.subarray(r * k, (r + 1) * k), b, one, 1, n, k, false, tb, dtype, accumulate);
                  const row = all.subarray(r * n, (r + 1) * n);
                  const at = firstDiff(one, row);
                  assert.equal(
                    at,
                    -1,
                    `${kernel} x${threads} ${dtype}${accumulate ? " +=" : ""} (${m},${n},${k})${tb ? " B transposed" : ""} row ${r}: alone ${one[at]} vs in the batch ${row[at]} at column ${at}`,
                  );
                }
              }
          }
        }
      }
    addon.setGemmKernel("auto");
    addon.setThreads(1);
  },
);

/** The kernels that multiply a bfloat16 B in bfloat16 (A rounded to it): AMX tiles, AVX512_BF16 dot products. */
const BF16_KERNELS = ["amx", "avx512bf16"] as const;

for (const kernel of BF16_KERNELS)
  test(
    `${kernel}: a bfloat16 B is the product with A rounded to bfloat16, B transposed or not; a row alone gets the batch's bits; guards untouched`,
    native,
    (t) => {
      const addon = addonOrFail();
      addon.setBlas("own");
      if (!addon.setGemmKernel(kernel)) {
        t.skip(`this CPU or OS cannot run ${kernel}`);
        return;
      }
      assert.equal(addon.info().kernel, kernel);
      const rng = new Rng(23);
      // Edge blocks in every direction: k past one block (256) and odd, columns past one packed
      // block (256 for AMX, 512 for AVX512_BF16) and past the one-row product's chunk (2048), rows
      // past one group (256) and one block of A (384), and row counts that are no multiple of 12.
      const shapes: [number, number, number][] = [
        [1, 1, 1],
        [1, 7, 5],
        [2, 1, 2],
        [3, 33, 31],
        [17, 300, 65],
        [33, 100, 600],
        [1, 520, 513],
        [13, 530, 257],
        [1, 2100, 40],
        [290, 70, 130],
        [400, 45, 36],
        [40, 4099, 3],
      ];
      for (const [m, n, k] of shapes)
        for (const tb of [false, true])
          for (const accumulate of [false, true])
            for (const threads of [1, 2]) {
              addon.setThreads(threads);
              const what = `${kernel} x${threads}${accumulate ? " +=" : ""} (${m},${n},${k})${tb ? " B transposed" : ""}`;
              const a = rand(rng, m * k),
                { b, values } = bIn(rng, k * n, "bf16"),
                c0 = rand(rng, m * n);
              const want = reference(toHalf(a, "bf16").values, values, 1, m, n, k, false, tb);
              if (accumulate) for (let i = 0; i < want.length; i++) want[i] += c0[i];
              // C inside a buffer with 16 guard floats on each side
              const buf = new Float32Array(m * n + 32).fill(-777),
                c = buf.subarray(16, 16 + m * n);
              c.set(accumulate ? c0 : new Float32Array(m * n).fill(Number.NaN));
              addon.gemmEx(a, b, c, m, n, k, false, tb, "bf16", accumulate);
              assertProduct(c, want, k, what);
              for (const i of [...Array(16).keys(), ...Array.from({ length: 16 }, (_, j) => 16 + m * n + j)])
                assert.equal(buf[i], -777, `${what}: guard float ${i} changed`);
              for (const r of [0, m - 1]) {
                const one = accumulate ? c0.slice(r * n, (r + 1) * n) : new Float32Array(n);
                addon.gemmEx(a.subarray(r * k, (r + 1) * k), b, one, 1, n, k, false, tb, "bf16", accumulate);
                const row = c.subarray(r * n, (r + 1) * n),
                  at = firstDiff(one, row);
                assert.equal(at, -1, `${what} row ${r}: alone ${one[at]} vs in the batch ${row[at]} at column ${at}`);
              }
            }
      // float32 and float16 B, and a transposed A, take the AVX-512 kernels: the same bits as with "avx512"
      for (const [dtype, ta] of [
        ["f32", false],
        ["f16", false],
        ["bf16", true],
      ] as const) {
        const [m, n, k] = [13, 70, 40];
        const a = rand(rng, m * k),
          { b } = bIn(rng, k * n, dtype),
          viaKernel = new Float32Array(m * n),
          via512 = new Float32Array(m * n);
        addon.gemmEx(a, b, viaKernel, m, n, k, ta, false, dtype);
        addon.setGemmKernel("avx512");
        addon.gemmEx(a, b, via512, m, n, k, ta, false, dtype);
        addon.setGemmKernel(kernel);
        assert.equal(firstDiff(viaKernel, via512), -1, `${dtype}${ta ? " A transposed" : ""} B on ${kernel} vs avx512`);
      }
      addon.setGemmKernel("auto");
      addon.setThreads(1);
    },
  );

test(
  "avx512bf16: every row gets the same bits alone as in batches on both sides of the block sizes, B transposed or not",
  native,
  (t) => {
    const addon = addonOrFail();
    addon.setBlas("own");
    if (!addon.setGemmKernel("avx512bf16")) {
      t.skip("this CPU has no AVX512_BF16");
      return;
    }
    const rng = new Rng(24);
    const batches: [number, boolean][] = [
      [2, false],
      [12, true],
      [32, false],
      [49, true],
      [385, false],
    ];
    for (const [n, k] of [
      [1536, 512],
      [37, 901],
      [2050, 17],
    ] as [number, number][]) {
      const { b } = bIn(rng, k * n, "bf16");
      for (const threads of [1, 2]) {
        addon.setThreads(threads);
        for (const [m, accumulate] of batches)
          for (const tb of [false, true]) {
            const a = rand(rng, m * k),
              c0 = rand(rng, m * n),
              all = accumulate ? c0.slice() : new Float32Array(m * n);
            addon.gemmEx(a, b, all, m, n, k, false, tb, "bf16", accumulate);
            for (const r of [0, Math.floor(m / 2), m - 1]) {
              const one = accumulate ? c0.slice(r * n, (r + 1) * n) : new Float32Array(n);
              addon.gemmEx(a.subarray(r * k, (r + 1) * k), b, one, 1, n, k, false, tb, "bf16", accumulate);
              const row = all.subarray(r * n, (r + 1) * n);
              const at = firstDiff(one, row);
              assert.equal(
                at,
                -1,
                `avx512bf16 x${threads}${accumulate ? " +=" : ""} (${m},${n},${k})${tb ? " B transposed" : ""} row ${r}: alone ${one[at]} vs in the batch ${row[at]} at column ${at}`,
              );
            }
          }
      }
    }
    addon.setGemmKernel("auto");
    addon.setThreads(1);
  },
);

test("a kernel the CPU lacks is refused, and auto picks the bfloat16 units where they are", native, (t) => {
  const addon = addonOrFail();
  const has = (name: "amx" | "avx512bf16") => {
    const ok = addon.setGemmKernel(name);
    if (ok) assert.equal(addon.info().kernel, name);
    addon.setGemmKernel("auto");
    return ok;
  };
  const amx = has("amx"),
    dot = has("avx512bf16");
  // forcing fails and changes nothing
  addon.setGemmKernel("portable");
  if (!amx) {
    assert.equal(addon.setGemmKernel("amx"), false, "amx forced on a CPU without AMX");
    assert.equal(addon.info().kernel, "portable", "a refused kernel changed the kernel in use");
  } else t.diagnostic("this CPU has AMX: its refusal is not tested here");
  if (!dot) {
    assert.equal(addon.setGemmKernel("avx512bf16"), false, "avx512bf16 forced on a CPU without AVX512_BF16");
    assert.equal(addon.info().kernel, "portable", "a refused kernel changed the kernel in use");
  } else t.diagnostic("this CPU has AVX512_BF16: its refusal is not tested here");
  addon.setGemmKernel("auto");
  const auto = addon.info().kernel;
  assert.equal(auto, amx ? "amx" : dot ? "avx512bf16" : auto, "auto is not the best bfloat16 kernel here");
  if (!amx && !dot) assert.ok(["avx512", "avx2", "portable"].includes(auto), auto);
});

test("gemmEx checks its arguments and names the bad one", native, () => {
  const addon = addonOrFail();
  const a = new Float32Array(6),
    b32 = new Float32Array(12),
    b16 = new Uint16Array(12),
    c = new Float32Array(8);
  addon.gemmEx(a, b16, c, 2, 4, 3, false, false, "bf16"); // accumulate defaults to false
  addon.gemmEx(a, b32, c, 2, 4, 3, false, false, "f32", true);
  assert.throws(() => addon.gemmEx(a, b32, c, 2, 4, 3, false, false, "bf16"), {
    name: "TypeError",
    message: /gemmEx: b .*bf16.* must be a Uint16Array/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c, 2, 4, 3, false, false, "f32"), {
    name: "TypeError",
    message: /gemmEx: b .*f32.* must be a Float32Array/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c, 2, 4, 3, false, false, "fp8" as "f16"), {
    name: "RangeError",
    message: /bDtype/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c, 2, 4, 3, false, false, 1 as unknown as "f16"), {
    name: "TypeError",
    message: /bDtype/,
  });
  assert.throws(() => addon.gemmEx(a.subarray(1), b16, c, 2, 4, 3, false, false, "f16"), {
    name: "RangeError",
    message: /gemmEx: a holds 5 floats, needs m\*k = 2\*3/,
  });
  assert.throws(() => addon.gemmEx(a, b16.subarray(1), c, 2, 4, 3, false, false, "f16"), {
    name: "RangeError",
    message: /gemmEx: b holds 11 elements, needs k\*n = 3\*4/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c.subarray(1), 2, 4, 3, false, false, "f16"), {
    name: "RangeError",
    message: /gemmEx: c holds 7 floats, needs m\*n = 2\*4/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c, 2, 4, 3, false, false, "f16", 1 as unknown as boolean), {
    name: "TypeError",
    message: /gemmEx: accumulate must be a boolean/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c, 2, -4, 3, false, false, "f16"), {
    name: "RangeError",
    message: /gemmEx: n/,
  });
  assert.throws(() => addon.gemmEx(a, b16, c, 2, 4, 3, 0 as unknown as boolean, false, "f16"), {
    name: "TypeError",
    message: /gemmEx: transA/,
  });
  assert.throws(() => (addon.gemmEx as unknown as (...x: unknown[]) => void)(a, b16, c, 2, 4, 3, false, false), {
    name: "TypeError",
    message: /needs at least 9 arguments/,
  });
});
