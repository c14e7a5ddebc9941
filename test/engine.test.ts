/**
 * The local engine end to end on a tiny random model written by `initModel`:
 * sampling with the KV cache, stops, determinism, skipped steps, save/load,
 * the critic, tensor leaks and input validation; every test on both engines
 * (TF.js and native), through ./engine-internals.ts where a test looks inside.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { LocalCritic } from "../src/engine/local/critic.js";
import {
  ENGINES,
  gradients,
  hasGradients,
  optimizerState,
  paramValues,
  poisonGradient,
  sharpen,
  weights,
} from "./engine-internals.js";
import { IncrementalDecoder } from "../src/model/tokenizer.js";
import { InputError } from "../src/util/errors.js";
import type { HostTensor } from "../src/model/safetensors.js";
import type { Datum, LossSpec, SampledSequence, ValueDatum } from "../src/engine/types.js";

let root: string;
let base: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-engine-"));
  base = path.join(root, "tiny");
  await initModel({ preset: "tiny", out: base, seed: 0 });
});

after(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------
// Helpers

const PROMPT_TEXT = "Hello world, what is 2+2?";

async function load(backend: Engine): Promise<LocalEngine> {
  return LocalEngine.load(base, { workers: 0, backend });
}

type Engine = (typeof ENGINES)[number];

const bits = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length);

/** Asserts two host-tensor maps are bit-identical. */
function assertSameTensors(a: Map<string, HostTensor>, b: Map<string, HostTensor>, what: string): void {
  assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort(), `${what}: names`);
  for (const [name, x] of a) {
    const y = b.get(name)!;
    assert.deepEqual(x.shape, y.shape, `${what}: ${name} shape`);
    const bx = bits(x.data),
      by = bits(y.data);
    let same = bx.length === by.length;
    for (let i = 0; same && i < bx.length; i++) same = bx[i] === by[i];
    assert.ok(same, `${what}: ${name} differs`);
  }
}

/** A datum training on the sampled part of prompt + sample. */
function datumFrom(prompt: number[], s: SampledSequence, advantage: number): Datum {
  const seq = [...prompt, ...s.tokens];
  const n = seq.length - 1,
    P = prompt.length;
  const inSample = (t: number) => t >= P - 1;
  return {
    tokens: seq.slice(0, -1),
    targetTokens: seq.slice(1),
    weights: Array.from({ length: n }, (_, t) => (inSample(t) ? 1 : 0)),
    advantages: Array.from({ length: n }, () => advantage),
    logprobs: Array.from({ length: n }, (_, t) => (inSample(t) ? s.logprobs[t - (P - 1)] : 0)),
    refLogprobs: Array.from({ length: n }, (_, t) =>
      inSample(t) ? s.logprobs[t - (P - 1)] - 0.05 * ((t % 3) - 1) : 0,
    ),
  };
}

function assertInputError(fn: () => Promise<unknown>, re: RegExp): Promise<void> {
  return assert.rejects(fn, (e: unknown) => {
    assert.ok(e instanceof InputError, `expected InputError, got ${e}`);
    assert.match((e as Error).message, re);
    return true;
  });
}

for (const backend of ENGINES) {
  // ---------------------------------------------------------------------------

  test(`(a) KV-cached sampling logprobs equal computeLogprobs of prompt + sample, at temperature 1 and 0.7 [${backend}]`, async () => {
    const e = await load(backend);
    try {
      sharpen(e);
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const P = prompt.length;
      for (const temperature of [1, 0.7]) {
        const r = await e.sample(prompt, { n: 3, maxTokens: 12, temperature, seed: 11, stop: [] });
        assert.equal(r.sequences.length, 3);
        const seqs = r.sequences.map((s) => [...prompt, ...s.tokens]);
        const lp = await e.computeLogprobs(seqs, { temperature });
        const lp1 = temperature === 1 ? lp : await e.computeLogprobs(seqs);
        let tempEffect = 0;
        r.sequences.forEach((s, i) => {
          assert.equal(s.stopReason, "length");
          assert.equal(s.tokens.length, 12);
          assert.equal(lp[i][0], null);
          assert.equal(lp[i].length, seqs[i].length);
          s.logprobs.forEach((x, j) => {
            const want = lp[i][P + j]!;
            assert.ok(
              Math.abs(x - want) < 1e-4,
              `T=${temperature} seq ${i} token ${j}: sampled ${x}, computed ${want}`,
            );
            tempEffect = Math.max(tempEffect, Math.abs(x - lp1[i][P + j]!));
          });
        });
        // The distributions are not flat: temperature visibly changes the logprobs.
        if (temperature !== 1) assert.ok(tempEffect > 0.05, `temperature barely matters (${tempEffect})`);
      }
      // The sequences do not all coincide (the batch rows are distinct streams).
      const r = await e.sample(prompt, { n: 3, maxTokens: 8, seed: 2, stop: [] });
      assert.notDeepEqual(r.sequences[0].tokens, r.sequences[1].tokens);
      // Greedy: identical sequences, reporting the untempered logprob.
      const g = await e.sample(prompt, { n: 2, maxTokens: 6, temperature: 0, stop: [] });
      assert.deepEqual(g.sequences[0].tokens, g.sequences[1].tokens);
      const glp = await e.computeLogprobs([[...prompt, ...g.sequences[0].tokens]]);
      g.sequences[0].logprobs.forEach((x, j) => assert.ok(Math.abs(x - glp[0][P + j]!) < 1e-4));
    } finally {
      e.dispose();
    }
  });

  test(`(b) the same seed gives the same tokens, different seeds differ; stream i does not depend on n [${backend}]`, async () => {
    const e = await load(backend);
    try {
      sharpen(e);
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const a = await e.sample(prompt, { n: 3, maxTokens: 10, seed: 5, stop: [] });
      const b = await e.sample(prompt, { n: 3, maxTokens: 10, seed: 5, stop: [] });
      const c = await e.sample(prompt, { n: 3, maxTokens: 10, seed: 6, stop: [] });
      assert.deepEqual(
        a.sequences.map((s) => s.tokens),
        b.sequences.map((s) => s.tokens),
      );
      assert.notDeepEqual(
        a.sequences.map((s) => s.tokens),
        c.sequences.map((s) => s.tokens),
      );
      const one = await e.sample(prompt, { n: 1, maxTokens: 10, seed: 5, stop: [] });
      assert.deepEqual(one.sequences[0].tokens, a.sequences[0].tokens);
    } finally {
      e.dispose();
    }
  });

  test(`(c) stop token ids and stop strings end a sequence with 'stop' and keep the stop; maxTokens gives 'length' [${backend}]`, async () => {
    const e = await load(backend);
    try {
      sharpen(e);
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const baseline = (await e.sample(prompt, { n: 3, maxTokens: 20, seed: 3, stop: [] })).sequences;
      baseline.forEach((s) => assert.equal(s.stopReason, "length"));

      // Stop id: a token that seq 0 draws at position 4; sequences end at its first occurrence.
      const stopId = baseline[0].tokens[4];
      const r = (await e.sample(prompt, { n: 3, maxTokens: 20, seed: 3, stop: [stopId] })).sequences;
      baseline.forEach((b, i) => {
        const j = b.tokens.indexOf(stopId);
        if (j >= 0) {
          assert.deepEqual(r[i].tokens, b.tokens.slice(0, j + 1), `seq ${i}`);
          assert.equal(r[i].stopReason, "stop");
          assert.equal(r[i].tokens.at(-1), stopId);
        } else {
          // Still running after others left the batch: same draws as without stops.
          assert.deepEqual(r[i].tokens, b.tokens, `seq ${i}`);
          assert.equal(r[i].stopReason, "length");
        }
        r[i].logprobs.forEach((x, t) => assert.ok(Math.abs(x - b.logprobs[t]) < 1e-4));
      });
      assert.ok(r[0].tokens.length <= 5);
      // Seq 0 left the batch while another kept decoding (the cache rows were gathered).
      assert.ok(r.some((x) => x.tokens.length > r[0].tokens.length));

      // Stop string: the text of an ASCII token drawn by seq 0 at position >= 3.
      const texts = baseline[0].tokens.map((t) => e.tokenizer.decode([t]));
      const k = texts.findIndex((s, i) => i >= 3 && /^[\x21-\x7e]+$/.test(s));
      assert.ok(k >= 0, `no ASCII token in ${JSON.stringify(texts)}`);
      const stopStr = texts[k];
      const rs = (await e.sample(prompt, { n: 1, maxTokens: 20, seed: 3, stop: [stopStr] })).sequences[0];
      const dec = new IncrementalDecoder(e.tokenizer);
      let text = "",
        cut = -1;
      for (let i = 0; i < baseline[0].tokens.length && cut < 0; i++) {
        text += dec.push(baseline[0].tokens[i]);
        if (text.includes(stopStr)) cut = i;
      }
      assert.ok(cut >= 0 && cut <= k);
      assert.deepEqual(rs.tokens, baseline[0].tokens.slice(0, cut + 1));
      assert.equal(rs.stopReason, "stop");

      // maxTokens.
      const rl = (await e.sample(prompt, { n: 2, maxTokens: 4, seed: 3, stop: [] })).sequences;
      rl.forEach((s, i) => {
        assert.equal(s.stopReason, "length");
        assert.equal(s.tokens.length, 4);
        assert.deepEqual(s.tokens, baseline[i].tokens.slice(0, 4));
      });
    } finally {
      e.dispose();
    }
  });

  test(`(d) non-finite gradients: the step is skipped and weights and moments stay bit-identical [${backend}]`, async () => {
    const e = await load(backend);
    const ref = await load(backend);
    try {
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const s = (await e.sample(prompt, { n: 2, maxTokens: 6, seed: 1, stop: [] })).sequences;
      const good = s.map((x, i) => datumFrom(prompt, x, i ? -1 : 1));

      // No gradients at all: nothing to apply (used to throw inside tf.addN).
      const w00 = weights(e);
      const empty = await e.optimStep({ lr: 1e-2 });
      assert.equal(empty.gradNorm, 0);
      assert.equal(empty.skipped, true);
      assert.equal(empty.step, 0, "a step without gradients does not count");
      assertSameTensors(w00, weights(e), "after a step without gradients");

      // Overflow: an advantage of 1e30 is finite, but the squared gradient norm is not.
      const huge = good.map((d) => ({ ...d, advantages: d.advantages!.map(() => 1e30) }));
      await e.forwardBackward(huge, { type: "importance_sampling" });
      const w0 = weights(e);
      const step0 = e.step;
      const r = await e.optimStep({ lr: 1e-2 });
      assert.equal(r.skipped, true);
      assert.ok(!Number.isFinite(r.gradNorm));
      assert.equal(r.step, step0);
      assert.equal(e.step, step0);
      assertSameTensors(w0, weights(e), "after the overflowing step");

      // The dropped gradients do not leak into the next step: same as an engine that never saw them.
      const fa = await e.forwardBackward(good, { type: "ppo" });
      const fb = await ref.forwardBackward(good, { type: "ppo" });
      assert.equal(fa.metrics.loss, fb.metrics.loss);
      const ra = await e.optimStep({ lr: 1e-2 }),
        rb = await ref.optimStep({ lr: 1e-2 });
      assert.equal(ra.skipped, false);
      assert.equal(ra.gradNorm, rb.gradNorm);
      assertSameTensors(weights(e), weights(ref), "after the next good step");

      // NaN injected into one accumulated gradient: skipped, weights and moments untouched.
      await e.forwardBackward(good, { type: "ppo" });
      poisonGradient(e, "model.layers.1.mlp.up_proj.weight", 7);
      const w1 = weights(e);
      const m1 = optimizerState(e);
      assert.ok(m1.size > 0);
      const rn = await e.optimStep({ lr: 1e-2 });
      assert.equal(rn.skipped, true);
      assert.ok(Number.isNaN(rn.gradNorm));
      assertSameTensors(w1, weights(e), "weights after the NaN step");
      assertSameTensors(m1, optimizerState(e), "moments after the NaN step");
      assert.equal(hasGradients(e), false, "gradients are dropped");
    } finally {
      e.dispose();
      ref.dispose();
    }
  });

  test(`AdamW first step by hand: every weight moves by lr·sign(g) (+ lr·wd·w on matrices); gradNorm is the global norm [${backend}]`, async () => {
    const e = await load(backend);
    try {
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const s = (await e.sample(prompt, { n: 2, maxTokens: 5, seed: 9, stop: [] })).sequences;
      await e.forwardBackward(
        s.map((x) => datumFrom(prompt, x, 1)),
        { type: "ppo" },
      );
      const grads = gradients(e);
      let sq = 0;
      for (const g of grads.values()) for (const x of g) sq += x * x;
      const before = paramValues(e);
      const lr = 1e-3,
        wd = 0.1;
      // First Adam step: m̂ = g, v̂ = g², so the update is g / (|g| + eps) ≈ sign(g).
      const r = await e.optimStep({ lr, weightDecay: wd, eps: 1e-12 });
      // The engine sums ~10^5 squares in float32 (observed relative error ~7e-5), hence 5e-4.
      assert.ok(
        Math.abs(r.gradNorm - Math.sqrt(sq)) <= 5e-4 * Math.sqrt(sq),
        `gradNorm ${r.gradNorm} vs ${Math.sqrt(sq)}`,
      );
      assert.equal(r.step, 1);
      let checked = 0;
      for (const [n, v] of paramValues(e)) {
        const g = grads.get(n)!,
          w0 = before.get(n)!.data,
          w1 = v.data;
        const decay = v.rank >= 2 ? wd : 0;
        for (let i = 0; i < w1.length; i++) {
          if (Math.abs(g[i]) < 1e-9) continue;
          const want = w0[i] - lr * (g[i] / (Math.abs(g[i]) + 1e-12) + decay * w0[i]);
          // float32: the update is right to ~1e-6 relative, w1 is rounded to ~6e-8·|w|.
          assert.ok(Math.abs(w1[i] - want) <= 1e-6 * lr + 1.2e-7 * Math.abs(w0[i]), `${n}[${i}]: ${w1[i]} vs ${want}`);
          checked++;
        }
      }
      assert.ok(checked > 1000);
    } finally {
      e.dispose();
    }
  });

  test(`engine.maxContextTokens: a row stops with 'length' at that many tokens, prompt included [${backend}]`, async () => {
    const prompt = Array.from({ length: 10 }, (_, i) => 5 + i);
    const e = await LocalEngine.load(base, { workers: 0, backend, maxContextTokens: 13 });
    try {
      const s = (await e.sample(prompt, { n: 2, maxTokens: 50, seed: 3, stop: [] })).sequences;
      for (const q of s) {
        assert.equal(q.tokens.length, 3);
        assert.equal(q.stopReason, "length");
      }
    } finally {
      await e.dispose();
    }
  });

  test(`load right after the last sample resolves: the sampler has stopped, the weights swap [${backend}]`, async () => {
    const e = await LocalEngine.load(base, { workers: 0, backend });
    try {
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const first = (await e.sample(prompt, { maxTokens: 4, seed: 1, temperature: 0, stop: [] })).sequences[0];
      await e.load(base); // used to fail: "model swapped while sampling"
      const again = (await e.sample(prompt, { maxTokens: 4, seed: 1, temperature: 0, stop: [] })).sequences[0];
      assert.deepEqual(again.tokens, first.tokens);
    } finally {
      await e.dispose();
    }
  });

  test(`(e) save then load: identical weights, moments and step; training continues identically [${backend}]`, async () => {
    const a = await load(backend);
    const b0 = await load(backend);
    let b: LocalEngine | undefined;
    try {
      const prompt = a.tokenizer.encode(PROMPT_TEXT);
      const s = (await a.sample(prompt, { n: 3, maxTokens: 6, seed: 4, stop: [] })).sequences;
      const datums = s.map((x, i) => datumFrom(prompt, x, [1, -0.5, 0.25][i]));
      const loss = { type: "ppo", kl: { coef: 0.1, form: "k3" } } as const;
      const adam = { lr: 1e-2, weightDecay: 0.01, gradClipNorm: 1 };
      for (let i = 0; i < 2; i++) {
        await a.forwardBackward(datums, loss);
        await a.optimStep(adam);
      }
      const dir = path.join(root, "saved");
      await a.save(dir);
      assert.ok(fs.existsSync(path.join(dir, "config.json")) && fs.existsSync(path.join(dir, "tokenizer.json")));
      b = await LocalEngine.load(dir, { workers: 0, backend });
      await b0.load(dir); // the in-place load
      for (const x of [b, b0]) {
        assert.equal(x.step, 2);
        assertSameTensors(weights(a), weights(x), "weights after reload");
        assertSameTensors(optimizerState(a), optimizerState(x), "moments after reload");
      }
      const losses = new Map<LocalEngine, number[]>();
      for (const x of [a, b, b0]) {
        const l: number[] = [];
        for (let i = 0; i < 2; i++) {
          l.push((await x.forwardBackward(datums, loss)).metrics.loss);
          const r = await x.optimStep(adam);
          assert.equal(r.skipped, false);
        }
        assert.equal(x.step, 4);
        losses.set(x, l);
      }
      assert.deepEqual(losses.get(b), losses.get(a));
      assert.deepEqual(losses.get(b0), losses.get(a));
      assert.notEqual(losses.get(a)![0], losses.get(a)![1]); // training moved the weights
      assertSameTensors(weights(a), weights(b), "weights after 2 more steps");
      assertSameTensors(weights(a), weights(b0), "weights after 2 more steps (in-place load)");
    } finally {
      a.dispose();
      b0.dispose();
      b?.dispose();
    }
  });

  test(`(f) critic: value shapes, hand-checked clipped loss, and training reduces the value loss [${backend}]`, async () => {
    const e = await load(backend);
    let c: LocalCritic | undefined, c2: LocalCritic | undefined;
    try {
      c = await e.createCritic();
      const seqs = [
        [5, 6, 7],
        [8, 9],
      ];
      const v0 = await c.values(seqs);
      assert.deepEqual(
        v0.map((r) => r.length),
        [3, 2],
      );
      // score.weight starts at zero, so every value is 0.
      v0.flat().forEach((x) => assert.equal(x, 0));

      // By hand with V = 0, clip 0.2 (weighted positions only):
      //  R=0.6, old=0.5: clip(0, 0.3, 0.7)=0.3 → max(0.36, 0.09) = 0.36   (|V-old| = 0.5 > 0.2: clipped)
      //  R=-1,  old=1:   clip(0, 0.8, 1.2)=0.8 → max(1, 3.24)    = 3.24   (clipped)
      //  R=9 has weight 0
      //  R=-2,  old=0:   clip = 0               → 4
      //  R=0.5, old=-0.1: clip(0,-0.3,0.1)=0    → 0.25
      // loss = ½ · (0.36 + 3.24 + 4 + 0.25) / 4 = 0.98125; clip fraction 2/4.
      const hand: ValueDatum[] = [
        { tokens: [5, 6, 7], weights: [1, 1, 0], returns: [0.6, -1, 9], oldValues: [0.5, 1, 0] },
        { tokens: [8, 9], weights: [1, 1], returns: [-2, 0.5], oldValues: [0, -0.1] },
      ];
      const rc = await c.forwardBackward(hand, { clip: 0.2 });
      assert.ok(Math.abs(rc.metrics.loss - 0.98125) < 1e-6, `clipped loss ${rc.metrics.loss}`);
      assert.equal(rc.metrics.tokens, 4);
      assert.equal(rc.metrics.clipFraction, 0.5);
      assert.deepEqual(
        rc.values.map((r) => r.length),
        [3, 2],
      );
      // Unclipped: ½ · (0.36 + 1 + 4 + 0.25) / 4 = 0.70125.
      const ru = await c.forwardBackward(hand);
      assert.ok(Math.abs(ru.metrics.loss - 0.70125) < 1e-6, `unclipped loss ${ru.metrics.loss}`);
      await c.dispose();
      c = undefined;

      // Training on a fixed target.
      const critic = await e.createCritic();
      c2 = critic;
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const s = (await e.sample(prompt, { n: 2, maxTokens: 6, seed: 8, stop: [] })).sequences;
      const data: ValueDatum[] = s.map((x, i) => {
        const tokens = [...prompt, ...x.tokens];
        return {
          tokens,
          weights: tokens.map((_, t) => (t >= prompt.length - 1 ? 1 : 0)),
          returns: tokens.map((_, t) => (i ? -0.5 : 0.8) + 0.05 * t),
        };
      });
      const losses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const r = await critic.forwardBackward(data);
        losses.push(r.metrics.loss);
        // The reported loss is ½ · weighted mean of (V - R)² of the returned values.
        let num = 0,
          den = 0;
        data.forEach((d, j) =>
          d.weights.forEach((w, t) => ((num += w * (r.values[j][t] - d.returns[t]) ** 2), (den += w))),
        );
        assert.ok(Math.abs(r.metrics.loss - (0.5 * num) / den) < 1e-5 * Math.max(1, r.metrics.loss));
        const st = await critic.optimStep({ lr: 3e-3 });
        assert.equal(st.skipped, false);
      }
      assert.ok(losses.at(-1)! < 0.5 * losses[0], `value loss ${losses.map((x) => x.toFixed(4)).join(" → ")}`);
      // values() agrees with the values forwardBackward computes on the same weights.
      const r = await critic.forwardBackward(data);
      const vv = await critic.values(data.map((d) => d.tokens));
      vv.forEach((row, j) => row.forEach((x, t) => assert.ok(Math.abs(x - r.values[j][t]) < 1e-5)));
      // Clipped loss on non-zero values, against the formula in plain numbers.
      const withOld = data.map((d, j) => ({ ...d, oldValues: vv[j].map((x, t) => x + (t % 2 ? 0.3 : -0.05)) }));
      const rc2 = await critic.forwardBackward(withOld, { clip: 0.1 });
      let num = 0,
        den = 0,
        clipped = 0;
      withOld.forEach((d, j) =>
        d.weights.forEach((w, t) => {
          if (!w) return;
          const V = rc2.values[j][t],
            R = d.returns[t],
            old = d.oldValues[t];
          const Vc = Math.min(old + 0.1, Math.max(old - 0.1, V));
          num += Math.max((V - R) ** 2, (Vc - R) ** 2);
          den += 1;
          if (Math.abs(V - old) > 0.1) clipped++;
        }),
      );
      assert.ok(Math.abs(rc2.metrics.loss - (0.5 * num) / den) < 1e-5 * Math.max(1, rc2.metrics.loss));
      assert.ok(Math.abs(rc2.metrics.clipFraction - clipped / den) < 1e-12);
      assert.ok(clipped > 0 && clipped < den);
    } finally {
      await c?.dispose();
      await c2?.dispose();
      await e.dispose();
    }
  });

  test(
    `critic on worker replicas: disposing it, then the engine, ends cleanly (no rejected promise left behind) [${backend}]`,
    { skip: backend === "native" && "the native engine runs no worker replicas" },
    async () => {
      const rejections: unknown[] = [];
      const onRejection = (e: unknown) => rejections.push(e);
      process.on("unhandledRejection", onRejection);
      try {
        const e = await LocalEngine.load(base, { workers: 2, backend });
        const critic = await e.createCritic();
        assert.deepEqual(
          (
            await critic.values([
              [5, 6, 7],
              [8, 9],
            ])
          ).map((r) => r.length),
          [3, 2],
        );
        await critic.dispose();
        await e.dispose();
        await new Promise((r) => setTimeout(r, 200)); // let any worker exit reach its handlers
        assert.deepEqual(rejections, []);
      } finally {
        process.off("unhandledRejection", onRejection);
      }
    },
  );

  test(`(g) no tensor leak: live tensors after iteration 5 equal those after iteration 50 [${backend}]`, async () => {
    const e = await load(backend);
    const critic = await e.createCritic();
    try {
      const prompt = e.tokenizer.encode(PROMPT_TEXT);
      const counts: number[] = [];
      for (let it = 1; it <= 50; it++) {
        const s = (await e.sample(prompt, { n: 2, maxTokens: 4, seed: it, temperature: 0.9, topP: 0.95, topK: 50 }))
          .sequences;
        const datums = s.map((x, i) => datumFrom(prompt, x, i ? -0.7 : 1.3));
        await e.forwardBackward(datums, { type: "ppo", kl: { coef: 0.05, form: "k3" }, temperature: 0.9 });
        await e.optimStep({ lr: 1e-3, gradClipNorm: 1, weightDecay: 0.01 });
        await e.computeLogprobs(datums.map((d) => [...d.tokens, d.targetTokens.at(-1)!]));
        const vd: ValueDatum[] = datums.map((d) => ({
          tokens: d.tokens,
          weights: d.weights,
          returns: d.tokens.map(() => 0.5),
          oldValues: d.tokens.map(() => 0),
        }));
        await critic.values(vd.map((d) => d.tokens));
        await critic.forwardBackward(vd, { clip: 0.2 });
        await critic.optimStep({ lr: 1e-3 });
        // The prefix cache holds a bounded, varying number of tensors; everything else must stay flat.
        const st = await e.stats();
        counts[it] = st.liveTensors - st.cacheTensors;
        assert.ok(st.prefixCache.bytes <= 256 * 2 ** 20);
      }
      assert.equal(
        counts[50],
        counts[5],
        `live tensors outside the cache: ${counts[5]} at iteration 5, ${counts[50]} at iteration 50`,
      );
    } finally {
      critic.dispose();
      e.dispose();
    }
  });

  test(`aggregation over a call: datums sharing a sequence id are one sequence; a datum with no loss tokens counts for nothing [${backend}]`, async () => {
    const e = await load(backend);
    try {
      const d = (tokens: number[], weights: number[]): Datum => ({
        tokens,
        targetTokens: tokens.map((t) => t + 1),
        weights,
        advantages: weights.map(() => 0.5),
        logprobs: weights.map(() => -1),
      });
      // One trajectory split in two datums, plus one datum with no loss tokens.
      const parts = [d([1, 2, 3], [0, 1, 1]), d([1, 5], [0, 1]), d([7, 8], [0, 0])];
      const loss = async (datums: Datum[], aggregation: LossSpec["aggregation"]) =>
        (await e.forwardBackward(datums, { type: "ppo", aggregation, normalizer: 4 })).metrics.loss;
      const sum = await loss(parts, "sum");
      const one = parts.map((p) => ({ ...p, sequence: 0 }));
      // One sequence with loss tokens: its token sum over S = 1, its token mean over S = 1.
      assert.ok(Math.abs((await loss(one, "seq-mean-token-sum")) - sum / 1) < 1e-6);
      assert.ok(Math.abs((await loss(one, "seq-mean-token-mean")) - sum / 3) < 1e-6);
      assert.ok(Math.abs((await loss(parts, "seq-mean-token-sum")) - sum / 2) < 1e-6); // without ids: two sequences with loss tokens
      assert.ok(Math.abs((await loss(parts, "seq-mean-token-sum-norm")) - sum / 4) < 1e-6);
    } finally {
      e.dispose();
    }
  });

  test(`(h) bad input: InputError naming the datum index and field [${backend}]`, async () => {
    const e = await load(backend);
    try {
      const ok = (): Datum => ({
        tokens: [1, 2, 3],
        targetTokens: [2, 3, 4],
        weights: [0, 1, 1],
        advantages: [1, 1, 1],
        logprobs: [-1, -1, -1],
      });
      const V = e.config.vocabSize;
      // Lengths disagree.
      await assertInputError(
        () => e.forwardBackward([ok(), { ...ok(), weights: [1, 1] }], { type: "ppo" }),
        /datum 1: weights has length 2, tokens has 3/,
      );
      await assertInputError(
        () => e.forwardBackward([{ ...ok(), logprobs: [-1, -1, -1, -1] }], { type: "importance_sampling" }),
        /datum 0: logprobs has length 4/,
      );
      // Tokens outside the vocabulary.
      await assertInputError(
        () => e.forwardBackward([ok(), ok(), { ...ok(), targetTokens: [2, V, 4] }], { type: "cross_entropy" }),
        new RegExp(`datum 2 targetTokens: token ${V} is outside`),
      );
      await assertInputError(
        () => e.forwardBackward([{ ...ok(), tokens: [1, -1, 3] }], { type: "cross_entropy" }),
        /datum 0 tokens: token -1 is outside/,
      );
      await assertInputError(
        () => e.forwardBackward([{ ...ok(), tokens: [1, 2.5, 3] }], { type: "cross_entropy" }),
        /datum 0 tokens: token 2.5/,
      );
      // Missing fields.
      const { advantages: _a, ...noAdv } = ok();
      await assertInputError(
        () => e.forwardBackward([ok(), noAdv], { type: "ppo" }),
        /datum 1: advantages is required by loss 'ppo'/,
      );
      await assertInputError(
        () => e.forwardBackward([ok()], { type: "ppo", kl: { coef: 0.1 } }),
        /datum 0: refLogprobs is required/,
      );
      await assertInputError(
        () => e.forwardBackward([{ ...ok(), advantages: [1, NaN, 1] }], { type: "ppo" }),
        /datum 0: advantages holds a non-finite number/,
      );
      await assertInputError(
        () => e.forwardBackward([{ ...ok(), sequence: 0.5 }], { type: "ppo" }),
        /datum 0: sequence must be an integer/,
      );
      await assertInputError(() => e.forwardBackward([], { type: "ppo" }), /at least one datum/);
      await assertInputError(
        () => e.forwardBackward([ok()], { type: "ppo", aggregation: "seq-mean-token-sum-norm" }),
        /normalizer/,
      );
      // Elsewhere in the engine.
      await assertInputError(
        () =>
          e.computeLogprobs([
            [1, 2],
            [3, V + 5],
          ]),
        new RegExp(`sequence 1: token ${V + 5}`),
      );
      await assertInputError(() => e.sample([1, V]), new RegExp(`prompt: token ${V} is outside`));
      await assertInputError(() => e.sample([]), /prompt is empty/);
      await assertInputError(() => e.optimStep({ lr: -1 }), /lr/);
      const critic = await e.createCritic();
      await assertInputError(() => critic.values([[1, V]]), new RegExp(`sequence 0: token ${V}`));
      await assertInputError(
        () => critic.forwardBackward([{ tokens: [1, 2], weights: [1, 1], returns: [0, Infinity] }]),
        /value datum 0: returns holds a non-finite/,
      );
      critic.dispose();
      // Nothing was accumulated by the rejected calls.
      assert.equal(hasGradients(e), false);
      // A valid cross_entropy datum needs neither advantages nor logprobs.
      const r = await e.forwardBackward([{ tokens: [1, 2], targetTokens: [2, 3], weights: [1, 1] }], {
        type: "cross_entropy",
      });
      assert.equal(r.metrics.tokens, 2);
    } finally {
      e.dispose();
    }
  });
}
