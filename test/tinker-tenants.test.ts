/**
 * Multi-tenant LoRA in `serve --tinker`: two LoRA models (different ranks, targets and seeds) and
 * one full-weight model, over one copy of the base, trained at the same time through the project's
 * Tinker client (TinkerEngine, engine.kind: tinker); each gives the losses, logprobs and gradient
 * norms of the same run in-process, and a sampling session on each model's latest adapters gives
 * that model's logprobs. Then the memory plan: a model past the budget is refused in one line
 * naming it and the budget, and the models already there go on.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { readRemoteState, TinkerEngine, type LoraSettings } from "../src/engine/remote/tinker-engine.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { targetsFromTinker } from "../src/model/peft-targets.js";
import { readModelConfig } from "../src/model/model-dir.js";
import { baseCharge, bytesOf, modelCharge } from "../src/serve/tinker/memory-ledger.js";
import type { AdamParams, Datum, Engine, LossSpec } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";
import { repoRoot } from "./repo-root.js";
import { tempDir } from "./helpers.js";

const BASE = join(repoRoot(), "assets", "base", "multihop");
const root = tempDir("agent-r1-tenants-");
const logged: string[] = [];
let server: RunningTinkerServer;

const LOSS: LossSpec = { type: "ppo", dualClip: 0 };
const ADAM: AdamParams = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, gradClipNorm: 0 };

/** The three tenants: how the client asks for each (lora undefined: full weights). */
const TENANTS: { name: string; lora?: LoraSettings }[] = [
  {
    name: "LoRA rank 4, attention + MLP",
    lora: { rank: 4, seed: 1, trainAttn: true, trainMlp: true, trainUnembed: false },
  },
  { name: "LoRA rank 8, MLP only", lora: { rank: 8, seed: 2, trainAttn: false, trainMlp: true, trainUnembed: false } },
  { name: "full weights" },
];

/** The same model in-process: the local engine with engine.lora as the server reads lora_config (alpha = rank). */
function localTwin(lora: LoraSettings | undefined): Promise<LocalEngine> {
  if (!lora) return LocalEngine.load(BASE, { workers: 0 });
  const spec = { rank: lora.rank, alpha: lora.rank, dropout: 0, targets: targetsFromTinker(lora), rslora: false };
  return LocalEngine.load(BASE, { workers: 0, lora: { spec, seed: lora.seed } });
}

const remote = (lora: LoraSettings | undefined, extra: Partial<Parameters<typeof TinkerEngine.open>[0]> = {}) =>
  TinkerEngine.open({
    url: server.url,
    baseModel: "multihop",
    ...(lora ? { lora } : {}),
    sdkVersion: "0.25.0",
    tokenizerDir: BASE,
    ...extra,
  });

/** Datums of a tenant's step: their own tokens, advantages and sampler logprobs. */
function datums(seed: number): Datum[] {
  const rng = new Rng(seed, 0);
  const tok = () => 1 + Math.floor(rng.next() * 500);
  return Array.from({ length: 3 }, (_, i) => {
    const n = 10 + 3 * i;
    const seq = Array.from({ length: n + 1 }, tok);
    const weights = seq.slice(1).map((_, t) => (t < 4 ? 0 : 1));
    return {
      tokens: seq.slice(0, n),
      targetTokens: seq.slice(1),
      weights,
      advantages: weights.map((w) => (w ? (i % 2 ? -1 : 1) * (0.5 + rng.next()) : 0)),
      logprobs: weights.map(() => -6 - rng.next()),
    };
  });
}

const close = (a: number, b: number, tol: number, what: string) =>
  assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

function sameLogprobs(got: (number | null)[][], want: (number | null)[][], tol: number, what: string): void {
  assert.equal(got.length, want.length, what);
  got.forEach((row, i) => {
    assert.equal(row.length, want[i].length, `${what}, sequence ${i}`);
    row.forEach((x, t) => {
      if (want[i][t] === null) return assert.equal(x, null, `${what}, sequence ${i}, entry ${t}`);
      close(x as number, want[i][t] as number, tol, `${what}, sequence ${i}, entry ${t}`);
    });
  });
}

/** One step of one tenant on both sides: forward_backward then optim_step, the results compared. */
async function step(r: Engine, l: Engine, data: Datum[], what: string): Promise<void> {
  const [got, want] = await Promise.all([r.forwardBackward(data, LOSS), l.forwardBackward(data, LOSS)]);
  close(got.metrics.loss, want.metrics.loss, 1e-5, `${what}: loss`);
  sameLogprobs(got.logprobs, want.logprobs, 1e-4, `${what}: logprobs`);
  const [s, t] = await Promise.all([r.optimStep(ADAM), l.optimStep(ADAM)]);
  close(s.gradNorm, t.gradNorm, 1e-4, `${what}: grad norm`);
  assert.equal(s.step, t.step, `${what}: step`);
}

before(async () => {
  server = await startTinkerServer({
    baseModels: new Map([["multihop", BASE]]),
    stateDir: join(root, "state"),
    port: 0,
    engineOptions: { workers: 0 },
    log: (line) => logged.push(line),
  });
});

after(() => server?.close());

test("two LoRA models and a full-weight model over one base, trained at once, each equal to its in-process run; sampling each gives its own logprobs", async () => {
  const locals = await Promise.all(TENANTS.map((t) => localTwin(t.lora)));
  const remotes = await Promise.all(TENANTS.map((t) => remote(t.lora)));
  try {
    assert.deepEqual(server.service.sharedBases(), { multihop: 2 }, "the two LoRA models share one base");
    assert.equal(logged.filter((l) => /: LoRA rank \d/.test(l)).length, 2, logged.join("\n"));
    assert.equal(logged.filter((l) => /: full weights$/.test(l)).length, 1, logged.join("\n"));
    for (let k = 0; k < 3; k++)
      await Promise.all(
        TENANTS.map((t, i) => step(remotes[i], locals[i], datums(100 * i + k), `${t.name}, step ${k + 1}`)),
      );
    // Sampling sessions on each model's latest weights: scores and samples are that model's.
    const probe = [[3, 17, 42, 99, 5, 250, 61, 8, 400, 12]];
    const scored = await Promise.all(remotes.map((r) => r.computeLogprobs(probe)));
    for (const [i, t] of TENANTS.entries())
      sameLogprobs(scored[i], await locals[i].computeLogprobs(probe), 1e-4, `${t.name}: scored`);
    const apart = (a: (number | null)[], b: (number | null)[]) =>
      Math.max(...a.slice(1).map((x, j) => Math.abs((x as number) - (b[j + 1] as number))));
    assert.ok(apart(scored[0][0], scored[1][0]) > 1e-3, "the two LoRA models differ");
    assert.ok(apart(scored[0][0], scored[2][0]) > 1e-3, "a LoRA model and the full model differ");
    const prompt = probe[0].slice(0, 4);
    for (const [i, t] of TENANTS.entries()) {
      const { sequences } = await remotes[i].sample(prompt, { maxTokens: 6, seed: 5, temperature: 1, stop: [] });
      const s = sequences[0];
      const want = (await locals[i].computeLogprobs([[...prompt, ...s.tokens]]))[0].slice(prompt.length);
      s.logprobs.forEach((lp, j) => close(lp, want[j] as number, 1e-3, `${t.name}: sampled token ${j}`));
    }
  } finally {
    await Promise.all([...remotes.map((r) => r.dispose()), ...locals.map((l) => l.dispose())]);
  }
});

/** A POST of the protocol's JSON, and the result of the future it answers with (when it does). */
async function call(path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const post = async (route: string, b: unknown) => {
    const res = await fetch(`${server.url}/api/v1/${route}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(b),
    });
    const json = (await res.json()) as Record<string, unknown>;
    assert.equal(res.status, 200, `${route}: ${JSON.stringify(json)}`);
    return json;
  };
  const first = await post(path, body);
  if (typeof first.request_id !== "string") return first;
  for (;;) {
    const r = await post("retrieve_future", { request_id: first.request_id });
    if (r.type !== "try_again") return r;
  }
}

test("a LoRA model's checkpoint samples over the shared base, and a new model continues from it", async () => {
  const lora = TENANTS[0].lora!;
  const local = await localTwin(lora);
  const r = await remote(lora);
  const saved = join(root, "lora-checkpoint");
  let again: TinkerEngine | undefined;
  try {
    await step(r, local, datums(11), "before the checkpoint");
    await r.save(saved);
    const path = readRemoteState(saved).path;
    // A sampling session on the saved adapters: over the base already held, scored as the model.
    const session = (await call("create_session", {})).session_id;
    const users = server.service.sharedBases().multihop;
    const sampler = await call("create_sampling_session", { session_id: session, model_path: path });
    assert.deepEqual(server.service.sharedBases(), { multihop: users + 1 }, "the adapters go on the held base");
    const probe = [4, 80, 23, 310, 7, 66];
    const res = await call("asample", {
      sampling_session_id: sampler.sampling_session_id,
      seq_id: 0,
      prompt: { chunks: [{ type: "encoded_text", tokens: probe }] },
      num_samples: 1,
      sampling_params: { max_tokens: 1, temperature: 1, top_k: -1, top_p: 1 },
      prompt_logprobs: true,
    });
    sameLogprobs([res.prompt_logprobs as number[]], await local.computeLogprobs([probe]), 1e-4, "saved adapters");
    // A new LoRA model loads it (adapters, optimizer state, step) and trains on as the first would.
    again = await remote(lora, { resumeFrom: saved });
    await step(again, local, datums(12), "after the checkpoint");
    // The step used the saved moments: the weights it made are the in-process run's.
    sameLogprobs(await again.computeLogprobs([probe]), await local.computeLogprobs([probe]), 1e-4, "resumed");
    // Full weights do not take LoRA adapters.
    await assert.rejects(
      remote(undefined, { resumeFrom: saved, maxRetries: 0 }),
      /HTTP 400: path 'tinker:\/\/model-\w+\/weights\/[^']+' holds LoRA adapters; model model-\w+ trains full weights/,
    );
  } finally {
    await Promise.all([r.dispose(), again?.dispose(), local.dispose()]);
  }
});

test("a model past the memory budget is refused with one line naming it and the budget; the models there go on", async () => {
  const config = readModelConfig(BASE);
  const opts = { workers: 0, microBatchBytes: 64 << 20, prefixCacheBytes: 8 << 20 };
  const spec = { rank: 8, alpha: 8, dropout: 0, targets: targetsFromTinker(TENANTS[0].lora!), rslora: false };
  const base = bytesOf(baseCharge("multihop", config, opts)),
    lora = bytesOf(modelCharge("m", config, spec, opts));
  // Room for the base, one LoRA model and the activations, and half another.
  const memoryGb = (base + lora * 1.5 + opts.microBatchBytes) / 2 ** 30;
  const tight = await startTinkerServer({
    baseModels: new Map([["multihop", BASE]]),
    stateDir: join(root, "state-tight"),
    port: 0,
    engineOptions: { ...opts, memoryGb },
    log: () => {},
  });
  const saved = server;
  server = tight;
  const lora8 = { ...TENANTS[0].lora!, rank: 8 };
  const first = await remote(lora8);
  try {
    await assert.rejects(remote(lora8, { maxRetries: 0 }), (e: Error) => {
      assert.doesNotMatch(e.message, /\n/);
      assert.match(
        e.message,
        /HTTP 429: create_model: a model of 'multihop' \(LoRA rank 8\) needs \d+ MiB \(adapters, gradients and optimizer state \d+ MiB, KV cache \d+ MiB\); this server holds \d+ MiB of its \d+ MiB budget \(--memory-gb\) for the base 'multihop' and 1 model; unload a model or serve with a larger --memory-gb$/,
      );
      return true;
    });
    await assert.rejects(
      remote(undefined, { maxRetries: 0 }),
      /a model of 'multihop' \(full weights\) needs .*weights/,
    );
    assert.deepEqual(tight.service.sharedBases(), { multihop: 1 }, "the refused models hold nothing");
    // The model that fits trains on.
    const fb = await first.forwardBackward(datums(7), LOSS);
    assert.ok(Number.isFinite(fb.metrics.loss));
    assert.equal((await first.optimStep(ADAM)).step, 1);
  } finally {
    server = saved;
    await first.dispose();
    await tight.close();
  }
});
