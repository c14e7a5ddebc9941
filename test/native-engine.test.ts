/**
 * The native engine against the TF.js engine through the Engine interface, on the same model
 * directory: scoring, a training run's losses, gradient norms and weights, the critic, and
 * checkpoints written by one engine and resumed by the other. (test/engine.test.ts runs the
 * engine conformance suite on both; test/native-decoder.test.ts checks the decoder itself.)
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { Datum, LossSpec } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";
import { ENGINES, sharpen, weights } from "./engine-internals.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
let root: string;
let base: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-native-engine-"));
  const raw = path.join(root, "raw");
  await initModel({ preset: "tiny", out: raw, seed: 3 });
  const e = await LocalEngine.load(raw, { workers: 0, backend: "tfjs" });
  sharpen(e, 4);
  base = path.join(root, "sharp");
  await e.save(base);
  await e.dispose();
});

after(() => fs.rmSync(root, { recursive: true, force: true }));

function datums(V: number, seed: number): Datum[] {
  const rng = new Rng(seed);
  return [0, 1, 2, 3].map((i) => {
    const n = 12 + 5 * i;
    const toks = Array.from({ length: n + 1 }, () => 3 + rng.int(V - 3));
    return {
      tokens: toks.slice(0, -1),
      targetTokens: toks.slice(1),
      weights: toks.slice(1).map((_, t) => (t >= 4 ? 1 : 0)),
      advantages: toks.slice(1).map(() => (i % 2 ? -0.8 : 1.1)),
      logprobs: toks.slice(1).map(() => -Math.log(V) + 0.3 * rng.normal()),
      refLogprobs: toks.slice(1).map(() => -Math.log(V) + 0.3 * rng.normal()),
    };
  });
}

const LOSSES: LossSpec[] = [
  { type: "ppo", kl: { coef: 0.1, form: "k3" } },
  { type: "importance_sampling", aggregation: "seq-mean-token-mean" },
  { type: "cispo", temperature: 0.8 },
];

function maxDiff(a: Map<string, { data: Float32Array }>, b: Map<string, { data: Float32Array }>): number {
  let d = 0;
  for (const [n, x] of a) {
    const y = b.get(n)!.data;
    for (let i = 0; i < x.data.length; i++) d = Math.max(d, Math.abs(x.data[i] - y[i]));
  }
  return d;
}

test(
  "native = TF.js: logprobs, three training steps per loss (losses, gradient norms, weights)",
  { skip },
  async () => {
    for (const loss of LOSSES) {
      const t = await LocalEngine.load(base, { workers: 0, backend: "tfjs" });
      const n = await LocalEngine.load(base, { workers: 0, backend: "native" });
      try {
        const data = datums(t.config.vocabSize, 5);
        const seqs = data.map((d) => [...d.tokens, d.targetTokens.at(-1)!]);
        const [lt, ln] = [await t.computeLogprobs(seqs), await n.computeLogprobs(seqs)];
        lt.forEach((row, i) => row.forEach((x, j) => x !== null && assert.ok(Math.abs(x - ln[i][j]!) < 1e-4)));
        for (let step = 0; step < 3; step++) {
          const [ft, fn] = [await t.forwardBackward(data, loss), await n.forwardBackward(data, loss)];
          const tol = 1e-4 * Math.max(1, Math.abs(ft.metrics.loss));
          assert.ok(
            Math.abs(ft.metrics.loss - fn.metrics.loss) < tol,
            `${loss.type} step ${step}: loss ${fn.metrics.loss} vs ${ft.metrics.loss}`,
          );
          const adam = { lr: 3e-3, weightDecay: 0.01, gradClipNorm: 1 };
          const [st, sn] = [await t.optimStep(adam), await n.optimStep(adam)];
          assert.ok(
            Math.abs(st.gradNorm - sn.gradNorm) < 1e-3 * st.gradNorm,
            `${loss.type}: gradNorm ${sn.gradNorm} vs ${st.gradNorm}`,
          );
        }
        // Adam's first steps move each weight by about lr·sign(g): weights agree to a fraction of lr.
        const d = maxDiff(weights(t), weights(n));
        assert.ok(d < 1e-3, `${loss.type}: weights differ by ${d} after 3 steps`);
      } finally {
        await t.dispose();
        await n.dispose();
      }
    }
  },
);

test("checkpoints move between engines: native saves, TF.js resumes, and the reverse", { skip }, async () => {
  const loss: LossSpec = { type: "ppo" };
  const adam = { lr: 2e-3 };
  const trainTwice = async (e: LocalEngine) => {
    const out: number[] = [];
    for (let i = 0; i < 2; i++) {
      out.push((await e.forwardBackward(datums(e.config.vocabSize, 9), loss)).metrics.loss);
      await e.optimStep(adam);
    }
    return out;
  };
  for (const [from, to] of [
    ["native", "tfjs"],
    ["tfjs", "native"],
  ] as const) {
    const a = await LocalEngine.load(base, { workers: 0, backend: from });
    const dir = path.join(root, `from-${from}`);
    await trainTwice(a);
    await a.save(dir);
    const b = await LocalEngine.load(dir, { workers: 0, backend: to });
    try {
      assert.equal(b.step, 2);
      assert.ok(maxDiff(weights(a), weights(b)) === 0, "weights are written and read exactly");
      // Continuing on either engine gives the same losses (moments and step were carried over).
      const [la, lb] = [await trainTwice(a), await trainTwice(b)];
      la.forEach((x, i) =>
        assert.ok(Math.abs(x - lb[i]) < 1e-4 * Math.max(1, Math.abs(x)), `${from} → ${to}: ${lb} vs ${la}`),
      );
    } finally {
      await a.dispose();
      await b.dispose();
    }
  }
});

test("the critic: values and a value-loss step agree across engines", { skip }, async () => {
  const t = await LocalEngine.load(base, { workers: 0, backend: "tfjs" });
  const n = await LocalEngine.load(base, { workers: 0, backend: "native" });
  try {
    const [ct, cn] = [await t.createCritic(), await n.createCritic()];
    const data = datums(t.config.vocabSize, 2).map((d, i) => ({
      tokens: d.tokens,
      weights: d.weights,
      returns: d.tokens.map((_, j) => 0.1 * i - 0.02 * j),
      oldValues: d.tokens.map(() => 0.05),
    }));
    for (let step = 0; step < 3; step++) {
      const [rt, rn] = [await ct.forwardBackward(data, { clip: 0.2 }), await cn.forwardBackward(data, { clip: 0.2 })];
      assert.ok(Math.abs(rt.metrics.loss - rn.metrics.loss) < 1e-5 * Math.max(1, rt.metrics.loss));
      assert.equal(rt.metrics.clipFraction, rn.metrics.clipFraction);
      await ct.optimStep({ lr: 1e-2, weightDecay: 0.1 });
      await cn.optimStep({ lr: 1e-2, weightDecay: 0.1 });
    }
    const [vt, vn] = [await ct.values(data.map((d) => d.tokens)), await cn.values(data.map((d) => d.tokens))];
    vt.forEach((row, i) =>
      row.forEach((x, j) => assert.ok(Math.abs(x - vn[i][j]) < 1e-4, `value ${i},${j}: ${vn[i][j]} vs ${x}`)),
    );
  } finally {
    await t.dispose();
    await n.dispose();
  }
});
