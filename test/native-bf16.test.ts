/**
 * engine.bf16Products on the native engine with a tiny bf16 Qwen2 model made here: "exact" (the
 * weights widened to float32) gives the TF.js engine's logprobs; "tiles" (AMX, or AVX512_BF16's dot
 * products, the activations rounded to bfloat16) stays within bfloat16 rounding of them, is not the
 * same computation, and gives a sequence the same bits alone as in a batch; full fine-tuning trains
 * float32 weights whatever the setting.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { readModelConfig } from "../src/model/model-dir.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { applyBf16Products, loadAddon } from "../src/engine/local/addon.js";
import type { Bf16Products } from "../src/engine/local/addon.js";
import { Rng } from "../src/util/rng.js";
import { tempDir } from "./helpers.js";
import { tinyBf16Model } from "./model-fixtures.js";
import { ENGINES } from "./engine-internals.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
let root: string, base: string, vocab: number;

before(async () => {
  root = tempDir("agent-r1-native-bf16-");
  base = await tinyBf16Model(root, "base", 4);
  vocab = readModelConfig(base).vocabSize;
});

after(() => {
  rmSync(root, { recursive: true, force: true });
  const st = loadAddon();
  if (st.ok) applyBf16Products(st.addon, "auto");
});

/** The bfloat16 kernel this CPU runs (AMX tiles first), or null. */
const bf16KernelHere = (): "amx" | "avx512bf16" | null => {
  const st = loadAddon();
  if (!st.ok) return null;
  const kernel = (["amx", "avx512bf16"] as const).find((k) => st.addon.setGemmKernel(k)) ?? null;
  st.addon.setGemmKernel("auto");
  return kernel;
};

async function logprobs(backend: "native" | "tfjs", bf16Products: Bf16Products, seqs: number[][]) {
  const e = await LocalEngine.load(base, { workers: 0, backend, bf16Products });
  try {
    return await e.computeLogprobs(seqs);
  } finally {
    await e.dispose();
  }
}

function maxDiff(x: (number | null)[][], y: (number | null)[][]): number {
  let d = 0;
  x.forEach((row, i) => row.forEach((v, j) => v !== null && (d = Math.max(d, Math.abs(v - y[i][j]!)))));
  return d;
}

test(
  "bf16Products: exact matches TF.js; tiles is within bfloat16 rounding and batch-invariant",
  { skip },
  async (t) => {
    const rng = new Rng(9);
    const seqs = [9, 14, 5].map((n) => Array.from({ length: n }, () => 3 + rng.int(vocab - 3)));
    const tf = await logprobs("tfjs", "auto", seqs);
    const exact = await logprobs("native", "exact", seqs);
    assert.ok(maxDiff(exact, tf) < 1e-4, `exact vs TF.js: ${maxDiff(exact, tf)}`);
    const kernel = bf16KernelHere();
    if (!kernel) {
      await assert.rejects(
        logprobs("native", "tiles", seqs),
        (e: Error & { hint?: string }) =>
          /no bfloat16 units/.test(e.message) && /bf16Products=auto or exact/.test(e.hint ?? ""),
      );
      t.diagnostic("no AMX nor AVX512_BF16 here: tiles refused by name");
      return;
    }
    t.diagnostic(`tiles on ${kernel}`);
    const tiles = await logprobs("native", "tiles", seqs);
    const d = maxDiff(tiles, exact);
    assert.ok(d > 0, "tiles computed exactly what exact did: the setting had no effect");
    assert.ok(d < 0.05, `tiles vs exact: ${d}, more than bfloat16 rounding explains`);
    const alone = await logprobs("native", "tiles", [seqs[1]]);
    assert.deepEqual(alone[0], tiles[1], "a sequence alone gets the batch's bits");
  },
);

test("bf16Products: auto picks tiles exactly where the CPU has them", { skip }, () => {
  const st = loadAddon();
  assert.ok(st.ok);
  const kernel = bf16KernelHere();
  assert.equal(applyBf16Products(st.addon, "auto"), kernel ? "tiles" : "exact");
  if (kernel) assert.equal(st.addon.info().kernel, kernel, "auto is the best bfloat16 kernel");
  assert.equal(applyBf16Products(st.addon, "exact"), "exact");
  assert.ok(!["amx", "avx512bf16"].includes(st.addon.info().kernel), "exact leaves the bfloat16 kernels");
  if (kernel) {
    assert.equal(applyBf16Products(st.addon, "tiles"), "tiles");
    assert.equal(st.addon.info().kernel, kernel, "tiles is the best bfloat16 kernel");
  }
  applyBf16Products(st.addon, "auto");
});
