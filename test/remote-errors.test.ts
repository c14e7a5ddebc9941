/**
 * Faults around the Tinker protocol. Client side: an unreachable server, a wrong API key, an
 * unknown base model, a server of the other SDK generation, a future that fails, a sampler that
 * returns less than asked, weights the server cannot load: each one error naming the server and
 * the fix. Server side: malformed, out-of-order, duplicate and oversized requests get Tinker-shaped
 * answers and the server keeps serving. And a run whose server is killed mid-run stops with one
 * line, then resumes against the restarted server with no iteration lost or repeated.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer as createNetServer } from "node:net";
import { createServer, type Server } from "node:http";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { TinkerEngine, type TinkerEngineOptions } from "../src/engine/remote/tinker-engine.js";
import { encodeForwardBackwardProto } from "../src/engine/remote/tinker-codec.js";
import { runCli } from "../src/cli/main.js";
import { captureIO, cliEntry, tempDir } from "./helpers.js";
import { BASE, multihopRecipe } from "./fixtures/remote-recipes.js";

const root = tempDir("agent-r1-remote-err-");
const tiny = join(root, "tiny");
let srv: RunningTinkerServer;

before(async () => {
  await initModel({ preset: "tiny", out: tiny, seed: 3 });
  srv = await startTinkerServer({
    baseModels: new Map([["tiny", tiny]]),
    stateDir: join(root, "state"),
    port: 0,
    apiKey: "tml-right",
    bodyLimit: 1 << 20,
    seqWaitMs: 300,
    pollMs: 200,
    engineOptions: { workers: 0 },
    log: () => {},
  });
});

after(() => srv?.close());

const opts = (o: Partial<TinkerEngineOptions> = {}): TinkerEngineOptions => ({
  url: srv.url,
  apiKey: "tml-right",
  baseModel: "tiny",
  sdkVersion: "0.25.0",
  tokenizerDir: tiny,
  maxRetries: 1,
  ...o,
});

/** An error with a message and a hint matching these. */
const fails = (msg: RegExp, hint?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof Error, String(e));
  assert.match(e.message, msg);
  if (hint) assert.match(String((e as { hint?: string }).hint), hint);
  assert.doesNotMatch(e.message, /\n/, "one line");
  return true;
};

test("client: unreachable, wrong key, unknown base model, weights it cannot load: one line each, naming the server", async () => {
  const closed = await freePort();
  await assert.rejects(
    TinkerEngine.open(opts({ url: `http://127.0.0.1:${closed}` })),
    fails(
      new RegExp(`http://127\\.0\\.0\\.1:${closed}: client/config failed: .*ECONNREFUSED`),
      /is the server running/,
    ),
  );
  await assert.rejects(
    TinkerEngine.open(opts({ apiKey: "tml-wrong" })),
    fails(/was refused .*X-API-Key/, /TINKER_API_KEY/),
  );
  await assert.rejects(
    TinkerEngine.open(opts({ baseModel: "Qwen/Qwen3-4B" })),
    fails(
      /create_model of 'Qwen\/Qwen3-4B' failed: HTTP 404: base_model 'Qwen\/Qwen3-4B' is not served here; this server has: tiny/,
    ),
  );
  const e = await TinkerEngine.open(opts());
  try {
    const ckpt = join(root, "fake-ckpt");
    await e.save(ckpt);
    const state = JSON.parse(readFileSync(join(ckpt, "remote.json"), "utf8"));
    writeFileSync(join(ckpt, "remote.json"), JSON.stringify({ ...state, path: "tinker://model-x/weights/nope" }));
    await assert.rejects(
      e.load(ckpt),
      fails(/load_weights of tinker:\/\/model-x\/weights\/nope failed: HTTP 404: no checkpoint at/),
    );
  } finally {
    await e.dispose();
  }
});

test("client: a future that fails on the server, and refusals of what Tinker lacks, are errors the trainer reports", async () => {
  const e = await TinkerEngine.open(opts({ sdkVersion: "0.24.1" }));
  try {
    // A token id past the vocabulary passes the wire and fails inside the engine: the future fails.
    await assert.rejects(
      e
        .forwardBackward([{ tokens: [1, 2], targetTokens: [2, 3], weights: [1, 1] }], {
          type: "cross_entropy",
          aggregation: "sum",
        })
        .then(() => e.computeLogprobs([[1, 99_999]])),
      fails(/computeLogprobs: sequence 0|token|vocabulary/i),
    );
    await assert.rejects(e.sample([1], { topLogprobs: 2 }), fails(/cannot report top logprobs/));
    await assert.rejects(e.computeLogprobs([[1, 2]], { temperature: 0.5 }), fails(/temperature 1/));
  } finally {
    await e.dispose();
  }
});

/** A stand-in server that answers the handshake, then whatever `result` says for every future. */
async function fakeServer(result: (path: string) => { type: string; body: string | Uint8Array }): Promise<Server> {
  const s = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const path = req.url ?? "";
      const json = (o: unknown) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify(o));
      };
      if (path.endsWith("/client/config")) return json({});
      if (path.endsWith("/create_session")) return json({ session_id: "s" });
      if (path.endsWith("/create_model")) return json({ request_id: "r-model" });
      if (path.endsWith("/retrieve_future") && body.includes("r-model")) return json({ model_id: "m" });
      if (path.endsWith("/save_weights_for_sampler")) return json({ request_id: "r-sampler" });
      if (path.endsWith("/retrieve_future") && body.includes("r-sampler")) return json({ sampling_session_id: "x" });
      if (path.endsWith("/asample")) return json({ request_id: "r-sample" });
      const r = result(path);
      res.writeHead(200, { "Content-Type": r.type });
      res.end(r.body);
    });
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  return s;
}

test("client: a server of the other SDK generation, and a sampler that returns fewer tokens or logprobs than asked", async () => {
  const jsonSample = JSON.stringify({
    type: "sample",
    sequences: [{ tokens: [5, 6, 7], logprobs: [-1], stop_reason: "stop" }],
  });
  const s = await fakeServer(() => ({ type: "application/json", body: jsonSample }));
  const url = `http://127.0.0.1:${(s.address() as { port: number }).port}`;
  try {
    const proto = await TinkerEngine.open(opts({ url }));
    await assert.rejects(
      proto.sample([1, 2], { maxTokens: 3 }),
      fails(
        /asample \(request r-sample\) came back as JSON, but SDK 0\.25\.0 reads it only as protobuf/,
        /sdkVersion to 0\.24\.1/,
      ),
    );
    await proto.dispose();
    const jsonClient = await TinkerEngine.open(opts({ url, sdkVersion: "0.24.1" }));
    await assert.rejects(
      jsonClient.sample([1, 2], { maxTokens: 3 }),
      fails(/asample \(request r-sample\): sequences\[0\]\.logprobs holds 1 logprobs for 3 tokens/),
    );
    await assert.rejects(
      jsonClient.sample([1, 2], { maxTokens: 3, n: 2 }),
      fails(/asample \(request r-sample\): sequences holds 1 sequences; 2 were asked for/),
    );
    await jsonClient.dispose();
  } finally {
    s.close();
  }
});

async function post(path: string, body: string | Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(`${srv.url}/api/v1/${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-API-Key": "tml-right", ...headers },
    body: body as BodyInit,
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function result(requestId: unknown): Promise<Record<string, unknown>> {
  for (;;) {
    const r = await post("retrieve_future", JSON.stringify({ request_id: requestId }));
    if (r.json.type !== "try_again") return r.json;
  }
}

test("server: malformed, out-of-order, duplicate and oversized requests get Tinker-shaped answers, and it keeps serving", async () => {
  const session = (await post("create_session", JSON.stringify({ tags: [], sdk_version: "0.25.0" }))).json.session_id;
  const made = await post("create_model", JSON.stringify({ session_id: session, model_seq_id: 0, base_model: "tiny" }));
  const model = (await result(made.json.request_id)).model_id as string;
  assert.match(model, /^model-/);
  const step = (seq: number, lr = 1e-3) =>
    JSON.stringify({ model_id: model, seq_id: seq, adam_params: { learning_rate: lr }, type: "optim_step" });
  const cases: [string, () => Promise<{ status: number; json: Record<string, unknown> }>, number, RegExp][] = [
    ["bad JSON", () => post("optim_step", "{oops"), 422, /not valid JSON/],
    ["JSON that is not an object", () => post("optim_step", "[1]"), 422, /must be a JSON object/],
    [
      "text/plain",
      () => post("optim_step", step(1), { "Content-Type": "text/plain" }),
      415,
      /application\/json or application\/x-protobuf/,
    ],
    [
      "a protobuf body that does not decode",
      () => post("forward_backward", Uint8Array.of(0xff, 0xff, 0xff), { "Content-Type": "application/x-protobuf" }),
      422,
      /does not decode/,
    ],
    [
      "zstd that is not zstd",
      () =>
        post("forward_backward", Uint8Array.of(1, 2, 3), {
          "Content-Type": "application/x-protobuf",
          "Content-Encoding": "zstd",
        }),
      422,
      /does not decompress/,
    ],
    ["gzip", () => post("optim_step", step(1), { "Content-Encoding": "gzip" }), 415, /zstd is/],
    ["2 MiB body", () => post("optim_step", "x".repeat(2 << 20)), 413, /larger than 1048576 bytes/],
    [
      "unknown model",
      () => post("optim_step", JSON.stringify({ model_id: "model-zzz", seq_id: 1 })),
      404,
      /no model model-zzz/,
    ],
    ["unknown route", () => post("train_everything", "{}"), 404, /Not Found/],
    ["no API key", () => post("optim_step", step(1), { "X-API-Key": "" }), 401, /X-API-Key/],
    [
      "bad loss",
      () =>
        post(
          "forward_backward",
          JSON.stringify({ model_id: model, seq_id: 1, forward_backward_input: { data: [], loss_fn: "magic" } }),
        ),
      400,
      /loss_fn 'magic' is not one of/,
    ],
  ];
  for (const [label, send, status, detail] of cases) {
    const r = await send();
    assert.equal(r.status, status, `${label}: ${JSON.stringify(r.json)}`);
    assert.match(String(r.json.detail), detail, label);
  }
  // A protobuf request for a model that is not there is decoded, then refused.
  const pb = encodeForwardBackwardProto({ modelId: "model-zzz", seqId: 1, lossFn: "cross_entropy", data: [] });
  assert.equal((await post("forward_backward", pb, { "Content-Type": "application/x-protobuf" })).status, 404);

  // seq_id 2 before 1 waits for it; 1 then 2 run in order.
  const second = (await post("optim_step", step(2))).json.request_id;
  const first = (await post("optim_step", step(1))).json.request_id;
  assert.equal((await result(first)).type, "optim_step");
  assert.equal((await result(second)).type, "optim_step");
  // The same seq_id again: the same body is a retry (same request id); another body is a 409.
  assert.equal((await post("optim_step", step(2))).json.request_id, second);
  const clash = await post("optim_step", step(2, 5e-3));
  assert.equal(clash.status, 409);
  assert.match(String(clash.json.detail), /seq_id 2 was already used/);
  // seq_id 4 while 3 never comes: the future fails after the wait, with Tinker's error form.
  const orphan = (await post("optim_step", step(4))).json.request_id;
  const failed = await result(orphan);
  assert.match(String(failed.error), /seq_id 4 waited .* for seq_id 3, which never came/);
  assert.equal(failed.category, "user");
  const unknownFuture = await post("retrieve_future", JSON.stringify({ request_id: "req-nope" }));
  assert.equal(unknownFuture.status, 404);
  // Still serving.
  const health = await fetch(`${srv.url}/api/v1/healthz`, { headers: { "X-API-Key": "tml-right" } });
  assert.deepEqual(await health.json(), { status: "ok" });
});

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createNetServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function serveChild(port: number, stateDir: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      ...process.execArgv,
      cliEntry(),
      "serve",
      "--tinker",
      "--model",
      BASE,
      "--name",
      "multihop",
      "--port",
      String(port),
      "--state-dir",
      stateDir,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => String(d).includes("serving the Tinker protocol") && resolve(child));
    child.on("exit", (code) => reject(new Error(`serve --tinker exited ${code}`)));
  });
}

test("a run whose server is killed mid-run stops with one line, and resumes after a restart with no iteration lost or repeated", async () => {
  const port = await freePort();
  const state = join(root, "restart-state");
  const recipe = join(root, "restart.yaml");
  writeFileSync(recipe, multihopRecipe({ url: `http://127.0.0.1:${port}`, sdk: "0.25.0", retries: 1 }, 3));
  const out = join(root, "restart-run");
  let server = await serveChild(port, state);
  const run = spawn(process.execPath, [...process.execArgv, cliEntry(), "train", "--config", recipe, "--out", out], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, AGENT_R1_DEBUG: "" },
  });
  let stderr = "";
  run.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => run.on("exit", (c) => r(c)));
  // Kill the server once the first checkpoint is complete.
  const metrics = join(out, "metrics.jsonl");
  while (!existsSync(join(out, "checkpoints", "step-1", "manifest.json")) || !existsSync(metrics))
    await new Promise((r) => setTimeout(r, 50));
  server.kill("SIGKILL");
  const code = await exited;
  assert.equal(code, 1, stderr);
  const errors = stderr.split("\n").filter((l) => l.startsWith("error: "));
  assert.equal(errors.length, 1, stderr);
  assert.match(errors[0], new RegExp(`127\\.0\\.0\\.1:${port}`));
  server = await serveChild(port, state);
  try {
    const io = captureIO();
    assert.equal(await runCli(["train", "--config", recipe, "--resume", out], io), 0, io.stderr.join("\n"));
  } finally {
    server.kill("SIGTERM");
  }
  const lines = readFileSync(metrics, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { iteration: number; reward: number });
  assert.deepEqual(
    lines.map((l) => l.iteration),
    [1, 2, 3],
  );
  // The same run without the kill, in-process: the same rewards in every iteration.
  const local = join(root, "restart-local");
  const localRecipe = join(root, "restart-local.yaml");
  writeFileSync(localRecipe, multihopRecipe({ local: true }, 3));
  const io = captureIO();
  assert.equal(await runCli(["train", "--config", localRecipe, "--out", local], io), 0, io.stderr.join("\n"));
  const want = readFileSync(join(local, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { reward: number });
  assert.deepEqual(
    lines.map((l) => l.reward),
    want.map((l) => l.reward),
  );
});
