/**
 * Matrix-product micro-benchmark: GFLOPS of the project's own kernels and of the system BLAS the
 * addon was built with (OpenBLAS, Accelerate), on the M model's shapes (hidden 512, kv 128,
 * ffn 1536, vocab 2048), through the addon's gemm as the engine calls it. One JSON line per shape:
 *   {"shape":"...","m":..,"n":..,"k":..,"op":"NN"|"NT"|"TN","own_gflops":x,"system_gflops":y,"ratio":own/system}
 * then one line per dtype shape (decode steps, and a 0.5B training micro-batch forward and dX) with B
 * in each dtype the engine keeps weights in, through gemmEx on the own kernels:
 *   {"shape":"...","m":..,"n":..,"k":..,"op":"NN"|"NT","f32_gflops":x,"bf16_gflops":y,"f16_gflops":z,
 *    "bf16_vs_f32":y/x,"f16_vs_f32":z/x,"f32_acc_gflops":a,"bf16_acc_gflops":b}
 * (the _acc figures accumulate into C: C += A @ B), then a summary line
 * {"kernel":"avx512","threads":1,"geomean_ratio":r,"min_ratio":r,"system":"OpenBLAS ..."}.
 * Each figure is the best of 5 rounds; the two implementations run in alternating rounds, so both
 * see the same machine. Cold (--cold): a 32 MiB buffer is written before each call (not timed), so
 * the inputs come from memory, as they do between the engine's operations.
 *   npm run bench:gemm [-- --threads N] [-- --cold]
 * Without a system BLAS only the own figures are printed.
 */
import { parseArgs } from "node:util";
import { loadAddon, type Addon } from "../src/engine/local/addon.js";
import { f32BitsToBF16, f32BitsToF16 } from "../src/model/safetensors.js";
import { Rng } from "../src/util/rng.js";

const { values: args } = parseArgs({
  options: { threads: { type: "string", default: "1" }, cold: { type: "boolean", default: false } },
});

/** [name, m, n, k, transA, transB]: M's products in decoding and in one training micro-batch (512 tokens). */
const SHAPES: [string, number, number, number, boolean, boolean][] = [
  ["decode b1: ffn up", 1, 1536, 512, false, false],
  ["decode b1: lm head", 1, 2048, 512, false, false],
  ["decode b32: q/o", 32, 512, 512, false, false],
  ["decode b32: ffn up", 32, 1536, 512, false, false],
  ["decode b32: ffn down", 32, 512, 1536, false, false],
  ["train: q/o", 512, 512, 512, false, false],
  ["train: k/v", 512, 128, 512, false, false],
  ["train: ffn up", 512, 1536, 512, false, false],
  ["train: ffn down", 512, 512, 1536, false, false],
  ["train: lm head (tied)", 512, 2048, 512, false, true],
  ["train: dX of ffn up", 512, 512, 1536, false, true],
  ["train: dW of ffn up", 512, 1536, 512, true, false],
  ["train: dW of k/v", 512, 128, 512, true, false],
  ["train: attention scores", 256, 256, 64, false, true],
  ["train: attention x values", 256, 64, 256, false, false],
  ["train: dV", 256, 64, 256, true, false],
];

/**
 * [name, m, n, k, transB]: decode steps of batch 1 and 32 on the M model's ffn up and on a 0.5B model's
 * (896 -> 4864), and a 512-token training micro-batch through the 0.5B's ffn up, forward (B (k, n)) and
 * the input gradient dX = dY . Wᵀ (B held (n, k)), as LoRA training multiplies by the frozen weights.
 */
const DTYPE_SHAPES: [string, number, number, number, boolean][] = [
  ["decode b1: ffn up", 1, 1536, 512, false],
  ["decode b32: ffn up", 32, 1536, 512, false],
  ["decode b1: ffn up 0.5B", 1, 4864, 896, false],
  ["decode b32: ffn up 0.5B", 32, 4864, 896, false],
  ["train: ffn up 0.5B", 512, 4864, 896, false],
  ["train: dX of ffn up 0.5B", 512, 896, 4864, true],
];

const junk = new Float32Array(8 << 20);
function flush(): void {
  for (let i = 0; i < junk.length; i += 16) junk[i] += 1;
}

function timeOne(
  addon: Addon,
  a: Float32Array,
  b: Float32Array,
  c: Float32Array,
  s: (typeof SHAPES)[number],
  reps: number,
): number {
  const [, m, n, k, ta, tb] = s;
  let total = 0;
  for (let r = 0; r < reps; r++) {
    if (args.cold) flush();
    const t0 = performance.now();
    addon.gemm(a, b, c, 1, m, n, k, ta, tb);
    total += performance.now() - t0;
  }
  return total / reps / 1000;
}

/** Seconds per gemmEx call, the mean of reps calls. */
function timeEx(
  addon: Addon,
  a: Float32Array,
  b: Float32Array | Uint16Array,
  c: Float32Array,
  [m, n, k, tb]: [number, number, number, boolean],
  dtype: "f32" | "bf16" | "f16",
  accumulate: boolean,
  reps: number,
): number {
  let total = 0;
  for (let r = 0; r < reps; r++) {
    if (args.cold) flush();
    const t0 = performance.now();
    addon.gemmEx(a, b, c, m, n, k, false, tb, dtype, accumulate);
    total += performance.now() - t0;
  }
  return total / reps / 1000;
}

/** f32 vs bf16 vs f16 B (and accumulating into C) on the decode shapes, best of 5 alternating rounds. */
function dtypeRows(addon: Addon, rng: Rng): void {
  addon.setBlas("own");
  for (const [shape, m, n, k, tb] of DTYPE_SHAPES) {
    const a = Float32Array.from({ length: m * k }, () => rng.normal());
    const b32 = Float32Array.from({ length: k * n }, () => rng.normal());
    const u32 = new Uint32Array(b32.buffer);
    const bf16 = Uint16Array.from(u32, (x) => f32BitsToBF16(x));
    const f16 = Uint16Array.from(u32, (x) => f32BitsToF16(x));
    const c = new Float32Array(m * n);
    const flops = 2 * m * n * k;
    const reps = Math.max(3, Math.min(args.cold ? 50 : 2000, Math.round(2e8 / flops)));
    const runs: [string, Float32Array | Uint16Array, "f32" | "bf16" | "f16", boolean][] = [
      ["f32", b32, "f32", false],
      ["bf16", bf16, "bf16", false],
      ["f16", f16, "f16", false],
      ["f32_acc", b32, "f32", true],
      ["bf16_acc", bf16, "bf16", true],
    ];
    const best: Record<string, number> = {};
    for (let round = 0; round < 5; round++) {
      for (const [name, b, dtype, acc] of round % 2 === 0 ? runs : [...runs].reverse()) {
        c.fill(0);
        timeEx(addon, a, b, c, [m, n, k, tb], dtype, acc, 1); // warm the packing buffers
        best[name] = Math.min(best[name] ?? Infinity, timeEx(addon, a, b, c, [m, n, k, tb], dtype, acc, reps));
      }
    }
    const gf = (name: string) => Math.round((flops / best[name] / 1e9) * 10) / 10;
    const ratio = (name: string) => Math.round((best.f32 / best[name]) * 100) / 100;
    console.log(
      JSON.stringify({
        shape,
        m,
        n,
        k,
        op: tb ? "NT" : "NN",
        f32_gflops: gf("f32"),
        bf16_gflops: gf("bf16"),
        f16_gflops: gf("f16"),
        bf16_vs_f32: ratio("bf16"),
        f16_vs_f32: ratio("f16"),
        f32_acc_gflops: gf("f32_acc"),
        bf16_acc_gflops: gf("bf16_acc"),
      }),
    );
  }
}

function main(): void {
  const st = loadAddon();
  if (!st.ok) throw new Error(`the native addon is unavailable: ${st.reason}`);
  const addon = st.addon;
  const threads = Number(args.threads);
  if (!Number.isInteger(threads) || threads < 1)
    throw new Error(`--threads must be a positive integer, got ${args.threads}`);
  addon.setThreads(threads);
  const system = addon.info().system;
  const impls = system === null ? (["own"] as const) : (["own", "system"] as const);
  const rng = new Rng(5);
  const ratios: number[] = [];
  for (const s of SHAPES) {
    const [shape, m, n, k, ta, tb] = s;
    const a = Float32Array.from({ length: m * k }, () => rng.normal());
    const b = Float32Array.from({ length: k * n }, () => rng.normal());
    const c = new Float32Array(m * n);
    const flops = 2 * m * n * k;
    const reps = Math.max(3, Math.min(args.cold ? 50 : 2000, Math.round(2e8 / flops)));
    const best: Record<string, number> = {};
    for (let round = 0; round < 5; round++) {
      for (const impl of round % 2 === 0 ? impls : [...impls].reverse()) {
        addon.setBlas(impl);
        timeOne(addon, a, b, c, s, 1); // warm the packing buffers
        const sec = timeOne(addon, a, b, c, s, reps);
        best[impl] = Math.min(best[impl] ?? Infinity, sec);
      }
    }
    const gf = (impl: string) => Math.round((flops / best[impl] / 1e9) * 10) / 10;
    const line: Record<string, unknown> = {
      shape,
      m,
      n,
      k,
      op: `${ta ? "T" : "N"}${tb ? "T" : "N"}`,
      own_gflops: gf("own"),
    };
    if (system !== null) {
      line.system_gflops = gf("system");
      line.ratio = Math.round((best.system / best.own) * 100) / 100;
      ratios.push(best.system / best.own);
    }
    console.log(JSON.stringify(line));
  }
  addon.setBlas("own");
  dtypeRows(addon, rng);
  const summary: Record<string, unknown> = { kernel: addon.info().kernel, threads, cold: args.cold };
  if (ratios.length > 0) {
    summary.geomean_ratio =
      Math.round(Math.exp(ratios.reduce((x, r) => x + Math.log(r), 0) / ratios.length) * 100) / 100;
    summary.min_ratio = Math.round(Math.min(...ratios) * 100) / 100;
    summary.system = system;
  }
  console.log(JSON.stringify(summary));
}

main();
