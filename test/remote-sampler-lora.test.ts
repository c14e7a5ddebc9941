/**
 * Rollouts of a LoRA run sampled on an inference server: `agent-r1 serve` on loopback loads the
 * learner's PEFT adapters (vLLM's and SGLang's LoRA routes) over its own copy of the base model and
 * samples by adapter name exactly as the in-process LoRA engine does; the trainer pushes one adapter
 * per step and unloads the old ones once no sample uses them; a load that keeps failing stops the
 * run with one line naming the server and the adapter.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { rolloutSampler, type RolloutSampler } from "../src/engine/remote/sampler-client.js";
import { AdapterPush } from "../src/engine/remote/adapter-push.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { runCli } from "../src/cli/main.js";
import { loadConfig } from "../src/train/load-config.js";
import { captureIO, tempDir } from "./helpers.js";
import { BASE, multihopRecipe } from "./fixtures/remote-recipes.js";
import { ENGINES } from "./engine-internals.js";
import { SMALL_LORA } from "./model-fixtures.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
const root = tempDir("agent-r1-sampler-lora-");
const weights = join(root, "weights");
const serverLog: string[] = [];
let engine: LocalEngine, server: RunningServer;

before(async () => {
  if (skip) return;
  mkdirSync(weights, { recursive: true });
  engine = await LocalEngine.load(BASE, { workers: 0, backend: "native" });
  server = await startServer({ engine, port: 0, weightsFrom: weights, log: (l) => serverLog.push(l) });
});

after(async () => {
  await server?.close();
  await engine?.dispose();
});

/** A LoRA learner on the base, one cross-entropy step in (so its adapters change the model). */
async function trainedLearner(): Promise<LocalEngine> {
  const learner = await LocalEngine.load(BASE, { workers: 0, backend: "native", lora: { spec: SMALL_LORA, seed: 3 } });
  const prompt = learner.tokenizer.encode("Who founded Povo Labs?");
  const d = { tokens: prompt.slice(0, -1), targetTokens: prompt.slice(1), weights: prompt.slice(1).map(() => 1) };
  await learner.forwardBackward([d], { type: "cross_entropy" });
  assert.equal((await learner.optimStep({ lr: 0.05 })).skipped, false);
  return learner;
}

const modelIds = async () =>
  ((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; parent?: string }[] }).data;

test(
  "an adapter loaded on serve samples as the in-process LoRA engine does (vLLM and SGLang clients)",
  { skip },
  async () => {
    const learner = await trainedLearner();
    try {
      const dir = join(weights, "adapter-1");
      await learner.saveAdapter(dir);
      assert.deepEqual(readdirSync(dir).sort(), ["adapter_config.json", "adapter_model.safetensors"]);
      const vllm = rolloutSampler({ kind: "vllm", url: server.url });
      const sglang = rolloutSampler({ kind: "sglang", url: server.url });
      await vllm.loadAdapter("run-step-1", dir);
      await sglang.loadAdapter("run-step-1-sg", dir);
      assert.deepEqual(
        (await modelIds()).map((m) => [m.id, m.parent]),
        [
          ["multihop", undefined],
          ["run-step-1", "multihop"],
          ["run-step-1-sg", "multihop"],
        ],
      );
      const prompt = learner.tokenizer.encode("Which river flows through Kalomi?");
      const params = { n: 3, maxTokens: 12, temperature: 1, seed: 7 };
      const eos = [learner.tokenizer.eosTokenId!];
      const got = await vllm.sample(prompt, params, eos, learner.config.vocabSize, "run-step-1");
      const want = await learner.sample(prompt, params);
      assert.deepEqual(
        got.sequences.map((s) => s.tokens),
        want.sequences.map((s) => s.tokens),
      );
      // The sampled tokens' logprobs are the LoRA engine's own, scored afresh.
      const scored = await learner.computeLogprobs(got.sequences.map((s) => [...prompt, ...s.tokens]));
      got.sequences.forEach((s, i) =>
        s.logprobs.forEach((lp, t) => {
          const mine = scored[i][prompt.length + t]!;
          assert.ok(Math.abs(lp - mine) < 1e-4, `sequence ${i} token ${t}: served ${lp}, in-process ${mine}`);
        }),
      );
      assert.deepEqual(await sglang.sample(prompt, params, eos, learner.config.vocabSize, "run-step-1-sg"), got);
      // Without the adapter the same draws come from the base: other logprobs.
      const base = await vllm.sample(prompt, params, eos, learner.config.vocabSize);
      const moved = Math.max(
        ...base.sequences[0].logprobs.map((lp, t) => Math.abs(lp - (scored[0][prompt.length + t] ?? lp))),
      );
      assert.ok(
        moved > 1e-3 || base.sequences[0].tokens.join() !== got.sequences[0].tokens.join(),
        "the adapter changed nothing",
      );
      await vllm.unloadAdapter("run-step-1");
      await sglang.unloadAdapter("run-step-1-sg");
      assert.deepEqual(
        (await modelIds()).map((m) => m.id),
        ["multihop"],
      );
      await assert.rejects(
        vllm.sample(prompt, params, eos, undefined, "run-step-1"),
        /HTTP 404: The model 'run-step-1' does not exist/,
      );
    } finally {
      await learner.dispose();
    }
  },
);

test(
  "a load the server refuses is one line naming the server and the adapter; the trainer tries again, then stops",
  { skip },
  async () => {
    const vllm = rolloutSampler({ kind: "vllm", url: server.url });
    const sglang = rolloutSampler({ kind: "sglang", url: server.url });
    const missing = join(weights, "no-such-adapter");
    await assert.rejects(
      vllm.loadAdapter("x", missing),
      (e: Error) =>
        e.message ===
        `${server.url}: load_lora_adapter 'x' (${missing}) failed: HTTP 404: No adapter found at ${missing} (no adapter_config.json there)`,
    );
    await assert.rejects(
      sglang.loadAdapter("x", missing),
      /load_lora_adapter 'x' .* failed: HTTP 400: No adapter found/,
    );
    await assert.rejects(vllm.loadAdapter("x", root), /HTTP 403: lora_path must be a directory inside/);
    await assert.rejects(vllm.unloadAdapter("x"), /HTTP 404: The LoRA adapter 'x' cannot be found/);
    await assert.rejects(vllm.reload(missing, 1), /vLLM takes new weights over HTTP only as LoRA adapters/);

    // The trainer's push: a directory the server may not read, three tries, one line.
    const learner = await trainedLearner();
    const tries: string[] = [];
    try {
      const outside = join(root, "outside");
      const push = new AdapterPush({
        save: (dir) => learner.saveAdapter(dir),
        sampler: vllm,
        dir: outside,
        run: "my run",
        retries: 2,
        retryDelayMs: 10,
        log: (l) => tries.push(l),
      });
      const err = await push.publish(1).then(
        () => assert.fail("the load went through"),
        (e: Error) => e,
      );
      assert.equal(
        err.message,
        `${server.url}: load_lora_adapter 'my-run-step-1' (${join(outside, "my-run-step-1")}) failed: HTTP 403: lora_path must be a directory inside ${weights} (serve's --weights-from) (tried 3 times)`,
      );
      assert.doesNotMatch(err.message, /\n/);
      assert.equal(tries.length, 2);
      assert.match(tries[1], /trying again in 0\.02 s$/);
      await push.dispose();
    } finally {
      await learner.dispose();
    }
    // A whole run: it stops, and says why in one line.
    const recipe = join(root, "refused.yaml");
    writeFileSync(
      recipe,
      multihopRecipe({ local: true }, 1) +
        `engine:\n  workers: 0\n  lora: { rank: 4 }\n  sampler: { kind: vllm, url: ${JSON.stringify(server.url)}, weightsDir: ${JSON.stringify(join(root, "unreadable"))}, retries: 0 }\n`,
    );
    const io = captureIO();
    assert.equal(await runCli(["train", "--config", recipe, "--out", join(root, "refused")], io), 1);
    const errors = io.stderr.filter((l) => l.startsWith("error:"));
    assert.equal(errors.length, 1, io.stderr.join("\n"));
    assert.match(
      errors[0],
      /^error: http:\/\/127\.0\.0\.1:\d+: load_lora_adapter 'refused-step-0' \(.*unreadable\/refused-step-0\) failed: HTTP 403: .* \(tried 1 time\) \(hint: the server must be able to read/,
    );
    assert.doesNotMatch(errors[0], /\n/);
  },
);

/** A sampler that records LoRA loads and unloads and answers samples when told to. */
function recordingSampler(): RolloutSampler & { calls: string[]; release: () => void } {
  const calls: string[] = [];
  let release = () => {};
  return {
    kind: "vllm",
    calls,
    release: () => release(),
    async sample(_p, _params, _stop, _vocab, adapter) {
      calls.push(`sample ${adapter}`);
      await new Promise<void>((r) => (release = r));
      return { sequences: [] };
    },
    reload: async () => assert.fail("no full weights here"),
    loadAdapter: async (name) => void calls.push(`load ${name}`),
    unloadAdapter: async (name) => void calls.push(`unload ${name}`),
    describe: () => "recording",
  };
}

test("the adapter a running sample uses stays loaded until it is done; dispose unloads the last", async () => {
  const sampler = recordingSampler();
  const dir = join(root, "push");
  const written: string[] = [];
  const save = async (d: string) => {
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "adapter_config.json"), "{}");
    written.push(d);
  };
  const push = new AdapterPush({ save, sampler, dir, run: "r", retries: 0 });
  await push.publish(0);
  const running = push.use((adapter) => sampler.sample([1], {}, [], undefined, adapter));
  await push.publish(1);
  assert.deepEqual(sampler.calls, ["load r-step-0", "sample r-step-0", "load r-step-1"]);
  assert.deepEqual(push.live, ["r-step-0", "r-step-1"]);
  sampler.release();
  await running;
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(sampler.calls.slice(3), ["unload r-step-0"]);
  assert.deepEqual(push.live, ["r-step-1"]);
  assert.equal(existsSync(written[0]), false, "the unloaded adapter's directory is removed");
  // Publishing again with nothing running unloads the old one at once; a step loaded twice gets a new name.
  await push.publish(1);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(sampler.calls.slice(4), ["load r-step-1-2", "unload r-step-1"]);
  await push.dispose();
  assert.deepEqual(sampler.calls.slice(6), ["unload r-step-1-2"]);
  assert.deepEqual(push.live, []);
  assert.deepEqual(readdirSync(dir), []);
});

test(
  "a LoRA run sampling on serve through the vLLM API equals the in-process LoRA run; old adapters are unloaded",
  { skip },
  async () => {
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
    const lora = "  workers: 0\n  backend: native\n  lora: { rank: 4, alpha: 8 }\n";
    const want = await run(
      write("lora-local", multihopRecipe({ local: true }) + `engine:\n${lora}`),
      join(root, "local"),
    );
    const splitYaml =
      multihopRecipe({ local: true }).replace(
        "loss: { type: ppo, dualClip: 0 }",
        "loss: { type: ppo, dualClip: 0, tis: { cap: 2 } }",
      ) + `engine:\n${lora}  sampler: { kind: vllm, url: ${JSON.stringify(server.url)} }\n`;
    serverLog.length = 0;
    // The run directory is inside serve's --weights-from: the adapters go to RUN/sampler-adapters.
    const out = join(weights, "lora-run");
    const got = await run(write("lora-split", splitYaml), out);
    assert.equal(got.length, 2);
    got.forEach((m, i) => {
      assert.equal(m.reward, want[i].reward, `iteration ${i + 1}: reward`);
      assert.ok(Math.abs(m.loss - want[i].loss) < 1e-4, `iteration ${i + 1}: loss ${m.loss} vs ${want[i].loss}`);
      assert.ok(m.sampler_drift < 1e-4 && m.sampler_drift >= 0, `drift ${m.sampler_drift}`);
      assert.ok(Math.abs(m.tis_weight - 1) < 1e-3, `weight ${m.tis_weight}`);
    });
    // One adapter per step, each unloaded once the next is in; none left at the end.
    const events = serverLog.map((l) => l.replace(/ from .*$/, ""));
    assert.deepEqual(events, [
      "serve: loaded LoRA adapter 'lora-run-step-0'",
      "serve: loaded LoRA adapter 'lora-run-step-1'",
      "serve: unloaded LoRA adapter 'lora-run-step-0'",
      "serve: loaded LoRA adapter 'lora-run-step-2'",
      "serve: unloaded LoRA adapter 'lora-run-step-1'",
      "serve: unloaded LoRA adapter 'lora-run-step-2'",
    ]);
    assert.ok(serverLog[0].endsWith(join(out, "sampler-adapters", "lora-run-step-0")), serverLog[0]);
    assert.deepEqual(
      (await modelIds()).map((m) => m.id),
      ["multihop"],
    );
    assert.deepEqual(readdirSync(join(out, "sampler-adapters")), []);
  },
);

test("engine.sampler.kind vllm needs engine.lora, in one line", () => {
  const cfg = (yaml: string) => {
    const p = join(root, `cfg-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(p, yaml);
    return p;
  };
  assert.throws(
    () => loadConfig(cfg(`engine:\n  sampler: { kind: vllm, url: "http://127.0.0.1:1" }\n`)),
    /engine.sampler.kind: vllm loads new weights over HTTP only as LoRA adapters; train adapters \(engine.lora\)/,
  );
  const ok = loadConfig(cfg(`engine:\n  lora: { rank: 4 }\n  sampler: { kind: vllm, url: "http://127.0.0.1:1" }\n`));
  assert.equal(ok.engine.sampler?.retries, 3);
});
