/**
 * The native training kernels (native/train_ops.c via src/engine/local/tfjs/train-ops.ts): token
 * log-probabilities with entropy and their gradient, AdamW, the squared gradient norm, against
 * the TF.js compositions they replace; and ten optimizer steps of a whole engine on both backends.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { loadNative } from "../src/engine/local/addon.js";
import { fusedOpsActive, setFusedOps, setMatmulBackend, tf } from "../src/engine/local/tfjs/tf-backend.js";
import {
  adamwUpdate,
  addInPlace,
  squaredNorm,
  sumFlat,
  tokenLogprobs,
  TRAIN_KERNELS,
  type AdamWStep,
} from "../src/engine/local/tfjs/train-ops.js";
import { Rng } from "../src/util/rng.js";
import type { Datum } from "../src/engine/types.js";
import { assertClose, diff, fusedVsReference, kernelsRun, native, normal, tinyModelFixture } from "./native-helpers.js";

const fx = tinyModelFixture("agent-r1-train-ops-", 0);

/** Runs f on the native backend with the fused kernels on. */
function onNative<T>(f: () => T): T {
  setMatmulBackend("native");
  try {
    setFusedOps(true);
    assert.ok(fusedOpsActive());
    return f();
  } finally {
    setMatmulBackend("tfjs");
  }
}

const targetsFor = (N: number, V: number, seed: number) => {
  const rng = new Rng(seed);
  return Int32Array.from({ length: N }, () => rng.int(V));
};

/** picked and entropy side by side, so one harness compares both outputs and the gradient of Σ w·both. */
const bothOutputs = (targets: Int32Array, T: number) => (logits: tf.Tensor) => {
  const { picked, entropy } = tokenLogprobs(logits as tf.Tensor2D, targets, T);
  return tf.stack([picked, entropy], 1);
};

for (const { name, N, V, T, scale } of [
  { name: "V = 64, temperature 1", N: 12, V: 64, T: 1, scale: 2 },
  { name: "V = 37 (vector tails), temperature 0.7", N: 9, V: 37, T: 0.7, scale: 2 },
  { name: "large logits (|x| ~ 40), temperature 1.3", N: 6, V: 50, T: 1.3, scale: 20 },
]) {
  test(
    `tokenLogprobs, ${name}: picked, entropy and the gradient of both equal the TF.js composition`,
    native,
    async () => {
      const x = normal([N, V], 40 + N, scale);
      const targets = targetsFor(N, V, N);
      const f = bothOutputs(targets, T);
      const { ref, fused } = fusedVsReference(f, [x], 50 + N);
      assertClose(fused[0], ref[0], 1e-5, "picked and entropy");
      assertClose(fused[1], ref[1], 1e-5, "gradient of the logits");
      await onNative(async () => {
        assert.ok((await kernelsRun(() => f(x))).has(TRAIN_KERNELS.tokenLogprobs), "the native kernel ran");
      });
      x.dispose();
    },
  );
}

test("tokenLogprobs: the gradient matches central finite differences", native, () => {
  onNative(() => {
    const N = 3,
      V = 11,
      T = 0.8;
    const x = normal([N, V], 61, 2);
    const targets = targetsFor(N, V, 62);
    const w = normal([N, 2], 63);
    const f = bothOutputs(targets, T);
    const loss = (t: tf.Tensor) => tf.tidy(() => f(t).mul(w).sum().dataSync()[0]);
    const g = tf.tidy(() =>
      Float32Array.from(
        tf
          .grad((t: tf.Tensor) => f(t).mul(w).sum())(x)
          .dataSync(),
      ),
    );
    const base = Float32Array.from(x.dataSync());
    const h = 1e-2;
    let maxErr = 0;
    for (let k = 0; k < base.length; k++) {
      const at = (d: number) => {
        const v = base.slice();
        v[k] += d;
        const t = tf.tensor(v, x.shape);
        const l = loss(t);
        t.dispose();
        return l;
      };
      maxErr = Math.max(maxErr, Math.abs((at(h) - at(-h)) / (2 * h) - g[k]));
    }
    assert.ok(maxErr <= 2e-3, `gradient off finite differences by ${maxErr}`);
    tf.dispose([x, w]);
  });
});

test("tokenLogprobs: a target outside the vocabulary or a bad temperature is an error naming it", native, () => {
  onNative(() => {
    const x = normal([2, 5], 70);
    assert.throws(
      () => tokenLogprobs(x as tf.Tensor2D, Int32Array.from([1, 5]), 1),
      /targets\[1\] = 5 is outside the vocabulary \[0, 5\)/,
    );
    assert.throws(() => tokenLogprobs(x as tf.Tensor2D, Int32Array.from([1, -1]), 1), /targets\[1\] = -1/);
    assert.throws(
      () => tokenLogprobs(x as tf.Tensor2D, Int32Array.from([1, 2]), 0),
      /temperature must be positive, got 0/,
    );
    assert.throws(() => tokenLogprobs(x as tf.Tensor2D, Int32Array.from([1]), 1), /1 targets for 2 rows/);
    x.dispose();
  });
  const st = loadNative();
  assert.ok(st.ok);
  assert.throws(
    () =>
      st.addon.tokenLogprobsForward(
        new Float32Array(10),
        new Int32Array(2),
        new Float32Array(2),
        new Float32Array(2),
        new Float32Array(3),
        2,
        5,
        1,
      ),
    /stats/,
  );
  assert.throws(
    () =>
      st.addon.adamwStep(
        new Float32Array(4),
        new Float32Array(4),
        new Float32Array(3),
        new Float32Array(4),
        new Float32Array(4),
        new Float32Array(4),
        new Float32Array(4),
        4,
        1,
        0.9,
        0.999,
        1e-8,
        0,
        1,
        1,
        1,
      ),
    /adamwStep: m/,
  );
});

test("adamwUpdate: native equals the TF.js composition (clipping scale, weight decay, later steps)", native, () => {
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
    const fused = onNative(() => adamwUpdate(w, g, m, v, h)).map((t) => {
      const d = Float32Array.from(t.dataSync());
      t.dispose();
      return d;
    });
    // The same correctly rounded float32 operations in the same order as TF.js's kernels: equal bits.
    ["w", "m", "v"].forEach((what, i) => assert.deepEqual(fused[i], ref[i], `${what} (gradScale ${h.gradScale})`));
  }
  const ss = onNative(() => squaredNorm([g, w]));
  const want = [...g.dataSync(), ...w.dataSync()].reduce((s, x) => s + x * x, 0);
  assert.ok(Math.abs(ss - want) <= 1e-9 * want, `squaredNorm ${ss} vs ${want}`);
  assert.ok(Math.abs(squaredNorm([g, w]) - want) <= 1e-5 * want, "the TF.js composition agrees to float32");
  tf.dispose([w, g, m, v]);
});

test(
  "sumFlat: the replicas' flat gradients summed into a tensor, natively bit-identical to float32 in JS",
  native,
  () => {
    const rng = new Rng(95);
    const sources = [0, 1, 2].map(() => Float32Array.from({ length: 50 }, () => rng.normal()));
    const ref = Float32Array.from(sumFlat(sources, 7, [3, 4]).dataSync());
    const want = new Float32Array(12);
    for (let i = 0; i < 12; i++)
      want[i] = Math.fround(Math.fround(sources[0][7 + i] + sources[1][7 + i]) + sources[2][7 + i]);
    assert.deepEqual(ref, want);
    const t = onNative(() => sumFlat(sources, 7, [3, 4]));
    assert.deepEqual(t.shape, [3, 4]);
    assert.deepEqual(Float32Array.from(t.dataSync()), want);
    t.dispose();
    const st = loadNative();
    assert.ok(st.ok);
    assert.throws(
      () => st.addon.addInto(new Float32Array(10), new Float32Array(12), 3),
      /addInto: src holds 12 floats, fewer than srcOffset \+ out.length = 13/,
    );
  },
);

test("addInPlace: adds into a buffer only its tensor holds; a shared buffer is left alone", native, () => {
  onNative(() => {
    const a = normal([4, 5], 96),
      b = normal([4, 5], 97);
    const want = Float32Array.from(a.add(b).dataSync());
    assert.equal(addInPlace(a, b), true);
    assert.deepEqual(Float32Array.from(a.dataSync()), want, "the same bits as TF.js's Add");
    const shared = a.reshape([20]); // same buffer, two tensors
    assert.equal(addInPlace(a, b), false);
    assert.deepEqual(Float32Array.from(shared.dataSync()), want, "unchanged");
    tf.dispose([a, b, shared]);
  });
  const a = normal([3], 98),
    b = normal([3], 99);
  assert.equal(addInPlace(a, b), false, "off the native backend nothing happens");
  tf.dispose([a, b]);
});

test("train ops: no tensor leaks through tokenLogprobs' gradient and adamwUpdate", native, () => {
  onNative(() => {
    const x = normal([4, 9], 90),
      w = normal([3, 3], 91),
      g = normal([3, 3], 92),
      m = normal([3, 3], 93),
      v = normal([3, 3], 94).abs();
    const targets = Int32Array.from([0, 8, 3, 3]);
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) {
      tf.tidy(() => {
        tf.grad((t: tf.Tensor) => bothOutputs(targets, 1)(t).sum())(x);
      });
      tf.dispose(
        adamwUpdate(w, g, m, v, {
          lr: 1e-3,
          beta1: 0.9,
          beta2: 0.999,
          eps: 1e-8,
          weightDecay: 0.1,
          bc1: 0.1,
          bc2: 0.001,
          gradScale: 1,
        }),
      );
    }
    assert.equal(tf.memory().numTensors, before);
    tf.dispose([x, w, g, m, v]);
  });
});

/** Ten forwardBackward + optimStep rounds (PPO loss, clipping, weight decay) on one backend: the final weights. */
async function tenSteps(kernels: "wasm" | "addon"): Promise<{ weights: Float32Array; kernels: Set<string> }> {
  const e = await LocalEngine.load(fx.base, { workers: 0, backend: "tfjs", tfjsKernels: kernels });
  try {
    const V = e.config.vocabSize,
      rng = new Rng(5);
    const seqs = [0, 1, 2, 3].map((i) => Array.from({ length: 18 + 5 * i }, () => 3 + rng.int(V - 3)));
    const datums: Datum[] = seqs.map((s, i) => ({
      tokens: s.slice(0, -1),
      targetTokens: s.slice(1),
      weights: s.slice(1).map((_, t) => (t >= 4 ? 1 : 0)),
      advantages: s.slice(1).map(() => (i % 2 ? -1 : 1) * (0.5 + i)),
      logprobs: s.slice(1).map(() => -Math.log(V)),
    }));
    let ran = new Set<string>();
    for (let step = 0; step < 10; step++) {
      const round = async () => {
        await e.forwardBackward(datums, { type: "ppo", temperature: 0.9 });
        await e.optimStep({ lr: 1e-3, weightDecay: 0.01, gradClipNorm: 0.5 });
      };
      if (step === 0) ran = new Set((await tf.profile(round)).kernelNames);
      else await round();
    }
    const weights = new Float32Array(e.trainable.size);
    let o = 0;
    for (const v of e.model.params.values()) {
      weights.set(v.dataSync(), o);
      o += v.size;
    }
    return { weights, kernels: ran };
  } finally {
    await e.dispose();
  }
}

test(
  "ten optimizer steps of the TF.js engine, wasm vs the addon's kernels: the weights agree, and the addon runs the training kernels",
  native,
  async () => {
    const t = await tenSteps("wasm");
    const n = await tenSteps("addon");
    for (const k of [TRAIN_KERNELS.tokenLogprobs, TRAIN_KERNELS.tokenLogprobsGrad, TRAIN_KERNELS.adamw]) {
      assert.ok(n.kernels.has(k), `${k} runs on native`);
      assert.ok(!t.kernels.has(k), `${k} does not run on tfjs`);
    }
    // Ten Adam steps of lr 1e-3 move a weight by up to about 1e-2; the backends' rounding differences
    // (summation order in BLAS and the fused kernels) stay below a twentieth of one step.
    const d = diff(n.weights, t.weights);
    assert.ok(d.abs <= 5e-5, `weights after ten steps: max abs diff ${d.abs}`);
  },
);
