/**
 * Sampling parameters at the edges of what validation lets through: tiny and
 * huge temperatures, top-p near 0, huge top-k, ties, and seeds outside 32 bits.
 * Each must give the token the limit calls for with a finite logprob <= 0, or
 * be refused with a message naming the parameter.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { drawToken, keptTokens, logSoftmax, topAlternatives, type DrawParams } from "../src/engine/sampling.js";
import { resolveSeed } from "../src/engine/local/sampling-params.js";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { InputError } from "../src/util/errors.js";
import { Rng } from "../src/util/rng.js";

const draw = (temperature: number, topK = 0, topP = 1): DrawParams => ({ temperature, topK, topP });
/** The tokens drawn over 50 random streams, with their logprobs. */
const drawsOf = (logits: number[], p: DrawParams) =>
  Array.from({ length: 50 }, (_, s) => drawToken(logits, p, new Rng(s)));

test("a tiny temperature picks the argmax with logprob 0 (logits / 1e-300 used to overflow to NaN)", () => {
  const logits = [300, 310, 305]; // 310 / 1e-300 is Infinity in float64
  for (const t of [1e-300, 5e-324, 1e-40]) {
    for (const [k, p] of [
      [0, 1],
      [2, 1],
      [0, 0.5],
      [2, 0.9],
    ]) {
      for (const d of drawsOf(logits, draw(t, k, p)))
        assert.deepEqual(d, { token: 1, logprob: 0 }, `temperature ${t}, topK ${k}, topP ${p}`);
    }
  }
  // Away from the argmax: (305 - 310) / 1e-300, minus log(1 + exp(that) + ...) = log 1 = 0.
  assert.deepEqual(topAlternatives(logits, draw(1e-300), 3), [
    { token: 1, logprob: 0 },
    { token: 2, logprob: (305 - 310) / 1e-300 },
    { token: 0, logprob: (300 - 310) / 1e-300 },
  ]);
  // At 5e-324 the others underflow to -Infinity: probability 0, so they are not alternatives.
  assert.deepEqual(topAlternatives(logits, draw(5e-324), 3), [{ token: 1, logprob: 0 }]);
  assert.deepEqual(topAlternatives(logits, draw(5e-324, 3), 3), [{ token: 1, logprob: 0 }]);
  assert.ok(logSoftmax(logits, 1e-300).every((x) => !Number.isNaN(x)));
});

test("tied maxima at a tiny temperature split the mass: each has logprob -log 2 (used to be 0 each)", () => {
  const logits = [2, 2, 1];
  const draws = drawsOf(logits, draw(1e-300));
  for (const d of draws) assert.deepEqual(d, { token: d.token, logprob: -Math.log(2) });
  assert.deepEqual(
    [...new Set(draws.map((d) => d.token))].sort(),
    [0, 1],
    "both tied tokens are drawn, never the third",
  );
  assert.deepEqual(topAlternatives(logits, draw(1e-300), 2), [
    { token: 0, logprob: -Math.log(2) },
    { token: 1, logprob: -Math.log(2) },
  ]);
  // Huge tied logits: the old lse = max / T + log 2 rounded back to max / T, giving logprob 0 to each.
  assert.deepEqual(drawToken([3e38, -3e38, 3e38], draw(0.5), new Rng(0)).logprob, -Math.log(2));
  // Greedy breaks ties by the lower id and reports the untempered logprob: log(e^2 / (2e^2 + e^1)).
  const greedy = drawToken(logits, draw(0), new Rng(0));
  assert.equal(greedy.token, 0);
  assert.ok(Math.abs(greedy.logprob - Math.log(Math.exp(2) / (2 * Math.exp(2) + Math.exp(1)))) < 1e-12);
});

test("a huge temperature is uniform: logprob -log V", () => {
  for (const d of drawsOf([1, 3, 2, 0.5], draw(1e300))) assert.equal(d.logprob, -Math.log(4));
});

test("top-p near 0 keeps only the most likely token, with logprob exactly 0 (used to be +1.1e-16)", () => {
  const logits = [1, 3, 2, 0.5];
  for (const p of [5e-324, 1e-300, 0.1]) {
    assert.deepEqual(keptTokens(logSoftmax(logits), 0, p), [1]);
    for (const d of drawsOf(logits, draw(1, 0, p))) assert.deepEqual(d, { token: 1, logprob: 0 });
    assert.deepEqual(topAlternatives(logits, draw(1, 0, p), 2), [{ token: 1, logprob: 0 }]);
  }
  // top-k 1 likewise, at any temperature.
  for (const d of drawsOf(logits, draw(0.7, 1))) assert.deepEqual(d, { token: 1, logprob: 0 });
  // Renormalized over the kept tokens, no logprob is positive.
  for (const [k, p] of [
    [2, 1],
    [0, 0.6],
    [3, 0.95],
  ])
    for (const d of drawsOf(logits, draw(1.3, k, p))) assert.ok(d.logprob <= 0 && d.logprob > -Infinity);
});

test("a top-k beyond the vocabulary (1e300, 2^53 + 1) is the same as no top-k", () => {
  const logits = [1, 3, 2, 0.5];
  for (const k of [1e300, 2 ** 53 + 1, 5]) assert.deepEqual(drawsOf(logits, draw(1, k)), drawsOf(logits, draw(1)));
});

test("seeds outside [0, 2^32) get their own streams (2^32, 2^53 and 1e300 all used to draw like seed 0, -1 like 2^32 - 1)", () => {
  for (const s of [0, 1, 12345, 2 ** 32 - 1]) assert.equal(resolveSeed(s), s, "seeds in [0, 2^32) keep their streams");
  const seeds = [0, 2 ** 32, 2 ** 53, 1e300, -1e300, -1, 2 ** 32 - 1, 2 ** 32 + 1, 1, -(2 ** 53)];
  const resolved = seeds.map(resolveSeed);
  assert.equal(new Set(resolved).size, seeds.length, `distinct seeds collide: ${resolved.join(", ")}`);
  for (const r of resolved) assert.ok(Number.isInteger(r) && r >= 0 && r < 2 ** 32);
  assert.equal(resolveSeed(1e300), resolveSeed(1e300), "deterministic");
});

let root: string;
let engine: LocalEngine;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-edges-"));
  await initModel({ preset: "tiny", out: path.join(root, "tiny"), seed: 0 });
  engine = await LocalEngine.load(path.join(root, "tiny"), { workers: 0 });
});

after(async () => {
  await engine.dispose();
  fs.rmSync(root, { recursive: true, force: true });
});

test("engine: temperature 5e-324 samples the greedy tokens with logprob 0 (used to be token 0 with a NaN logprob)", async () => {
  const prompt = engine.tokenizer.encode("Hello world, what is 2+2?");
  const greedy = await engine.sample(prompt, { maxTokens: 6, temperature: 0, stop: [] });
  for (const t of [5e-324, 1e-300]) {
    const { sequences } = await engine.sample(prompt, {
      n: 2,
      maxTokens: 6,
      temperature: t,
      seed: 1,
      stop: [],
      topLogprobs: 3,
    });
    for (const s of sequences) {
      assert.deepEqual(s.tokens, greedy.sequences[0].tokens);
      assert.deepEqual(s.logprobs, [0, 0, 0, 0, 0, 0]);
      for (const alts of s.topLogprobs!) for (const a of alts) assert.ok(Number.isFinite(a.logprob) && a.logprob <= 0);
    }
  }
  const far = await engine.sample(prompt, { maxTokens: 4, seed: 2 ** 32, stop: [] });
  const zero = await engine.sample(prompt, { maxTokens: 4, seed: 0, stop: [] });
  assert.notDeepEqual(far.sequences[0].tokens, zero.sequences[0].tokens, "seed 2^32 is not seed 0");
});

test("engine: meaningless values are refused by name", async () => {
  const prompt = engine.tokenizer.encode("Hi");
  const refused = async (p: Promise<unknown>, re: RegExp) =>
    assert.rejects(p, (e) => e instanceof InputError && re.test(e.message));
  await refused(
    engine.sample(prompt, { temperature: Infinity }),
    /temperature must be a finite number >= 0, got Infinity/,
  );
  for (const seed of [NaN, Infinity, 1.5])
    await refused(engine.sample(prompt, { seed }), new RegExp(`seed must be an integer, got ${seed}`));
  // Scoring divides float32 logits by the temperature: 0, 1e-300 and Infinity gave NaN or a RangeError.
  for (const temperature of [0, -1, 1e-300, Infinity, NaN]) {
    await refused(
      engine.computeLogprobs([prompt], { temperature }),
      /computeLogprobs: temperature must be a finite number >= 1e-30/,
    );
  }
  const [lp] = await engine.computeLogprobs([prompt], { temperature: 1e-30 });
  assert.ok(lp.slice(1).every((x) => Number.isFinite(x)));
  await refused(
    engine.forwardBackward([{ tokens: prompt, targetTokens: prompt, weights: prompt.map(() => 1) }], {
      type: "cross_entropy",
      temperature: 0,
    }),
    /loss.temperature must be a finite number >= 1e-30/,
  );
});
