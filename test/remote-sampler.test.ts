/**
 * Rollouts sampled on an inference server while the local engine trains: the vLLM and SGLang
 * sampler clients against `agent-r1 serve` on loopback (which speaks both), weight reloads, and two
 * training iterations with `engine.sampler` + `loss.tis` against the same run in-process (full
 * weights; a LoRA run's adapters: remote-sampler-lora.test.ts).
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { rolloutSampler } from "../src/engine/remote/sampler-client.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { runCli } from "../src/cli/main.js";
import { loadConfig } from "../src/train/load-config.js";
import { captureIO, tempDir } from "./helpers.js";
import { BASE, multihopRecipe } from "./fixtures/remote-recipes.js";

const root = tempDir("agent-r1-sampler-");
const weights = join(root, "weights");
let engine: LocalEngine, server: RunningServer;

before(async () => {
  mkdirSync(weights, { recursive: true });
  engine = await LocalEngine.load(BASE, { workers: 0 });
  server = await startServer({ engine, port: 0, weightsFrom: weights, log: () => {} });
});

after(async () => {
  await server?.close();
  await engine?.dispose();
});

test("the SGLang and vLLM sampler clients get exactly what the engine samples, token ids and logprobs", async () => {
  const prompt = engine.tokenizer.encode("Which river flows through Kalomi?");
  const params = { n: 3, maxTokens: 12, temperature: 1, seed: 7 };
  const want = await engine.sample(prompt, params);
  const eos = [engine.tokenizer.eosTokenId!];
  for (const kind of ["sglang", "vllm"] as const) {
    const got = await rolloutSampler({ kind, url: server.url }).sample(prompt, params, eos);
    assert.deepEqual(got, want, kind);
  }
  const one = await rolloutSampler({ kind: "sglang", url: server.url }).sample(prompt, { maxTokens: 5, seed: 1 }, eos);
  assert.equal(one.sequences.length, 1);
  await assert.rejects(
    rolloutSampler({ kind: "sglang", url: server.url }).sample(prompt, { stop: ["\n"] }, eos),
    /stops on token ids only/,
  );
});

test("update_weights_from_disk loads a directory under --weights-from and nothing outside it", async () => {
  const sglang = rolloutSampler({ kind: "sglang", url: server.url });
  await assert.rejects(sglang.reload(BASE, 1), /HTTP 403: model_path must be a directory inside/);
  // A trained copy under the weights directory: after the reload the server samples like it.
  const copy = await LocalEngine.load(BASE, { workers: 0 });
  try {
    const prompt = engine.tokenizer.encode("Who founded Povo Labs?");
    const d = { tokens: prompt.slice(0, -1), targetTokens: prompt.slice(1), weights: prompt.slice(1).map(() => 1) };
    await copy.forwardBackward([d], { type: "cross_entropy" });
    await copy.optimStep({ lr: 0.05 });
    const dir = join(weights, "v1");
    await copy.save(dir);
    await sglang.reload(dir, 1);
    const params = { n: 2, maxTokens: 10, seed: 3 };
    assert.deepEqual(
      await sglang.sample(prompt, params, [engine.tokenizer.eosTokenId!]),
      await copy.sample(prompt, params),
    );
  } finally {
    await copy.dispose();
    await engine.load(BASE); // back to the base for the next test
  }
  const vllm = rolloutSampler({ kind: "vllm", url: server.url });
  await assert.rejects(vllm.reload(join(weights, "v1"), 2), /vLLM takes new weights over HTTP only as LoRA adapters/);
});

test("training with engine.sampler (SGLang API) and loss.tis equals the in-process run", async () => {
  const local = join(root, "local"),
    split = join(root, "split");
  const write = (name: string, yaml: string) => {
    const p = join(root, `${name}.yaml`);
    writeFileSync(p, yaml);
    return p;
  };
  const run = async (cfg: string, out: string) => {
    const io = captureIO();
    assert.equal(await runCli(["train", "--config", cfg, "--out", out], io), 0, io.stderr.join("\n"));
    return readFileSync(join(out, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, number>);
  };
  const want = await run(write("local", multihopRecipe({ local: true })), local);
  const splitYaml =
    multihopRecipe({ local: true }).replace(
      "loss: { type: ppo, dualClip: 0 }",
      "loss: { type: ppo, dualClip: 0, tis: { cap: 2 } }",
    ) +
    `engine:\n  sampler: { kind: sglang, url: ${JSON.stringify(server.url)}, weightsDir: ${JSON.stringify(join(weights, "run"))} }\n`;
  assert.match(splitYaml, /tis: \{ cap: 2 \}/);
  const got = await run(write("split", splitYaml), split);
  assert.equal(got.length, 2);
  got.forEach((m, i) => {
    assert.equal(m.reward, want[i].reward, `iteration ${i + 1}: reward`);
    assert.ok(Math.abs(m.loss - want[i].loss) < 1e-4, `iteration ${i + 1}: loss ${m.loss} vs ${want[i].loss}`);
    // The same engine code on both sides: the learner and the sampler agree to float rounding.
    assert.ok(m.sampler_drift < 1e-4 && m.sampler_drift >= 0, `drift ${m.sampler_drift}`);
    assert.ok(Math.abs(m.tis_weight - 1) < 1e-3, `weight ${m.tis_weight}`);
    assert.equal(m.tis_capped, 0);
  });
});

test("a separate sampler is refused where it cannot work, in one line", () => {
  const cfg = (yaml: string) => {
    const p = join(root, `bad-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(p, yaml);
    return p;
  };
  assert.throws(
    () => loadConfig(cfg(`engine:\n  sampler: { kind: vllm, url: "http://127.0.0.1:1" }\n`)),
    /engine.sampler.kind: vllm loads new weights over HTTP only as LoRA adapters; train adapters \(engine.lora\)/,
  );
  assert.throws(
    () =>
      loadConfig(
        cfg(
          `model: { tokenizer: x }\nengine:\n  kind: tinker\n  tinker: { baseModel: b }\n  sampler: { kind: sglang, url: "http://127.0.0.1:1" }\n`,
        ),
      ),
    /a separate sampler needs engine.kind local/,
  );
});
