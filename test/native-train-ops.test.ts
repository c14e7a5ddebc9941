/**
 * The addon's optimizer kernels the C engine trains with (native/kernels/optim.c): AdamW's update of a
 * parameter and its moments, against the TF.js engine's composition of the same update (the
 * reference: equal bits, the same float32 operations in the same order); the squared gradient
 * norm, in double.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadAddon } from "../src/engine/local/addon.js";
import { tf } from "../src/engine/local/tfjs/tf-backend.js";
import { adamwUpdate, squaredNorm, type AdamWStep } from "../src/engine/local/tfjs/train-ops.js";
import { native, normal, tinyModelFixture } from "./native-helpers.js";

// Starts TF.js's wasm backend for the reference compositions.
tinyModelFixture("agent-r1-train-ops-", 0);

test("adamwStep equals the TF.js composition bit for bit (clipping scale, weight decay, later steps)", native, () => {
  const st = loadAddon();
  assert.ok(st.ok);
  const shape = [7, 13];
  const w = normal(shape, 80),
    g = normal(shape, 81, 0.1),
    m = normal(shape, 82, 0.01),
    v = normal(shape, 83, 0.01).abs();
  const cases: AdamWStep[] = [
    { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, bc1: 0.1, bc2: 0.001, gradScale: 1 },
    {
      lr: 3e-4,
      beta1: 0.8,
      beta2: 0.95,
      eps: 1e-6,
      weightDecay: 0.01,
      bc1: 1 - 0.8 ** 7,
      bc2: 1 - 0.95 ** 7,
      gradScale: 0.37,
    },
  ];
  for (const h of cases) {
    const ref = adamwUpdate(w, g, m, v, h).map((t) => {
      const d = Float32Array.from(t.dataSync());
      t.dispose();
      return d;
    });
    const [wo, mo, vo] = [w, m, v].map((t) => Float32Array.from(t.dataSync()));
    const n = wo.length;
    st.addon.adamwStep(
      Float32Array.from(w.dataSync()),
      Float32Array.from(g.dataSync()),
      Float32Array.from(m.dataSync()),
      Float32Array.from(v.dataSync()),
      wo,
      mo,
      vo,
      n,
      h.lr,
      h.beta1,
      h.beta2,
      h.eps,
      h.weightDecay,
      h.bc1,
      h.bc2,
      h.gradScale,
    );
    [wo, mo, vo].forEach((out, i) => assert.deepEqual(out, ref[i], `${["w", "m", "v"][i]} (gradScale ${h.gradScale})`));
  }
  const want = [...g.dataSync(), ...w.dataSync()].reduce((s, x) => s + x * x, 0);
  const ss =
    st.addon.sumSquares(Float32Array.from(g.dataSync())) + st.addon.sumSquares(Float32Array.from(w.dataSync()));
  assert.ok(Math.abs(ss - want) <= 1e-9 * want, `sumSquares ${ss} vs ${want}`);
  assert.ok(Math.abs(squaredNorm([g, w]) - want) <= 1e-5 * want, "the TF.js composition agrees to float32");
  tf.dispose([w, g, m, v]);
});
