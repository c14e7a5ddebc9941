/**
 * Shared-prefix passes on the native engine (issue 31 item 3): datums of one call that share a
 * prefix compute it once. Logprobs, entropies, the loss and every gradient (full weights and LoRA
 * adapters), scoring logprobs, the critic's values, its loss and gradients all equal the unshared
 * computation at float tolerance, for a GRPO group, nested trajectory prefixes, sequences sharing
 * nothing and a mix; and modelPass refuses bad parents.
 */
import { test, before, after } from "node:test";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import assert from "node:assert/strict";
import { parseModelConfig, presetConfigJson, type ModelConfig } from "../src/model/config.js";
import { randomHostWeights } from "../src/model/parameter-shapes.js";
import type { LoraSpec } from "../src/model/peft.js";
import { NativeDecoder } from "../src/engine/local/native/decoder.js";
import { NativeTrainable } from "../src/engine/local/native/native-trainable.js";
import { modelAddon } from "../src/engine/local/native/model-addon.js";
import { requireAddon } from "../src/engine/local/addon.js";
import {
  nativeCriticPass,
  nativeCriticValues,
  nativeLogprobs,
  nativePolicyPass,
  tokenPlanner,
  treePasses,
} from "../src/engine/local/native/native-train.js";
import { resolvedLoss } from "../src/rl/policy-loss.js";
import type { Datum, ValueDatum } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";
import { ENGINES } from "./engine-internals.js";
import { randomAdapters, SMALL_LORA } from "./model-fixtures.js";
import { assertClose } from "./native-helpers.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
const REL = 1e-5;
const config: ModelConfig = parseModelConfig(presetConfigJson("tiny", 71));
const V = config.vocabSize;

const draw = (rng: Rng, n: number) => Array.from({ length: n }, () => 3 + rng.int(V - 3));

/** Full sequences (prompt + response) and the index where each one's response starts. */
interface Shape {
  seqs: number[][];
  promptLen: number[];
}

/** A GRPO group: `n` samples of one `prompt`-token prompt, responses of `shortest` .. shortest + 19 tokens. */
function grpoGroup(rng: Rng, n: number, prompt: number, shortest = 5): Shape {
  const p = draw(rng, prompt);
  const seqs = Array.from({ length: n }, () => [...p, ...draw(rng, shortest + rng.int(20))]);
  // two samples whose responses begin alike (a short common run: stays in the branches)
  seqs[1] = [...p, ...seqs[0].slice(prompt, prompt + 3), ...draw(rng, 9)];
  return { seqs, promptLen: seqs.map(() => prompt) };
}

/** Trajectories whose prefixes nest: a shared first turn, then shared second turns per branch. */
function nestedTrajectories(rng: Rng): Shape {
  const turn1 = draw(rng, 30);
  const seqs: number[][] = [];
  for (let b = 0; b < 3; b++) {
    const turn2 = draw(rng, 20);
    for (let k = 0; k < 3; k++) seqs.push([...turn1, ...turn2, ...draw(rng, 4 + rng.int(12))]);
  }
  seqs.push(turn1.slice(0, 25)); // a sequence that is a prefix of the others
  seqs.push([...turn1, ...seqs[0].slice(30, 50)]); // one that ends where a shared node ends
  return { seqs, promptLen: seqs.map(() => 10) };
}

function apart(rng: Rng): Shape {
  const seqs = [12, 30, 7, 18].map((n) => draw(rng, n));
  return { seqs, promptLen: seqs.map(() => 3) };
}

function mix(rng: Rng): Shape {
  const parts = [grpoGroup(rng, 4, 20), apart(rng), grpoGroup(rng, 3, 33), nestedTrajectories(rng)];
  return { seqs: parts.flatMap((p) => p.seqs), promptLen: parts.flatMap((p) => p.promptLen) };
}

const SHAPES: [string, (rng: Rng) => Shape][] = [
  ["a GRPO group (8 samples, 40-token prompt)", (rng) => grpoGroup(rng, 8, 40)],
  ["nested trajectory prefixes", nestedTrajectories],
  ["sequences sharing nothing", apart],
  ["a mix", mix],
];

function policyDatums(shape: Shape, rng: Rng): Datum[] {
  return shape.seqs.map((s, i) => {
    const n = s.length - 1;
    const weights = Array.from({ length: n }, (_, t) => (t + 1 >= shape.promptLen[i] ? 1 : 0));
    return {
      tokens: s.slice(0, -1),
      targetTokens: s.slice(1),
      weights,
      advantages: Array.from({ length: n }, () => rng.normal()),
      logprobs: Array.from({ length: n }, () => -Math.log(V) + 0.3 * rng.normal()),
      refLogprobs: Array.from({ length: n }, () => -Math.log(V) + 0.3 * rng.normal()),
      sequence: i,
    };
  });
}

function model(kind: "full" | "lora", head: "lm" | "value" = "lm", c: ModelConfig = config): NativeTrainable {
  const w = randomHostWeights(c, 5, head);
  if (kind === "full") return new NativeTrainable(NativeDecoder.fromWeights(c, w, "(test)", { head }));
  const spec: LoraSpec = SMALL_LORA;
  const adapters = randomAdapters(c, spec, 6, 0.3);
  return new NativeTrainable(NativeDecoder.fromWeights(c, w, "(test)", { head, lora: { spec, adapters } }));
}

/** The gradients accumulated since the last zeroGrad, copied, by tensor name. */
function grads(tr: NativeTrainable): Map<string, Float32Array> {
  return new Map(tr.model.trainedTensors().map((t) => [t.name, t.grad.slice()]));
}

function assertSameGrads(got: Map<string, Float32Array>, want: Map<string, Float32Array>, what: string): void {
  assert.equal(got.size, want.size);
  for (const [name, g] of want) assertClose(got.get(name)!, g, REL, `${what}: gradient of ${name}`);
}

const closeNumber = (a: number, b: number, what: string) =>
  assert.ok(Math.abs(a - b) <= REL * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

/** Qwen3's layout on the tiny preset: per-head q/k norms (their backward runs after the chains' dK sums). */
const qwen3 = parseModelConfig(
  presetConfigJson("tiny", 71, { model_type: "qwen3", head_dim: 24, tie_word_embeddings: false }),
);

for (const [kind, c] of [
  ["full", config],
  ["lora", config],
  ["full, Qwen3", qwen3],
] as const)
  for (const [name, make] of SHAPES)
    test(`shared prefixes (${kind}), ${name}: forwardBackward equals the unshared pass`, { skip }, () => {
      const datums = policyDatums(make(new Rng(3)), new Rng(4));
      const loss = resolvedLoss({ type: "ppo", kl: { coef: 0.1 }, aggregation: "seq-mean-token-mean" });
      const tr = model(kind === "lora" ? "lora" : "full", "lm", c);
      // a budget that splits the call into a few passes, trees kept whole
      const plan = tokenPlanner(150);
      tr.zeroGrad();
      const want = nativePolicyPass(tr, datums, loss, plan, undefined, false);
      const wantGrads = grads(tr);
      tr.zeroGrad();
      const got = nativePolicyPass(tr, datums, loss, plan, undefined, true);
      want.logprobs.forEach((lp, i) => assertClose(got.logprobs[i], lp, REL, `logprobs of datum ${i}`));
      closeNumber(got.lossSum, want.lossSum, "loss sum");
      closeNumber(got.entropySum, want.entropySum, "entropy sum");
      assertSameGrads(grads(tr), wantGrads, name);
      assert.ok(
        [...wantGrads.values()].some((g) => g.some((x) => x !== 0)),
        "some gradient is not zero",
      );
    });

test(
  "shared prefixes on two threads, contexts past one attention block: equal to unshared, the same bits run to run",
  { skip },
  () => {
    const addon = requireAddon();
    addon.setFusedThreads(2);
    try {
      // two groups (two trees, so both threads have one), prompts of 100 and 70, responses of 60 .. 79
      const rng = new Rng(21);
      const a = grpoGroup(rng, 4, 100, 60),
        b = grpoGroup(rng, 3, 70, 60);
      const datums = policyDatums({ seqs: [...a.seqs, ...b.seqs], promptLen: [...a.promptLen, ...b.promptLen] }, rng);
      const loss = resolvedLoss({ type: "importance_sampling" });
      const tr = model("lora");
      const plan = tokenPlanner(4096);
      const run = (share: boolean) => {
        tr.zeroGrad();
        const out = nativePolicyPass(tr, datums, loss, plan, undefined, share);
        return { out, g: grads(tr) };
      };
      const want = run(false),
        got = run(true),
        again = run(true);
      want.out.logprobs.forEach((lp, i) => assertClose(got.out.logprobs[i], lp, REL, `logprobs of datum ${i}`));
      assertSameGrads(got.g, want.g, "two threads");
      assert.deepEqual(again.out, got.out);
      for (const [name, g] of got.g) assert.deepEqual(again.g.get(name), g, `${name}: the same bits`);
    } finally {
      addon.setFusedThreads(1);
    }
  },
);

test("shared prefixes: computeLogprobs equals the unshared pass", { skip }, () => {
  const tr = model("lora");
  for (const [name, make] of SHAPES) {
    const { seqs } = make(new Rng(8));
    const want = nativeLogprobs(tr.model, seqs, 0.7, tokenPlanner(200), false);
    const got = nativeLogprobs(tr.model, seqs, 0.7, tokenPlanner(200), true);
    want.forEach((row, i) => {
      assert.equal(got[i][0], null);
      assertClose(got[i].slice(1) as number[], row.slice(1) as number[], REL, `${name}: sequence ${i}`);
    });
  }
});

test("shared prefixes: the critic's values, loss and gradients equal the unshared pass", { skip }, () => {
  const tr = model("full", "value");
  // a non-zero value head, so that values and their gradients reach every layer
  const score = tr.model.params.get("score.weight")!.data as Float32Array;
  const rng = new Rng(12);
  for (let i = 0; i < score.length; i++) score[i] = 0.2 * rng.normal();
  for (const [name, make] of SHAPES) {
    const { seqs, promptLen } = make(new Rng(9));
    const plan = tokenPlanner(120);
    const want = nativeCriticValues(tr.model, seqs, plan, false);
    const got = nativeCriticValues(tr.model, seqs, plan, true);
    want.forEach((v, i) => assertClose(got[i], v, REL, `${name}: values of sequence ${i}`));
    const datums: ValueDatum[] = seqs.map((s, i) => ({
      tokens: s,
      weights: s.map((_, t) => (t >= promptLen[i] ? 1 : 0)),
      returns: s.map(() => rng.normal()),
      oldValues: want[i].map((v) => v + 0.1 * rng.normal()),
    }));
    const total = datums.reduce((n, d) => n + d.weights.reduce((a, b) => a + b, 0), 0);
    tr.zeroGrad();
    const a = nativeCriticPass(tr, datums, 0.2, total, plan, false);
    const ga = grads(tr);
    tr.zeroGrad();
    const b = nativeCriticPass(tr, datums, 0.2, total, plan, true);
    closeNumber(b.lossSum, a.lossSum, `${name}: value loss`);
    assert.equal(b.clipped, a.clipped);
    assertSameGrads(grads(tr), ga, `${name}: critic`);
  }
});

test("shared prefixes: a tree within budget goes whole into one pass, a larger one in runs that fit", () => {
  const { seqs } = grpoGroup(new Rng(1), 8, 40);
  const targets = seqs.map((s) => [...s.slice(1), 0]);
  const total = seqs.reduce((n, s) => n + s.length, 0);
  const rowsOf = (p: { seqs: number[][] }) => p.seqs.reduce((n, s) => n + s.length, 0);
  const [p, ...more] = treePasses(seqs, targets, tokenPlanner(4096), true);
  assert.equal(more.length, 0);
  assert.equal(p.seqs[0].length, 39, "the prompt's rows but its last (whose target differs)");
  assert.deepEqual(Array.from(p.parents!), [-1, 0, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(rowsOf(p), total - 7 * 39);
  assert.deepEqual(
    p.members.map((m) => m.index),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
  // a budget of 120 rows: runs of samples, each with its own copy of the prompt
  const runs = treePasses(seqs, targets, tokenPlanner(120), true);
  assert.ok(runs.length > 1);
  for (const r of runs) {
    assert.ok(rowsOf(r) <= 120, `a pass of ${rowsOf(r)} rows`);
    if (r.members.length > 1) assert.equal(r.seqs[0].length, 39);
  }
  assert.deepEqual(runs.flatMap((r) => r.members.map((m) => m.index)).sort(), [0, 1, 2, 3, 4, 5, 6, 7]);
  const apartPasses = treePasses(seqs, targets, tokenPlanner(100), false);
  assert.ok(apartPasses.length > 1 && apartPasses.every((q) => q.parents === undefined));
});

test("modelPass: bad parents are refused", { skip }, () => {
  const a = modelAddon();
  const tr = model("full");
  // the decoder's own handle, reached as the tests of native-hostile reach it
  const handle = (tr.model as unknown as { handle: Parameters<typeof a.modelPass>[0] }).handle;
  const tokens = Int32Array.from([3, 4, 5, 6, 7]),
    lens = Int32Array.from([2, 2, 1]);
  const pass =
    (parents: unknown, ...cache: unknown[]) =>
    () =>
      a.modelPass(
        handle,
        tokens,
        lens,
        true,
        ...((cache.length ? cache : [null, null, null]) as [null, null, null]),
        0,
        parents as Int32Array,
      );
  assert.throws(pass(Int32Array.from([-1, 1, 0])), {
    name: "RangeError",
    message: /parents\[1\] = 1 must be -1 or an earlier/,
  });
  assert.throws(pass(Int32Array.from([-1, 0, 2])), { name: "RangeError", message: /parents\[2\] = 2/ });
  assert.throws(pass(Int32Array.from([-2, 0, 1])), { name: "RangeError", message: /parents\[0\] = -2/ });
  assert.throws(pass(Int32Array.from([-1, 0])), {
    name: "RangeError",
    message: /parents holds 2 entries for 3 sequences/,
  });
  assert.throws(pass([-1, 0, 1]), { name: "TypeError", message: /parents must be an Int32Array or null/ });
  assert.throws(pass(new Float32Array(3)), { name: "TypeError", message: /parents must be an Int32Array/ });
  const kvFloats = tr.model.kvFloatsPerToken * 4;
  const caches = () =>
    a.modelPass(
      handle,
      tokens,
      lens,
      false,
      Int32Array.from([0, 0, 0]),
      [0, 1, 2].map(() => new Float32Array(kvFloats)),
      Int32Array.from([4, 4, 4]),
      0,
      Int32Array.from([-1, 0, 1]),
    );
  assert.throws(caches, { name: "RangeError", message: /cannot be combined with KV caches/ });
  // accepted: a chain, and all -1 (no sharing)
  for (const ok of [Int32Array.from([-1, 0, 1]), Int32Array.from([-1, -1, -1]), null]) a.passFree(pass(ok)());
});

let root = "";
before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-shared-"));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

test(
  "engine.sharedPrefix: the engine shares by default and not when off, with the same results",
  { skip },
  async () => {
    const dir = path.join(root, "tiny");
    await initModel({ preset: "tiny", out: dir, seed: 3 });
    const on = await LocalEngine.load(dir, { workers: 0, backend: "native" });
    const off = await LocalEngine.load(dir, { workers: 0, backend: "native", sharedPrefix: false });
    try {
      const V = on.config.vocabSize;
      const rng = new Rng(5);
      const prompt = Array.from({ length: 30 }, () => 3 + rng.int(V - 3));
      const seqs = Array.from({ length: 6 }, () => [...prompt, ...Array.from({ length: 8 }, () => 3 + rng.int(V - 3))]);
      const datums = policyDatums({ seqs, promptLen: seqs.map(() => 30) }, rng);
      const a = await on.forwardBackward(datums, { type: "importance_sampling" });
      const b = await off.forwardBackward(datums, { type: "importance_sampling" });
      a.logprobs.forEach((lp, i) => assertClose(lp, b.logprobs[i], REL, `logprobs of datum ${i}`));
      closeNumber(a.metrics.loss, b.metrics.loss, "loss");
      closeNumber(a.metrics.entropy!, b.metrics.entropy!, "entropy");
      const la = await on.computeLogprobs(seqs),
        lb = await off.computeLogprobs(seqs);
      la.forEach((row, i) => assertClose(row.slice(1) as number[], lb[i].slice(1) as number[], REL, `scoring ${i}`));
    } finally {
      await on.dispose();
      await off.dispose();
    }
  },
);
