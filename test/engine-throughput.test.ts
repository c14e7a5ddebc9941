/**
 * Continuous batching, the prefix cache and worker replicas: each must leave
 * results unchanged (a sequence sampled alone and in a crowd, with and without
 * a cached prefix, on one thread or two) while sharing work.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { tf } from "../src/engine/local/tfjs/tf-backend.js";
import type { Datum, SampledSequence } from "../src/engine/types.js";
import { splitByCost, splitCount } from "../src/engine/local/routing.js";

let root: string;
let model: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-throughput-"));
  const raw = path.join(root, "raw");
  await initModel({ preset: "tiny", out: raw, seed: 3 });
  // Sharpen the random model so its next-token distributions are far from uniform.
  const e = await LocalEngine.load(raw, { workers: 0, backend: "tfjs" });
  for (const [name, v] of e.model.params) {
    if (name.endsWith("_proj.weight") || name === "model.embed_tokens.weight") tf.tidy(() => v.assign(v.mul(6)));
  }
  model = path.join(root, "sharp");
  await e.save(model);
  await e.dispose();
});

after(() => fs.rmSync(root, { recursive: true, force: true }));

function prompts(e: LocalEngine): number[][] {
  return [
    "What is 2+2?",
    "Name a river.",
    "Where was the founder of Kalomi born? Think step by step, then answer.",
    "Hi",
  ].map((t) => e.tokenizer.encode(`<|im_start|>user\n${t}<|im_end|>\n<|im_start|>assistant\n`));
}

function assertSameSequences(a: SampledSequence[], b: SampledSequence[], what: string, tol = 1e-4): void {
  assert.equal(a.length, b.length, what);
  a.forEach((s, i) => {
    assert.deepEqual(s.tokens, b[i].tokens, `${what}: tokens of sequence ${i}`);
    assert.equal(s.stopReason, b[i].stopReason, `${what}: stop reason of sequence ${i}`);
    s.logprobs.forEach((lp, t) =>
      assert.ok(Math.abs(lp - b[i].logprobs[t]) < tol, `${what}: logprob ${i}/${t}: ${lp} vs ${b[i].logprobs[t]}`),
    );
  });
}

test("splitting helpers", () => {
  assert.deepEqual(splitCount(5, 2), [3, 2]);
  assert.deepEqual(splitCount(1, 2), [1, 0]);
  assert.deepEqual(splitByCost([10, 10, 10, 10], 2), [
    [0, 1],
    [2, 3],
  ]);
  assert.deepEqual(splitByCost([30, 5, 5, 5, 5], 2), [[0], [1, 2, 3, 4]]);
  assert.deepEqual(splitByCost([7], 2), [[0], []]);
});

test("a sequence samples the same alone and in a crowd (continuous batching)", async () => {
  const e = await LocalEngine.load(model, { workers: 0, prefixCacheBytes: 0 });
  try {
    const ps = prompts(e);
    const params = (i: number) => ({ n: 1 + (i % 3), maxTokens: 6 + 5 * i, temperature: 1, seed: 100 + i });
    const alone: SampledSequence[][] = [];
    for (let i = 0; i < ps.length; i++) alone.push((await e.sample(ps[i], params(i))).sequences);
    const before = (await e.stats()).scheduler;
    // All at once, and one more request that arrives while the others are decoding.
    const crowd = ps.map((p, i) => e.sample(p, params(i)));
    await new Promise((r) => setTimeout(r, 5));
    const late = e.sample(ps[0], params(0));
    const results = await Promise.all([...crowd, late]);
    results.slice(0, ps.length).forEach((r, i) => assertSameSequences(r.sequences, alone[i], `prompt ${i}`));
    assertSameSequences(results[ps.length].sequences, alone[0], "late joiner");
    const after = (await e.stats()).scheduler;
    const steps = after.decodeSteps - before.decodeSteps,
      rows = after.decodedRows - before.decodedRows;
    assert.ok(rows / steps > 2, `decode steps were shared: mean batch ${rows / steps}`);
  } finally {
    await e.dispose();
  }
});

test("the prefix cache prefills only the new tokens of a multi-turn prompt, with the same results", async () => {
  const cached = await LocalEngine.load(model, { workers: 0 });
  const fresh = await LocalEngine.load(model, { workers: 0, prefixCacheBytes: 0 });
  try {
    const p0 = prompts(cached)[2];
    const turn1 = (await cached.sample(p0, { maxTokens: 8, seed: 1, stop: [] })).sequences[0];
    const observation = cached.tokenizer.encode(
      "<|im_end|>\n<|im_start|>user\n<tool_response>\nKalomi was founded in 1901.\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
    const p1 = [...p0, ...turn1.tokens, ...observation];
    const s0 = (await cached.stats()).scheduler.prefillTokens;
    const turn2 = (await cached.sample(p1, { maxTokens: 8, seed: 2, stop: [] })).sequences;
    const st = await cached.stats();
    // The previous context (prompt + all but the last sampled token) was cached; the rest is prefilled.
    assert.equal(st.scheduler.prefillTokens - s0, observation.length + 1);
    assert.ok(st.prefixHitRate > 0.4, `hit rate ${st.prefixHitRate}`);
    const expected = (await fresh.sample(p1, { maxTokens: 8, seed: 2, stop: [] })).sequences;
    assertSameSequences(turn2, expected, "second turn with and without the cache");
    // A different question under the same chat header reuses the shared part.
    const other = prompts(cached)[1];
    const s1 = (await cached.stats()).scheduler.prefillTokens;
    await cached.sample(other, { maxTokens: 2, seed: 3 });
    const shared = (() => {
      let i = 0;
      while (other[i] === p0[i]) i++;
      return i;
    })();
    assert.equal((await cached.stats()).scheduler.prefillTokens - s1, other.length - shared);
  } finally {
    await cached.dispose();
    await fresh.dispose();
  }
});

test("the prefix cache stays within its byte budget, evicting the least recently used", async () => {
  const c = JSON.parse(fs.readFileSync(path.join(model, "config.json"), "utf8"));
  const bytesPerToken = c.num_hidden_layers * 2 * c.num_key_value_heads * (c.hidden_size / c.num_attention_heads) * 4;
  const budget = 120 * bytesPerToken;
  const e = await LocalEngine.load(model, { workers: 0, prefixCacheBytes: budget });
  try {
    for (let i = 0; i < 8; i++) {
      const p = e.tokenizer.encode(`<|im_start|>user\nquestion number ${i} about something else entirely<|im_end|>\n`);
      await e.sample(p, { maxTokens: 10, seed: i, stop: [] });
      const st = await e.stats();
      assert.ok(st.prefixCache.bytes <= budget, `cache holds ${st.prefixCache.bytes} bytes > ${budget}`);
    }
    assert.ok((await e.stats()).prefixCache.evictions > 0);
  } finally {
    await e.dispose();
  }
});

function datums(e: LocalEngine, seqs: SampledSequence[], prompt: number[]): Datum[] {
  return seqs.map((s, i) => {
    const full = [...prompt, ...s.tokens];
    const n = full.length - 1,
      p = prompt.length - 1;
    return {
      tokens: full.slice(0, -1),
      targetTokens: full.slice(1),
      weights: Array.from({ length: n }, (_, t) => (t >= p ? 1 : 0)),
      advantages: Array.from({ length: n }, (_, t) => (t >= p ? (i % 2 ? -1 : 1) : 0)),
      logprobs: Array.from({ length: n }, (_, t) => (t >= p ? s.logprobs[t - p] : 0)),
    };
  });
}

test("two worker replicas (TF.js engine): same samples as one thread, identical weights after training, same losses", async () => {
  const one = await LocalEngine.load(model, { workers: 0, backend: "tfjs" });
  const two = await LocalEngine.load(model, { workers: 2, backend: "tfjs" });
  try {
    assert.equal(two.workers, 2);
    const prompt = prompts(one)[0];
    const a = (await one.sample(prompt, { n: 5, maxTokens: 10, seed: 9 })).sequences;
    const b = (await two.sample(prompt, { n: 5, maxTokens: 10, seed: 9 })).sequences;
    assertSameSequences(b, a, "n=5 split across workers");
    const ds = datums(one, a, prompt);
    for (let step = 0; step < 4; step++) {
      const fa = await one.forwardBackward(ds, { type: "ppo", aggregation: "seq-mean-token-mean" });
      const fb = await two.forwardBackward(ds, { type: "ppo", aggregation: "seq-mean-token-mean" });
      assert.ok(
        Math.abs(fa.metrics.loss - fb.metrics.loss) < 1e-4,
        `step ${step} loss ${fa.metrics.loss} vs ${fb.metrics.loss}`,
      );
      assert.equal(fa.metrics.tokens, fb.metrics.tokens);
      const sa = await one.optimStep({ lr: 1e-2, gradClipNorm: 1 });
      const sb = await two.optimStep({ lr: 1e-2, gradClipNorm: 1 });
      assert.ok(
        Math.abs(sa.gradNorm - sb.gradNorm) < 1e-3 * Math.max(1, sa.gradNorm),
        `grad norm ${sa.gradNorm} vs ${sb.gradNorm}`,
      );
      assert.equal(sb.step, step + 1);
      const sums = await two.weightChecksums();
      assert.equal(new Set(sums).size, 1, `replica weights differ after step ${step + 1}: ${sums}`);
    }
    const seqs = a.map((s) => [...prompt, ...s.tokens]);
    const la = await one.computeLogprobs(seqs),
      lb = await two.computeLogprobs(seqs);
    la.forEach((row, i) =>
      row.forEach((x, t) => t > 0 && assert.ok(Math.abs(x! - lb[i][t]!) < 1e-3, `logprob ${i}/${t} after training`)),
    );
    // The critic lives on the replicas too and stays in sync.
    const critic = await two.createCritic();
    const vd = seqs.map((s) => ({ tokens: s, weights: s.map(() => 1), returns: s.map(() => 1) }));
    await critic.forwardBackward(vd);
    await critic.optimStep({ lr: 1e-2 });
    assert.equal(new Set(await two.weightChecksums("critic")).size, 1);
    // Saving from the workers gives a directory the single-thread engine loads with the same weights.
    const out = path.join(root, "from-workers");
    await two.save(out);
    const reloaded = await LocalEngine.load(out, { workers: 0, backend: "tfjs" });
    assert.equal(reloaded.step, 4);
    const lr = await reloaded.computeLogprobs(seqs);
    lr.forEach((row, i) => row.forEach((x, t) => t > 0 && assert.ok(Math.abs(x! - lb[i][t]!) < 1e-5)));
    await reloaded.dispose();
  } finally {
    await one.dispose();
    await two.dispose();
  }
});

test("memory stays flat over 50 RL-shaped iterations with workers and the prefix cache on", async () => {
  const e = await LocalEngine.load(model, { workers: 2, prefixCacheBytes: 2 * 2 ** 20 });
  try {
    const ps = prompts(e);
    const outside: number[] = [],
      rss: number[] = [];
    for (let it = 1; it <= 50; it++) {
      const prompt = ps[it % ps.length];
      const { sequences } = await e.sample(prompt, { n: 4, maxTokens: 6, seed: it, stop: [] });
      // A second turn that extends the first, as agent rollouts do.
      await e.sample([...prompt, ...sequences[0].tokens, ...ps[3]], { maxTokens: 4, seed: it });
      await e.forwardBackward(datums(e, sequences, prompt), { type: "ppo", kl: undefined });
      await e.optimStep({ lr: 1e-3 });
      const st = await e.stats();
      outside[it] = st.liveTensors - st.cacheTensors;
      rss[it] = process.memoryUsage().rss;
      assert.ok(st.prefixCache.bytes <= 2 * 2 * 2 ** 20, "each replica's cache stays within its budget");
    }
    assert.equal(
      outside[50],
      outside[10],
      `live tensors outside the caches: ${outside[10]} at 10, ${outside[50]} at 50`,
    );
    assert.ok(rss[50] < rss[10] * 1.15 + 64 * 2 ** 20, `RSS grew from ${rss[10] >> 20} MiB to ${rss[50] >> 20} MiB`);
    assert.ok((await e.stats()).prefixHitRate > 0.3);
  } finally {
    await e.dispose();
  }
});

test("an optimizer step drops the prefix cache (its keys belong to the old weights)", async () => {
  const e = await LocalEngine.load(model, { workers: 0 });
  try {
    const prompt = prompts(e)[2];
    const { sequences } = await e.sample(prompt, { n: 2, maxTokens: 6, seed: 4, stop: [] });
    assert.ok((await e.stats()).prefixCache.entries > 0);
    await e.forwardBackward(datums(e, sequences, prompt), { type: "importance_sampling" });
    await e.optimStep({ lr: 1e-2 });
    assert.equal((await e.stats()).prefixCache.entries, 0);
    const after = (await e.sample(prompt, { maxTokens: 6, seed: 5, stop: [] })).sequences;
    const dir = path.join(root, "stepped");
    await e.save(dir);
    const fresh = await LocalEngine.load(dir, { workers: 0 });
    assertSameSequences(
      after,
      (await fresh.sample(prompt, { maxTokens: 6, seed: 5, stop: [] })).sequences,
      "after the step",
    );
    await fresh.dispose();
  } finally {
    await e.dispose();
  }
});
