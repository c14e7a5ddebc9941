/**
 * How the Tinker client waits, rule by rule, against a scripted server on loopback
 * (test/fixtures/scripted-tinker.ts): 429 to a sample is backpressure (1 s, then 5 s, no attempt
 * limit, until the request's deadline); 410 on retrieve_future sends the request again; 402 pauses
 * up to the configured limit, saying why; 408 and try_again poll again (at once after a long poll);
 * 5xx and dropped connections back off exponentially. Also the SDK's headers, and the seq_ids.
 * The client runs on a virtual clock: a wait is recorded and the clock moved on at once, so the
 * tests count requests and waits, and no result depends on the machine's speed.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { TinkerEngine, type TinkerEngineOptions } from "../src/engine/remote/tinker-engine.js";
import type { Clock, WaitReason } from "../src/engine/remote/tinker-waits.js";
import { tempDir } from "./helpers.js";
import { BASE_MODEL, scriptedTinker, type Script, type ScriptedTinker } from "./fixtures/scripted-tinker.js";

/** Where the tests' saves write remote.json (the server side is scripted). */
const saves = tempDir("agent-r1-waits-");
after(() => rmSync(saves, { recursive: true, force: true }));

/** A clock whose waits take no time: each is recorded and moves the clock on. */
function virtualClock() {
  let now = 1_000_000;
  const waits: { reason: WaitReason; ms: number }[] = [];
  const clock: Clock = {
    now: () => now,
    random: () => 1, // no jitter: backoffs are exactly 0.5·2ⁿ s
    async sleep(ms, reason, signal) {
      if (signal?.aborted) throw signal.reason;
      waits.push({ reason, ms });
      now += ms;
      await new Promise((r) => setImmediate(r));
    },
  };
  return {
    clock,
    waits,
    advance: (ms: number) => (now += ms),
    of: (r: WaitReason) => waits.filter((w) => w.reason === r),
  };
}

const DATUMS = [1, 2].map(() => ({ tokens: [1, 2], targetTokens: [2, 3], weights: [1, 1] }));
const CE = { type: "cross_entropy" as const, aggregation: "sum" as const };

/** A scripted server and an engine on it (JSON generation, so every body can be read back). */
async function setup(script: Script, o: Partial<TinkerEngineOptions> = {}) {
  const vc = virtualClock();
  const s = await scriptedTinker(script);
  const logs: string[] = [];
  const engine = await TinkerEngine.open({
    url: s.url,
    baseModel: "b",
    sdkVersion: "0.24.1",
    tokenizerDir: BASE_MODEL,
    clock: vc.clock,
    log: (l) => logs.push(l),
    ...o,
  });
  const done = async () => {
    await engine.dispose();
    await s.close();
  };
  return { s, vc, engine, logs, done };
}

/** An error whose message matches `re`. */
const message = (re: RegExp) => (e: unknown) => {
  assert.match((e as Error).message, re);
  return true;
};

const bodies = (s: ScriptedTinker, path: string) => s.requests(path).map((r) => r.body ?? {});

test("429 to a sample is backpressure: 1 s, then 5 s, the same sample sent again with no attempt limit, until the request's deadline", async () => {
  const t = await setup(
    { asample: (_s, n) => (n < 4 ? { status: 429, detail: "busy" } : undefined) },
    { maxRetries: 0 },
  );
  try {
    assert.deepEqual((await t.engine.sample([1, 2], { maxTokens: 4 })).sequences[0].tokens, [5]);
    const sent = t.s.requests("asample");
    assert.equal(sent.length, 5, "four push-backs, then taken (maxRetries 0 does not limit them)");
    assert.deepEqual(
      sent.map((r) => r.body?.seq_id),
      [0, 0, 0, 0, 0],
      "the same sample each time",
    );
    assert.ok(sent.every((r) => r.headers["x-tinker-sampling-backpressure"] === "1"));
    assert.deepEqual(
      t.vc.waits.map((w) => [w.reason, w.ms]),
      [
        ["backpressure", 1000],
        ["backpressure", 5000],
        ["backpressure", 5000],
        ["backpressure", 5000],
      ],
    );
  } finally {
    await t.done();
  }
  // A server that never takes it: the waits stop at the request's deadline (30 s here), not before.
  const busy = await setup({ asample: { status: 429, detail: "busy" } }, { futureTimeoutMs: 30_000 });
  try {
    await assert.rejects(
      busy.engine.sample([1, 2], { maxTokens: 4 }),
      message(
        new RegExp(
          `^${busy.s.url}: asample: the server is still too busy to take it \\(HTTP 429, 7 times\\), and the request's deadline \\(30 s\\) has come$`,
        ),
      ),
    );
    const waited = busy.vc.of("backpressure").reduce((sum, w) => sum + w.ms, 0);
    assert.equal(busy.vc.of("backpressure").length, 6);
    assert.ok(waited <= 30_000 && waited + 5000 > 30_000, `waited ${waited} ms`);
    assert.equal(busy.s.requests("asample").length, 7);
  } finally {
    await busy.done();
  }
  // 429 to anything else is a failure retried with backoff, at most maxRetries times.
  const other = await setup({ optim_step: { status: 429, detail: "busy" } }, { maxRetries: 2 });
  try {
    await assert.rejects(other.engine.optimStep({ lr: 1e-4 }), /optim_step failed: HTTP 429: busy/);
    assert.equal(other.s.requests("optim_step").length, 3);
    assert.deepEqual(
      other.vc.waits.map((w) => [w.reason, w.ms]),
      [
        ["backoff", 500],
        ["backoff", 1000],
      ],
    );
  } finally {
    await other.done();
  }
});

test("410 on retrieve_future sends the request again: a sample as the session's next seq_id, a training request as it was; the same id again means the result is lost", async () => {
  const t = await setup({
    "asample-result": (_s, n) => (n === 0 ? { status: 410, detail: "promise expired" } : undefined),
    "forward_backward-result": (_s, n) => (n === 0 ? { status: 410, detail: "promise expired" } : undefined),
  });
  try {
    assert.deepEqual((await t.engine.sample([1, 2], { maxTokens: 4 })).sequences[0].tokens, [5]);
    assert.deepEqual(
      bodies(t.s, "asample").map((b) => b.seq_id),
      [0, 1],
    );
    const polled = bodies(t.s, "retrieve_future").map((b) => String(b.request_id));
    const samplePolls = polled.filter((id) => id.startsWith("r-asample"));
    assert.equal(samplePolls.length, 2);
    assert.notEqual(samplePolls[0], samplePolls[1], "the second poll asks for the new request");
    assert.ok(
      t.logs.some((l) =>
        /asample \(request r-asample-\d+\): the result expired \(HTTP 410: promise expired\); sending it again/.test(l),
      ),
    );

    await t.engine.forwardBackward(DATUMS, CE);
    const fb = bodies(t.s, "forward_backward");
    assert.equal(fb.length, 2);
    assert.deepEqual(fb[1], fb[0], "the same request, seq_id and all");
  } finally {
    await t.done();
  }
  const lost = await setup({
    forward_backward: { json: { request_id: "r-fixed" } },
    "forward_backward-result": { status: 410, detail: "promise expired" },
  });
  try {
    await assert.rejects(
      lost.engine.forwardBackward(DATUMS, CE),
      /forward_backward \(seq_id 1, 2 datums\) \(request r-fixed\): the result expired on the server \(HTTP 410\), and sending the request again gave the same request id: the result is lost/,
    );
    assert.equal(lost.s.requests("forward_backward").length, 2);
  } finally {
    await lost.done();
  }
});

test("402 pauses the client, trying every 5 s up to the configured limit, with a line saying why", async () => {
  const t = await setup({
    asample: (_s, n) => (n < 3 ? { status: 402, detail: "billing blocked" } : undefined),
    "optim_step-result": (_s, n) => (n === 0 ? { status: 402, detail: "billing blocked" } : undefined),
  });
  try {
    await t.engine.sample([1, 2], { maxTokens: 4 });
    assert.equal(t.s.requests("asample").length, 4);
    assert.deepEqual(
      t.vc.waits.map((w) => [w.reason, w.ms]),
      [
        ["billing", 5000],
        ["billing", 5000],
        ["billing", 5000],
      ],
    );
    const said = t.logs.filter((l) => /billing/.test(l));
    assert.equal(said.length, 1, "said once, not at every try");
    assert.match(
      said[0],
      /asample: the server refuses work for billing \(HTTP 402: billing blocked\); pausing, trying again every 5 s for up to 3600 s \(engine\.tinker\.billingPauseS\)/,
    );
    // On a poll too: the future is polled again after the pause, not sent again.
    await t.engine.optimStep({ lr: 1e-4 });
    assert.equal(t.s.requests("optim_step").length, 1);
    assert.equal(t.vc.of("billing").length, 4);
  } finally {
    await t.done();
  }
  const never = await setup({ asample: { status: 402, detail: "billing blocked" } }, { billingMaxPauseMs: 12_000 });
  try {
    await assert.rejects(never.engine.sample([1, 2], { maxTokens: 4 }), (e: Error & { hint?: string }) => {
      assert.match(
        e.message,
        /asample was refused for billing \(HTTP 402: billing blocked\), still after a pause of 15 s/,
      );
      assert.match(String(e.hint), /engine\.tinker\.billingPauseS/);
      return true;
    });
    assert.equal(never.vc.of("billing").length, 3, "paused 0-5, 5-10, 10-15 s; at 15 s past the 12 s limit");
  } finally {
    await never.done();
  }
});

test("408 and try_again poll the same future again: at once after a long poll, after a short pause after an instant one; never a new submission", async () => {
  let vc: ReturnType<typeof virtualClock> | undefined;
  const t = await setup({
    "asample-result": (_s, n) => {
      if (n === 0 || n === 1) vc!.advance(30_000); // the server long-polled for 30 s
      if (n === 0) return { status: 408, detail: "timeout" };
      if (n === 1 || n === 2) return { json: { type: "try_again" } };
      return undefined;
    },
  });
  vc = t.vc;
  try {
    await t.engine.sample([1, 2], { maxTokens: 4 });
    assert.equal(t.s.requests("asample").length, 1);
    const polls = t.s.requests("retrieve_future").filter((r) => String(r.body?.request_id).startsWith("r-asample"));
    assert.deepEqual(
      polls.map((p) => p.headers["x-tinker-request-iteration"]),
      ["0", "1", "2", "3"],
    );
    assert.ok(polls.every((p) => p.headers["x-tinker-request-type"] === "Sample"));
    assert.deepEqual(
      t.vc.waits.map((w) => w.reason),
      ["poll"],
      "no pause after the long polls; one short pause after the instant try_again",
    );
    assert.ok(t.vc.waits[0].ms <= 250, `${t.vc.waits[0].ms} ms`);
  } finally {
    await t.done();
  }
});

test("5xx and dropped connections back off exponentially (0.5 s, 1 s, ...), at most maxRetries times in a row", async () => {
  const t = await setup(
    {
      "asample-result": (_s, n) => (n < 2 ? { status: 503, detail: "overloaded" } : undefined),
      optim_step: (_s, n) => (n < 2 ? { drop: true } : undefined),
      "save_weights-result": (_s, n) => (n < 2 ? { drop: true } : undefined),
    },
    { maxRetries: 2 },
  );
  try {
    await t.engine.sample([1, 2], { maxTokens: 4 });
    assert.deepEqual(
      t.vc.waits.map((w) => [w.reason, w.ms]),
      [
        ["backoff", 500],
        ["backoff", 1000],
      ],
    );
    await t.engine.optimStep({ lr: 1e-4 });
    assert.equal(t.s.requests("optim_step").length, 3, "sent again after each drop");
    await t.engine.save(join(saves, "checkpoint"));
    assert.deepEqual(
      t.vc.waits.slice(2).map((w) => [w.reason, w.ms]),
      [
        ["backoff", 500],
        ["backoff", 1000],
        ["backoff", 500],
        ["backoff", 1000],
      ],
    );
  } finally {
    await t.done();
  }
  const gone = await setup({ optim_step: { drop: true } }, { maxRetries: 2 });
  try {
    await assert.rejects(
      gone.engine.optimStep({ lr: 1e-4 }),
      message(new RegExp(`^${gone.s.url}: optim_step failed: `)),
    );
    assert.equal(gone.s.requests("optim_step").length, 3);
  } finally {
    await gone.done();
  }
});

test("the SDK's headers: X-Tinker-Sampling-Backpressure on asample only; X-Tinker-Request-Type and -Iteration on every poll", async () => {
  const t = await setup({});
  try {
    await t.engine.sample([1, 2], { maxTokens: 4 });
    await t.engine.forwardBackward(DATUMS, CE);
    await t.engine.optimStep({ lr: 1e-4 });
    await t.engine.save(join(saves, "checkpoint"));
    for (const r of t.s.seen)
      assert.equal(r.headers["x-tinker-sampling-backpressure"], r.path.endsWith("/asample") ? "1" : undefined, r.path);
    const polls = t.s.requests("retrieve_future");
    assert.deepEqual(
      polls.map((p) => p.headers["x-tinker-request-type"]),
      ["CreateModel", "SaveWeightsForSampler", "Sample", "ForwardBackward", "OptimStep", "SaveWeights"],
    );
    assert.ok(polls.every((p) => p.headers["x-tinker-request-iteration"] === "0"));
  } finally {
    await t.done();
  }
});

test("seq_ids: samples number from 0 in each sampling session; training requests number 1, 2, ... in the order sent", async () => {
  const t = await setup({});
  try {
    await t.engine.sample([1, 2], { maxTokens: 4 });
    await t.engine.sample([1, 2], { maxTokens: 4 });
    await t.engine.forwardBackward(DATUMS, CE);
    await t.engine.optimStep({ lr: 1e-4 });
    await t.engine.sample([1, 2], { maxTokens: 4 });
    await t.engine.sample([1, 2], { maxTokens: 4 });
    const samples = bodies(t.s, "asample").map((b) => [b.sampling_session_id, b.seq_id]);
    const [a, b] = [samples[0][0], samples[2][0]];
    assert.notEqual(a, b, "a new sampling session after the step");
    assert.deepEqual(samples, [
      [a, 0],
      [a, 1],
      [b, 0],
      [b, 1],
    ]);
    const training = t.s.seen
      .filter((r) => /(save_weights_for_sampler|forward_backward|optim_step)$/.test(r.path))
      .map((r) => [r.path.replace("/api/v1/", ""), r.body?.seq_id]);
    assert.deepEqual(training, [
      ["save_weights_for_sampler", 1],
      ["forward_backward", 2],
      ["optim_step", 3],
      ["save_weights_for_sampler", 4],
    ]);
    assert.equal(bodies(t.s, "create_model")[0].model_seq_id, 0);
  } finally {
    await t.done();
  }
});
