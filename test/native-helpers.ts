/** Shared by the native test files: comparisons, seeded tensors, gradients, the tiny model fixture. */
import { before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { initBackend, tf } from "../src/engine/local/tfjs/tf-backend.js";
import { Rng } from "../src/util/rng.js";
import { tempDir } from "./helpers.js";

export const nativeDisabled =
  Boolean(process.env.AGENT_R1_NATIVE_DISABLE) && process.env.AGENT_R1_NATIVE_DISABLE !== "0";
/** Test options: run unless AGENT_R1_NATIVE_DISABLE is set. */
export const native = { skip: nativeDisabled ? "AGENT_R1_NATIVE_DISABLE is set" : false };

/** Max |a - b| and max |b|. */
export function diff(a: ArrayLike<number>, b: ArrayLike<number>): { abs: number; scale: number } {
  assert.equal(a.length, b.length, "lengths differ");
  let abs = 0,
    scale = 0;
  for (let i = 0; i < a.length; i++) {
    abs = Math.max(abs, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return { abs, scale };
}

/** |a - b| <= rel * max|b| elementwise (plus a tiny absolute floor). */
export function assertClose(a: ArrayLike<number>, b: ArrayLike<number>, rel: number, what: string): void {
  const d = diff(a, b);
  assert.ok(d.abs <= rel * d.scale + 1e-7, `${what}: max abs diff ${d.abs} > ${rel} x ${d.scale}`);
}

/** A seeded normal tensor (our RNG, so every run draws the same values). */
export function normal(shape: number[], seed: number, scale = 1): tf.Tensor {
  const rng = new Rng(seed);
  return tf.tensor(
    Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => scale * rng.normal()),
    shape,
  );
}

/** f's value and its gradients for every input, of the loss Σ f(xs)·w for a fixed random cotangent w. */
export function valueAndGrads(f: (...xs: tf.Tensor[]) => tf.Tensor, xs: tf.Tensor[], w: tf.Tensor): Float32Array[] {
  return tf.tidy(() => {
    const y = f(...xs);
    const gs = tf.grads((...a: tf.Tensor[]) =>
      f(...a)
        .mul(w)
        .sum(),
    )(xs);
    return [y, ...gs].map((t) => Float32Array.from(t.dataSync()));
  });
}

/** The names of the kernels f runs. */
export async function kernelsRun(f: () => tf.Tensor): Promise<Set<string>> {
  const prof = await tf.profile(() => f());
  return new Set(prof.kernelNames);
}

/**
 * Registers hooks that start the backend and write a tiny model into a fresh temp dir (removed
 * after the file's tests); `root` and `base` (the model dir) are filled in by `before`.
 */
export function tinyModelFixture(prefix: string, seed: number): { root: string; base: string } {
  const fx = { root: "", base: "" };
  before(async () => {
    await initBackend();
    fx.root = tempDir(prefix);
    fx.base = path.join(fx.root, "tiny");
    await initModel({ preset: "tiny", out: fx.base, seed });
  });
  after(() => {
    fs.rmSync(fx.root, { recursive: true, force: true });
  });
  return fx;
}
