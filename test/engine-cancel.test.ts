/**
 * SamplingParams.signal: an aborted request leaves the decode batch at the
 * next step, in-process and across worker threads, without disturbing the
 * requests it shared the batch with and without leaking tensors; and the
 * server aborts when its client goes away, measured as CPU time after the drop.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine, type EngineStats } from "../src/engine/local/local-engine.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { InputError } from "../src/util/errors.js";
import { tf } from "../src/engine/local/tfjs/tf-backend.js";
import type { SampleResult } from "../src/engine/types.js";

let root: string;
let base: string;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-cancel-"));
  const raw = path.join(root, "raw");
  await initModel({ preset: "tiny", out: raw, seed: 0 });
  // Sharpen the random model so its next-token distributions are far from uniform (token equality then means something).
  const e = await LocalEngine.load(raw, { workers: 0, backend: "tfjs" });
  for (const [name, v] of e.model.params) {
    if (name.endsWith("_proj.weight") || name === "model.embed_tokens.weight") tf.tidy(() => v.assign(v.mul(6)));
  }
  base = path.join(root, "sharp");
  await e.save(base);
  await e.dispose();
});

after(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

/** Stats once no replica has decoded for 60 ms (the scheduler loop has wound down). */
async function quiet(engine: LocalEngine): Promise<EngineStats> {
  let last = await engine.stats();
  for (;;) {
    await sleep(60);
    const now = await engine.stats();
    if (now.scheduler.decodeSteps === last.scheduler.decodeSteps) return now;
    last = now;
  }
}

const isAbort = (signal: AbortSignal) => (e: unknown) => e === signal.reason && (e as Error).name === "AbortError";

/** Same tokens; logprobs equal up to float32 rounding (the batch's shape changes the summation order). */
function assertSameDraws(a: SampleResult, b: SampleResult): void {
  assert.deepEqual(
    a.sequences.map((s) => s.tokens),
    b.sequences.map((s) => s.tokens),
  );
  a.sequences.forEach((s, i) =>
    s.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - b.sequences[i].logprobs[t]) < 1e-4, `logprob ${i}/${t}`)),
  );
}

for (const workers of [0, 2]) {
  test(`abort mid-sampling: the request rejects, its decoding stops, a request sharing the batch is unchanged, no leaks (workers: ${workers})`, async () => {
    const engine = await LocalEngine.load(base, { workers });
    try {
      const long = engine.tokenizer.encode("Tell me a very long story about the sea.");
      const short = engine.tokenizer.encode("Hello world, what is 2+2?");
      const other = { n: 2, maxTokens: 20, temperature: 1, seed: 5, stop: [] };
      await engine.clearPrefixCache();
      const alone = await engine.sample(short, other);
      await engine.clearPrefixCache();
      const baseline = await quiet(engine);

      // The long request (n 4, 1500 tokens) is aborted once the other one has drawn 3 tokens.
      const controller = new AbortController();
      let seen = 0;
      const cancelled = engine.sample(long, {
        n: 4,
        maxTokens: 1500,
        temperature: 1,
        seed: 1,
        stop: [],
        signal: controller.signal,
      });
      const shared = engine.sample(short, { ...other, onToken: () => ++seen === 3 && controller.abort() });
      await assert.rejects(cancelled, isAbort(controller.signal));
      assertSameDraws(await shared, alone);

      const stopped = await quiet(engine);
      await sleep(200);
      const later = await engine.stats();
      assert.equal(
        later.scheduler.decodeSteps,
        stopped.scheduler.decodeSteps,
        "no decode step after the abort settled",
      );
      // Uncancelled, the long request alone needs 1500 steps (per replica it runs on); the other one 20.
      assert.ok(
        stopped.scheduler.decodeSteps - baseline.scheduler.decodeSteps < 300,
        `decode steps ${stopped.scheduler.decodeSteps - baseline.scheduler.decodeSteps}`,
      );

      // A request that aborts itself from its own onToken.
      const self = new AbortController();
      await assert.rejects(
        engine.sample(long, {
          n: 3,
          maxTokens: 1500,
          seed: 2,
          stop: [],
          signal: self.signal,
          onToken: () => self.abort(),
        }),
        isAbort(self.signal),
      );
      const selfStopped = await quiet(engine);
      assert.ok(selfStopped.scheduler.decodeSteps - stopped.scheduler.decodeSteps < 200);

      await engine.clearPrefixCache();
      const end = await engine.stats();
      assert.equal(end.cacheTensors, 0, "the decode batch was released");
      assert.equal(end.liveTensors, baseline.liveTensors, "no tensor leaked");
      // The engine keeps working, with the same draws.
      assertSameDraws(await engine.sample(short, other), alone);
    } finally {
      await engine.dispose();
    }
  });

  test(`an already-aborted signal rejects at once, nothing prefilled or decoded (workers: ${workers})`, async () => {
    const engine = await LocalEngine.load(base, { workers });
    try {
      const prompt = engine.tokenizer.encode("Hello world");
      const before = await engine.stats();
      const aborted = AbortSignal.abort();
      await assert.rejects(engine.sample(prompt, { n: 4, maxTokens: 50, signal: aborted }), isAbort(aborted));
      const reason = new Error("the user left");
      await assert.rejects(
        engine.sample(prompt, { n: 1, maxTokens: 50, signal: AbortSignal.abort(reason) }),
        (e) => e === reason,
      );
      const after = await engine.stats();
      assert.deepEqual(after.scheduler, before.scheduler);
      await assert.rejects(
        engine.sample(prompt, { signal: {} as AbortSignal }),
        (e) => e instanceof InputError && /signal must be an AbortSignal/.test(e.message),
      );
      // A signal that never fires changes nothing.
      const plain = await engine.sample(prompt, { n: 2, maxTokens: 6, seed: 3 });
      assertSameDraws(
        await engine.sample(prompt, { n: 2, maxTokens: 6, seed: 3, signal: new AbortController().signal }),
        plain,
      );
    } finally {
      await engine.dispose();
    }
  });
}

// ---------------------------------------------------------------------------
// The server: a client that disconnects stops costing CPU.

/** CPU time of this process (every thread: the workers' too) over `ms` of wall time. */
async function cpuOver(ms: number): Promise<number> {
  const start = process.cpuUsage();
  await sleep(ms);
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

const steps = async (srv: RunningServer) => (await (srv.engine as LocalEngine).stats()).scheduler.decodeSteps;

/**
 * Sends a request n 16 x 1500 tokens (a few seconds of compute), waits until it runs, measures
 * the CPU it burns for 500 ms, drops the connection, then measures 500 ms more.
 */
async function dropMidway(
  srv: RunningServer,
  route: string,
  body: object,
  started: (res: Promise<http.IncomingMessage>) => Promise<void>,
) {
  const req = http.request(srv.url + route, { method: "POST", headers: { "content-type": "application/json" } });
  req.on("error", () => {}); // we destroy it
  const response = new Promise<http.IncomingMessage>((r) => req.on("response", r));
  req.end(JSON.stringify(body));
  await started(response);
  const running = await cpuOver(500);
  req.destroy();
  await sleep(100); // the server sees the socket close
  const stepsBefore = await steps(srv);
  const afterDrop = await cpuOver(500);
  const stepsAfter = await steps(srv);
  return { running, afterDrop, stepsBefore, stepsAfter };
}

async function serve(workers: number, logged: string[]): Promise<RunningServer> {
  return startServer({ model: base, port: 0, engineOptions: { workers }, log: (l) => logged.push(l) });
}

test("server: a streamed chat (n 16) dropped after the first chunk stops using CPU (workers: 2)", async (t) => {
  const logged: string[] = [];
  const srv = await serve(2, logged);
  try {
    const body = {
      messages: [{ role: "user", content: "Tell me a story." }],
      n: 16,
      max_tokens: 1500,
      stream: true,
      seed: 1,
    };
    const m = await dropMidway(srv, "/v1/chat/completions", body, async (response) => {
      const res = await response;
      assert.equal(res.statusCode, 200);
      await new Promise((r) => res.once("data", r));
      res.resume();
    });
    t.diagnostic(
      `CPU ms per 500 ms: ${m.running.toFixed(0)} running, ${m.afterDrop.toFixed(0)} after the drop; decode steps ${m.stepsAfter}`,
    );
    assert.ok(
      m.afterDrop < 0.25 * m.running,
      `CPU after the drop ${m.afterDrop.toFixed(0)} ms vs ${m.running.toFixed(0)} ms while it ran (500 ms each)`,
    );
    assert.equal(m.stepsAfter, m.stepsBefore, "no decode step after the drop");
    assert.ok(m.stepsAfter < 2 * 1500, `decode steps ${m.stepsAfter}: the request did not run to the end`);
    // The server keeps serving, and reported nothing.
    const ok = await fetch(srv.url + "/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    });
    assert.equal(ok.status, 200);
    assert.deepEqual(logged, []);
  } finally {
    await srv.close();
  }
});

test("server: a non-streamed completion (n 64) dropped mid-way stops using CPU, and leaks nothing (workers: 0)", async (t) => {
  const logged: string[] = [];
  const srv = await serve(0, logged);
  const engine = srv.engine as LocalEngine;
  try {
    // Warm up first: the model caches some tensors on its first forward pass.
    await fetch(srv.url + "/v1/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "hi", max_tokens: 2 }),
    });
    await engine.clearPrefixCache();
    const baseline = await engine.stats();
    const body = { prompt: "Once upon a time", n: 64, max_tokens: 1500, seed: 1 };
    let answered = false;
    const m = await dropMidway(srv, "/v1/completions", body, async (response) => {
      void response.then(() => (answered = true));
      while ((await steps(srv)) < 10) await sleep(10);
    });
    assert.equal(answered, false, "the client left before the answer");
    t.diagnostic(
      `CPU ms per 500 ms: ${m.running.toFixed(0)} running, ${m.afterDrop.toFixed(0)} after the drop; decode steps ${m.stepsAfter}`,
    );
    assert.ok(
      m.afterDrop < 0.25 * m.running,
      `CPU after the drop ${m.afterDrop.toFixed(0)} ms vs ${m.running.toFixed(0)} ms while it ran (500 ms each)`,
    );
    assert.equal(m.stepsAfter, m.stepsBefore, "no decode step after the drop");
    assert.ok(m.stepsAfter < 1500, `decode steps ${m.stepsAfter}: the request did not run to the end`);
    await engine.clearPrefixCache();
    const end = await engine.stats();
    assert.equal(end.cacheTensors, 0);
    assert.equal(end.liveTensors, baseline.liveTensors);
    assert.deepEqual(logged, []);
  } finally {
    await srv.close();
  }
});
