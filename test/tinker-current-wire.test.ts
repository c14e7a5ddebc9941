/**
 * The newest wire (SDK 0.31) end to end: the Tinker client against `serve --tinker` on loopback,
 * with a recording proxy between them (test/fixtures/recording-proxy.ts) to check what each side
 * says. Samples carry per-sequence ids (the acknowledgement's, matched to the result); completions
 * come through retrieve_futures, one poll for the session, and each result is fetched once; a
 * sample given up is cancelled (cancel_future) and stops on the server, as the dynamic config says,
 * which the client asks for again once its refresh interval has passed. Then the server's side on
 * its own: each generation gets what it claims (ids from 0.25, none for JSON), the sampling fields
 * it does not compute are refused naming them, retrieve_futures and cancel_future are read
 * strictly.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { TinkerEngine } from "../src/engine/remote/tinker-engine.js";
import { tempDir } from "./helpers.js";
import { BASE } from "./fixtures/remote-recipes.js";
import { recordingProxy } from "./fixtures/recording-proxy.js";
import { shiftedClock } from "./fixtures/shifted-clock.js";

const root = tempDir("agent-r1-wire-");
const servers: RunningTinkerServer[] = [];
after(async () => {
  await Promise.all(servers.map((s) => s.close()));
  rmSync(root, { recursive: true, force: true });
});

async function server(o: Partial<Parameters<typeof startTinkerServer>[0]> = {}): Promise<RunningTinkerServer> {
  const s = await startTinkerServer({
    baseModels: new Map([["multihop", BASE]]),
    stateDir: join(root, `state-${servers.length}`),
    port: 0,
    log: () => {},
    ...o,
  });
  servers.push(s);
  return s;
}

const open = (url: string, sdkVersion: string, extra: Partial<Parameters<typeof TinkerEngine.open>[0]> = {}) =>
  TinkerEngine.open({ url, baseModel: "multihop", sdkVersion, tokenizerDir: BASE, samplerOnly: true, ...extra });

const post = async (url: string, path: string, body: unknown) => {
  const res = await fetch(`${url}/api/v1/${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};

test("SDK 0.31 through serve --tinker: per-sequence ids match the acknowledgement, completions come through retrieve_futures, each result is fetched once", async () => {
  const s = await server();
  const proxy = await recordingProxy(s.url);
  const engine = await open(proxy.url, "0.31.0");
  try {
    const config = proxy.on("client/config")[0].answer!;
    assert.deepEqual(config.supported_sdk_versions, { oldest: "0.24.0", newest: "0.31.0" });
    assert.ok((config.supported_features as string[]).includes("retrieve_futures"));
    assert.equal(config.sample_use_retrieve_futures, true);
    assert.equal(proxy.on("client/dynamic_config").length, 1, "the dynamic config is asked for at the start");

    const results = await Promise.all(
      [0, 1, 2, 3].map((seed) => engine.sample([1, 2, 3], { n: 2, maxTokens: 6, seed })),
    );
    const acks = proxy.on("asample").map((x) => x.answer!);
    assert.equal(acks.length, 4);
    for (const r of results) {
      const ids = r.sequences.map((q) => q.sequenceId);
      const ack = acks.find((a) => (a.sample_sequence_ids as string[])[0] === ids[0]);
      assert.ok(ack, `the ids ${ids} are an acknowledgement's`);
      assert.deepEqual(ids, ack!.sample_sequence_ids, "in the acknowledgement's order");
      assert.equal(new Set(ids).size, 2);
    }
    // One result fetch per sample, at iteration 0: the session's poll said they were done.
    const fetches = proxy.on("retrieve_future");
    assert.deepEqual(fetches.map((x) => x.body!.request_id).sort(), acks.map((a) => a.request_id).sort());
    assert.ok(fetches.every((x) => x.headers["x-tinker-request-iteration"] === "0" && x.status === 200));
    const polls = proxy.on("retrieve_futures");
    assert.ok(polls.length >= 1 && polls.length <= 8, `${polls.length} session polls`);
    assert.ok(polls.every((p) => (p.body!.target as Record<string, unknown>).type === "sampling_session"));
    const reported = polls.flatMap((p) => (p.answer!.completions as { request_id: string }[]).map((c) => c.request_id));
    assert.deepEqual([...new Set(reported)].sort(), acks.map((a) => a.request_id).sort());
    // Scoring (n = 1) goes the same way.
    const [lp] = await engine.computeLogprobs([[1, 2, 3, 4]]);
    assert.equal(lp.length, 4);
  } finally {
    await engine.dispose();
    await proxy.close();
  }
});

test("a sample given up is cancelled on the server (cancel_future) and stops there; with cancelling off in the dynamic config none is sent", async () => {
  const s = await server({ dynamicConfig: { refreshIntervalS: 60, cancelBatch: 2 } });
  // Once the client polls for a sample's completion (so it has the acknowledgement), give the sample up.
  let controller = new AbortController();
  const hooks = {
    onRequest: (path: string) => {
      if (path.endsWith("/retrieve_futures")) controller.abort();
    },
  };
  const proxy = await recordingProxy(s.url, hooks);
  const vc = shiftedClock();
  const engine = await open(proxy.url, "0.31.0", { clock: vc.clock });
  const started = Date.now();
  try {
    // 2 x 2000 tokens with no stop: seconds of work, given up at once.
    await assert.rejects(engine.sample([1, 2, 3], { n: 2, maxTokens: 2000, stop: [], signal: controller.signal }), {
      name: "AbortError",
    });
  } finally {
    await engine.dispose(); // waits for the cancels to go out
  }
  const id = proxy.on("asample")[0].answer!.request_id as string;
  const cancels = proxy.on("cancel_future");
  assert.deepEqual(
    cancels.map((c) => [c.body, c.status, c.answer]),
    [[{ request_id: id }, 200, { type: "cancel_future", request_id: id, cancelled: true }]],
  );
  // The sample stopped on the server: its result is the cancellation, well before 4000 tokens' time.
  const settled = await post(s.url, "retrieve_future", { request_id: id });
  assert.equal(settled.json.category, "user");
  assert.match(String(settled.json.error), /was cancelled \(cancel_future\)/);
  assert.ok(Date.now() - started < 30_000);

  // The dynamic config is asked for again once refresh_interval_sec has passed (before the next cancels).
  const engine2 = await open(proxy.url, "0.31.0", { clock: vc.clock });
  const before = proxy.on("client/dynamic_config").length;
  controller = new AbortController();
  vc.advance(61_000);
  const p = engine2.sample([1, 2, 3], { n: 1, maxTokens: 2000, stop: [], signal: controller.signal });
  await assert.rejects(p, { name: "AbortError" });
  await engine2.dispose();
  assert.equal(proxy.on("client/dynamic_config").length, before + 1, "asked again after 60 s");
  await proxy.close();

  // Cancelling off: nothing is sent, the sample runs on.
  const off = await server({ dynamicConfig: { cancelEnabled: false } });
  const proxy2 = await recordingProxy(off.url, hooks);
  const engine3 = await open(proxy2.url, "0.31.0");
  controller = new AbortController();
  const p3 = engine3.sample([1, 2, 3], { n: 1, maxTokens: 2000, stop: [], signal: controller.signal });
  await assert.rejects(p3, { name: "AbortError" });
  await engine3.dispose();
  assert.equal(proxy2.on("cancel_future").length, 0);
  await proxy2.close();
});

test("older generations get what they claim: 0.25 ids without session polling or cancels, 0.24 JSON without ids", async () => {
  const s = await server();
  const proxy = await recordingProxy(s.url);
  for (const sdk of ["0.25.0", "0.24.1"]) {
    const engine = await open(proxy.url, sdk);
    try {
      const r = await engine.sample([1, 2, 3], { n: 2, maxTokens: 4 });
      const ack = proxy.on("asample").at(-1)!.answer!;
      if (sdk === "0.25.0")
        assert.deepEqual(
          r.sequences.map((q) => q.sequenceId),
          ack.sample_sequence_ids,
        );
      else {
        assert.equal(ack.sample_sequence_ids, undefined, "a JSON client gets no ids");
        assert.ok(r.sequences.every((q) => q.sequenceId === undefined));
      }
    } finally {
      await engine.dispose();
    }
  }
  assert.equal(proxy.on("retrieve_futures").length, 0);
  assert.equal(proxy.on("client/dynamic_config").length, 0);
  await proxy.close();
});

test("the server refuses the sampling fields it does not compute, and reads retrieve_futures and cancel_future strictly", async () => {
  const s = await server({ pollMs: 200 });
  const session = (await post(s.url, "create_session", { sdk_version: "0.31.0" })).json.session_id;
  const sampler = (await post(s.url, "create_sampling_session", { session_id: session, base_model: "multihop" })).json
    .sampling_session_id as string;
  const sample = (extra: Record<string, unknown>) =>
    post(s.url, "asample", {
      sampling_session_id: sampler,
      seq_id: 0,
      num_samples: 1,
      prompt: { chunks: [{ type: "encoded_text", tokens: [1, 2, 3] }] },
      sampling_params: { max_tokens: 2 },
      ...extra,
    });
  for (const [field, value, what] of [
    ["topk_sample_logprobs", 3, /top-k logprobs of sampled tokens/],
    ["topk_prompt_logprobs", 2, /top-k prompt logprobs/],
    ["target_prompt_logprobs", { data: [4, -1], dtype: "int64", shape: [1, 2] }, /logprobs of chosen tokens/],
    ["prompt_alt_tokens_k", 2, /alternative tokens/],
    ["prompt_logprobs_last_n", 2, /last n tokens/],
    ["record_stability_info", true, /stability info/],
  ] as const) {
    const r = await sample({ [field]: value });
    assert.equal(r.status, 400, field);
    assert.match(String(r.json.detail), new RegExp(`^${field}: this server does not compute .*${what.source}`));
  }
  // Left out, 0, null or false: taken, with one id per sequence for this 0.31 session.
  const ok = await sample({
    topk_sample_logprobs: 0,
    prompt_alt_tokens_k: 0,
    target_prompt_logprobs: null,
    record_stability_info: false,
  });
  assert.equal(ok.status, 200);
  assert.equal((ok.json.sample_sequence_ids as string[]).length, 1);

  // retrieve_futures: the completion comes after cursor 0; asked again from its cursor, none (after the wait).
  const target = { type: "sampling_session", sampling_session_id: sampler };
  const first = await post(s.url, "retrieve_futures", { target, prev_cursor: 0 });
  assert.deepEqual(first.json, { completions: [{ state: "finished", request_id: ok.json.request_id }], cursor: 1 });
  const t0 = Date.now();
  const second = await post(s.url, "retrieve_futures", { target, prev_cursor: 1, timeout: 0.05 });
  assert.deepEqual(second.json, { completions: [], cursor: 1 });
  assert.ok(Date.now() - t0 < 2000);
  for (const [body, status, detail] of [
    [{ target: { ...target, type: "model" } }, 400, /^target\.type must be "sampling_session", got "model"$/],
    [{ target: { type: "sampling_session", sampling_session_id: "nope" } }, 404, /no sampling session nope/],
    [{ target, prev_cursor: 9 }, 400, /prev_cursor 9 is past this sampling session's last completion \(1\)/],
    [{ target, prev_cursor: -1 }, 400, /^prev_cursor must be an integer >= 0, got -1$/],
    [{ target, timeout: "soon" }, 400, /^timeout must be a number of seconds >= 0/],
  ] as const) {
    const r = await post(s.url, "retrieve_futures", body);
    assert.equal(r.status, status, JSON.stringify(body));
    assert.match(String(r.json.detail), detail);
  }
  // cancel_future: a finished sample is not cancelled; an unknown id is a 404; only samples are cancelled.
  assert.deepEqual((await post(s.url, "cancel_future", { request_id: ok.json.request_id })).json.cancelled, false);
  assert.equal((await post(s.url, "cancel_future", { request_id: "req-x" })).status, 404);
  const model = await post(s.url, "create_model", { session_id: session, base_model: "multihop", model_seq_id: 0 });
  const notSample = await post(s.url, "cancel_future", { request_id: model.json.request_id });
  assert.equal(notSample.status, 400);
  assert.match(String(notSample.json.detail), /is not a sample; only samples are cancelled/);
  // auth/token on a server that issues no JWTs.
  assert.equal((await post(s.url, "auth/token", {})).status, 404);
  // A session of a version outside the claimed ones is told so.
  assert.match(
    String((await post(s.url, "create_session", { sdk_version: "0.22.0" })).json.error_message),
    /SDK 0\.22\.0 is older: use 0\.24\.0 or later/,
  );
  assert.match(
    String((await post(s.url, "create_session", { sdk_version: "0.40.0" })).json.warning_message),
    /SDK 0\.40\.0 is newer and is answered as 0\.31\.0/,
  );
  assert.equal((await post(s.url, "create_session", { sdk_version: "0.31.0" })).json.warning_message, undefined);
});
