/**
 * The two HTTP servers (`serve`, `dashboard`) against a hostile or careless client: requests
 * that ask for unbounded work, cross-site and DNS-rebinding requests (Host / Origin), bodies
 * that are not declared JSON, a missing or wrong API key, symlinks out of the run directory,
 * pathologically nested JSON lines, and malformed request targets. Real servers on port 0, a
 * real tiny model, raw node:http / node:net requests where the headers matter.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import OpenAI from "openai";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { startServer, type RunningServer, type ServeOptions } from "../src/serve/server.js";
import type { ServedEngine } from "../src/serve/context.js";
import { checkRunDir, startDashboard, type Dashboard } from "../src/dashboard/server.js";
import { MAX_JSON_DEPTH, parseJsonObject } from "../src/dashboard/json-line.js";
import { HostGuard } from "../src/util/host-guard.js";
import { cliEntry, tempDir } from "./helpers.js";

let modelDir: string;
let engine: LocalEngine;
/** Sample calls made through `counted` (to show a refused request sampled nothing). */
let sampleCalls = 0;
let counted: ServedEngine;
let server: RunningServer;
const logged: string[] = [];
let run: string;
let outside: string;
let dash: Dashboard;

const user = [{ role: "user" as const, content: "What is 2+3?" }];
const JSON_TYPE = { "Content-Type": "application/json" };

before(async () => {
  modelDir = join(tempDir("agent-r1-sec-"), "tiny");
  await initModel({ preset: "tiny", out: modelDir });
  engine = await LocalEngine.load(modelDir, { workers: 0 });
  counted = {
    tokenizer: engine.tokenizer,
    config: engine.config,
    computeLogprobs: (s, o) => engine.computeLogprobs(s, o),
    sample: (p, o) => {
      sampleCalls++;
      return engine.sample(p, o);
    },
  };
  server = await startServer({ engine: counted, name: "tiny", port: 0, log: (l) => logged.push(l) });

  // A run directory, and a directory outside it holding what must never be served.
  const root = tempDir("agent-r1-sec-dash-");
  run = join(root, "run");
  outside = join(root, "outside");
  mkdirSync(join(run, "samples"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(run, "metrics.jsonl"), '{"iteration":1,"reward":0.5}\n{"iteration":2,"reward":0.75}\n');
  writeFileSync(join(run, "config.yaml"), "train:\n  iterations: 2\n");
  writeFileSync(join(run, "samples", "iter-1.jsonl"), '{"id":"r0-s0","reward":1}\n');
  writeFileSync(join(outside, "secret.jsonl"), '{"secret":"do not serve"}\n');
  symlinkSync(join(outside, "secret.jsonl"), join(run, "samples", "iter-7.jsonl"));
  symlinkSync(join(run, "samples", "iter-1.jsonl"), join(run, "samples", "iter-3.jsonl")); // a link that stays inside is fine
  dash = await startDashboard({ runDir: run, port: 0 });
});

after(async () => {
  await dash?.close();
  await server?.close();
  await engine?.dispose();
});

type Reply = { status: number; headers: Record<string, string | string[] | undefined>; text: string; body: any };

/** A request with exactly these headers (node:http adds Host only when none is given). */
function send(
  url: string,
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path, method: opts.method ?? "GET", headers: opts.headers ?? {} },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode!, headers: res.headers, text, body });
        });
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

const postJson = (url: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  send(url, path, { method: "POST", headers: { ...JSON_TYPE, ...headers }, body: JSON.stringify(body) });

/** The status line and body of a raw request line sent over a socket (fetch would normalize the target). */
function rawGet(port: number, target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let out = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => (out += d));
    socket.on("error", reject);
    socket.on("end", () =>
      resolve({
        status: Number(/^HTTP\/1\.1 (\d+)/.exec(out)?.[1] ?? 0),
        body: out.slice(out.indexOf("\r\n\r\n") + 4),
      }),
    );
    socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

function assertOpenAiError(r: Reply, status: number, code: string, mentions: RegExp[] = []) {
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.body?.error?.message, "string", r.text);
  assert.equal(r.body.error.code, code, r.text);
  assert.ok("param" in r.body.error && "type" in r.body.error);
  for (const m of mentions) assert.match(r.body.error.message, m);
}

async function withServer<T>(opts: Partial<ServeOptions>, fn: (s: RunningServer) => Promise<T>): Promise<T> {
  const s = await startServer({ engine: counted, name: "tiny", port: 0, ...opts });
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

// 1. Unbounded work per request.

test("400 prompts × n 64 is refused with 400 naming the limit, before any sampling", async () => {
  const body = { prompt: Array.from({ length: 400 }, () => "a"), n: 64, max_tokens: 1 };
  assert.ok(JSON.stringify(body).length < 2000);
  const before = sampleCalls;
  const r = await postJson(server.url, "/v1/completions", body);
  assertOpenAiError(r, 400, "too_many_sequences", [
    /25600 sequences/,
    /400 prompts × n 64/,
    /at most 64/,
    /--max-sequences/,
  ]);
  assert.equal(sampleCalls, before, "nothing was sampled");
  // The same bound on chat: n past the limit of a server that allows 4.
  await withServer({ maxSequences: 4 }, async (s) => {
    assertOpenAiError(
      await postJson(s.url, "/v1/chat/completions", { messages: user, n: 5, max_tokens: 1 }),
      400,
      "too_many_sequences",
      [/at most 4/],
    );
    assert.equal((await postJson(s.url, "/v1/completions", { prompt: ["a", "b"], n: 2, max_tokens: 1 })).status, 200);
  });
});

test("the token budget counts prompts, sequences × max_tokens and echo scoring, on both endpoints", async () => {
  await withServer({ maxRequestTokens: 1000 }, async (s) => {
    const before = sampleCalls;
    const prompt = [5, 6, 7, 8];
    const over = await postJson(s.url, "/v1/completions", { prompt, n: 8, max_tokens: 200 });
    assertOpenAiError(over, 400, "too_many_tokens", [
      /1604 tokens/,
      /4 prompt \+ 1600 new/,
      /at most 1000/,
      /--max-request-tokens/,
    ]);
    assert.equal(over.body.error.param, "max_tokens");
    // Scoring an echoed prompt counts too: 600 prompt + 600 scored.
    const long = Array.from({ length: 600 }, (_, i) => 5 + (i % 50));
    assertOpenAiError(
      await postJson(s.url, "/v1/completions", { prompt: long, max_tokens: 0, echo: true, logprobs: 0 }),
      400,
      "too_many_tokens",
      [/600 echoed and scored/],
    );
    const chat = await postJson(s.url, "/v1/chat/completions", { messages: user, n: 8, max_tokens: 200 });
    assertOpenAiError(chat, 400, "too_many_tokens", [/--max-request-tokens/]);
    assert.equal(sampleCalls, before, "nothing was sampled");

    assert.equal((await postJson(s.url, "/v1/completions", { prompt, n: 8, max_tokens: 4 })).status, 200);
    // A chat request that leaves max_tokens to the server gets what fits the budget.
    const fit = await postJson(s.url, "/v1/chat/completions", { messages: user, n: 4, temperature: 1, seed: 1 });
    assert.equal(fit.status, 200, fit.text);
    const perChoice = Math.floor((1000 - fit.body.usage.prompt_tokens) / 4);
    assert.ok(fit.body.usage.completion_tokens <= 4 * perChoice, JSON.stringify(fit.body.usage));
  });
});

test("logprobs+echo response-size bound: 413 naming the limit, or an error event that ends a stream", async () => {
  await withServer({ maxResponseBytes: 8192 }, async (s) => {
    const body = {
      prompt: "Once upon a time there was a little model that",
      n: 8,
      max_tokens: 16,
      logprobs: 5,
      echo: true,
      temperature: 1,
      seed: 3,
    };
    const r = await postJson(s.url, "/v1/completions", body);
    assertOpenAiError(r, 413, "response_too_large", [/8192 bytes/, /--max-response-bytes/]);
    // Chat logprobs are bounded the same way.
    assertOpenAiError(
      await postJson(s.url, "/v1/chat/completions", {
        messages: user,
        n: 8,
        max_tokens: 16,
        logprobs: true,
        top_logprobs: 5,
        temperature: 1,
        seed: 3,
      }),
      413,
      "response_too_large",
    );
    // A stream that grows past the bound ends with the error as its last event (no [DONE]).
    const streamed = await postJson(s.url, "/v1/completions", { ...body, stream: true });
    assert.equal(streamed.status, 200);
    assert.ok(Buffer.byteLength(streamed.text) <= 8192 + 1024, `${Buffer.byteLength(streamed.text)} bytes streamed`);
    const events = streamed.text.split("\n\n").filter((e) => e !== "");
    assert.equal(JSON.parse(events.at(-1)!.replace(/^data: /, "")).error.code, "response_too_large");
    // A small answer is unaffected.
    assert.equal(
      (await postJson(s.url, "/v1/completions", { prompt: "Hi", max_tokens: 2, logprobs: 1, echo: true })).status,
      200,
    );
  });
});

test("a stream cut at the response-size bound also stops its sampling", async () => {
  await withServer({ maxResponseBytes: 4096 }, async (s) => {
    const steps = async () => (await engine.stats()).scheduler.decodeSteps;
    // Uncut, this samples 8 × 1500 tokens (~1500 decode steps, seconds); the bound is passed within a few dozen.
    const streamed = await postJson(s.url, "/v1/completions", {
      prompt: "Once upon a time",
      n: 8,
      max_tokens: 1500,
      temperature: 1,
      seed: 5,
      stream: true,
    });
    const events = streamed.text.split("\n\n").filter((e) => e !== "");
    assert.equal(JSON.parse(events.at(-1)!.replace(/^data: /, "")).error.code, "response_too_large");
    await new Promise((r) => setTimeout(r, 50));
    const atCut = await steps();
    await new Promise((r) => setTimeout(r, 500));
    const after = (await steps()) - atCut;
    assert.ok(after <= 2, `${after} decode steps in the 500 ms after the cut`);
  });
});

// 2. Content-Type, Host, Origin, API key.

test("text/plain POST → 415 (and no Content-Type → 415; JSON with a charset is fine)", async () => {
  const body = JSON.stringify({ prompt: "Hi", max_tokens: 1 });
  const before = sampleCalls;
  assertOpenAiError(
    await send(server.url, "/v1/completions", { method: "POST", headers: { "Content-Type": "text/plain" }, body }),
    415,
    "unsupported_media_type",
    [/application\/json/],
  );
  assertOpenAiError(
    await send(server.url, "/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body,
    }),
    415,
    "unsupported_media_type",
  );
  assertOpenAiError(await send(server.url, "/v1/completions", { method: "POST", body }), 415, "unsupported_media_type");
  assert.equal(sampleCalls, before);
  assert.equal(
    (
      await send(server.url, "/v1/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json; charset=UTF-8" },
        body,
      })
    ).status,
    200,
  );
});

test("Host evil.example → 403 (serve and dashboard); the loopback names and allow-listed hosts pass", async () => {
  const port = server.port;
  const evil = await send(server.url, "/v1/models", { headers: { Host: `evil.example:${port}` } });
  assertOpenAiError(evil, 403, "forbidden", [/evil\.example/, /--allow-host/]);
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "LOCALHOST."]) {
    assert.equal((await send(server.url, "/v1/models", { headers: { Host: host } })).status, 200, host);
  }
  const info = await send(dash.url, "/api/info", { headers: { Host: `evil.example:${dash.port}` } });
  assert.equal(info.status, 403);
  assert.ok(!info.text.includes(run), "the run path is not revealed");
  assert.equal((await send(dash.url, "/api/info", { headers: { Host: `localhost:${dash.port}` } })).status, 200);

  await withServer({ allowHosts: ["models.lan"] }, async (s) => {
    assert.equal((await send(s.url, "/v1/models", { headers: { Host: `models.lan:${s.port}` } })).status, 200);
    assert.equal((await send(s.url, "/v1/models", { headers: { Host: `evil.example:${s.port}` } })).status, 403);
  });
  const open = await startDashboard({ runDir: run, port: 0, allowHosts: ["*"] });
  try {
    assert.equal((await send(open.url, "/api/info", { headers: { Host: "anything.example" } })).status, 200);
  } finally {
    await open.close();
  }
});

test("Host rules: loopback names on loopback, IP literals and this machine's name on 0.0.0.0, names only when allowed", () => {
  const ok = (g: HostGuard, host: string) => g.check({ host }).ok;
  const loop = new HostGuard({ bound: "127.0.0.1" });
  assert.deepEqual(
    ["localhost:1", "127.0.0.1:1", "[::1]:1", "10.0.0.5:1", "rebind.evil.example", "a b", "x/y"].map((h) =>
      ok(loop, h),
    ),
    [true, true, true, false, false, false, false],
  );
  assert.equal(loop.check({}).ok, false);
  const all = new HostGuard({ bound: "0.0.0.0" });
  assert.deepEqual(
    ["10.0.0.5:8000", "[fe80::1]:8000", "localhost", "rebind.evil.example:8000"].map((h) => ok(all, h)),
    [true, true, true, false],
  );
  assert.equal(ok(new HostGuard({ bound: "::", allowHosts: ["gpu-box.lan"] }), "GPU-BOX.lan:8000"), true);
  assert.equal(ok(new HostGuard({ bound: "0.0.0.0", allowHosts: ["*"] }), "rebind.evil.example"), true);
  const lan = new HostGuard({ bound: "192.168.1.5" });
  assert.deepEqual(
    ["192.168.1.5:8000", "localhost:8000"].map((h) => ok(lan, h)),
    [true, false],
  );
  assert.throws(
    () => new HostGuard({ bound: "127.0.0.1", allowHosts: ["http://x"] }),
    /--allow-host 'http:\/\/x' is not a host name/,
  );
  assert.throws(
    () => new HostGuard({ bound: "127.0.0.1", allowOrigins: ["app.example"] }),
    /--allow-origin 'app.example' is not an origin/,
  );
});

test("Origin https://evil.example → 403 (serve and dashboard); same origin and allow-listed origins pass, with CORS", async () => {
  const before = sampleCalls;
  const cross = await postJson(
    server.url,
    "/v1/completions",
    { prompt: "Hi", max_tokens: 1 },
    { Origin: "https://evil.example" },
  );
  assertOpenAiError(cross, 403, "forbidden", [/https:\/\/evil\.example/, /--allow-origin/]);
  assert.equal(sampleCalls, before);
  assert.equal((await send(server.url, "/v1/models", { headers: { Origin: "null" } })).status, 403);
  assert.equal((await send(dash.url, "/api/info", { headers: { Origin: "https://evil.example" } })).status, 403);
  // The dashboard's own page, and a page served by serve's own address, are same-origin.
  assert.equal((await send(dash.url, "/api/metrics", { headers: { Origin: dash.url } })).status, 200);
  assert.equal(
    (await postJson(server.url, "/v1/completions", { prompt: "Hi", max_tokens: 1 }, { Origin: server.url })).status,
    200,
  );

  await withServer({ allowOrigins: ["https://app.example"] }, async (s) => {
    const pre = await send(s.url, "/v1/chat/completions", {
      method: "OPTIONS",
      headers: {
        Origin: "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
      },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers["access-control-allow-origin"], "https://app.example");
    assert.match(String(pre.headers["access-control-allow-methods"]), /POST/);
    const r = await postJson(
      s.url,
      "/v1/completions",
      { prompt: "Hi", max_tokens: 1 },
      { Origin: "https://app.example" },
    );
    assert.equal(r.status, 200);
    assert.equal(r.headers["access-control-allow-origin"], "https://app.example");
    assert.equal(
      (await postJson(s.url, "/v1/completions", { prompt: "Hi", max_tokens: 1 }, { Origin: "https://other.example" }))
        .status,
      403,
    );
  });
});

test("API key: missing/wrong → 401, right → 200, openai client with the key works, /health stays open", async () => {
  await withServer({ apiKey: "sk-test-123" }, async (s) => {
    const missing = await send(s.url, "/v1/models");
    assertOpenAiError(missing, 401, "invalid_api_key", [/Authorization: Bearer/]);
    assert.equal(missing.headers["www-authenticate"], "Bearer");
    assertOpenAiError(
      await postJson(s.url, "/v1/completions", { prompt: "Hi", max_tokens: 1 }, { Authorization: "Bearer sk-wrong" }),
      401,
      "invalid_api_key",
    );
    assertOpenAiError(
      await send(s.url, "/v1/models/tiny", { headers: { Authorization: "sk-test-123" } }),
      401,
      "invalid_api_key",
    );
    assert.equal((await send(s.url, "/v1/models", { headers: { Authorization: "Bearer sk-test-123" } })).status, 200);
    assert.equal((await send(s.url, "/health")).status, 200);

    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "sk-test-123", maxRetries: 0 });
    const res = await client.chat.completions.create({ model: "tiny", messages: user, max_tokens: 2 });
    assert.equal(res.choices.length, 1);
    const wrong = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e: unknown) => e instanceof OpenAI.AuthenticationError);
  });
  // Without a server key the client's placeholder key is ignored, as before.
  const anyKey = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  assert.deepEqual(
    (await anyKey.models.list()).data.map((m) => m.id),
    ["tiny"],
  );
  await assert.rejects(startServer({ engine: counted, port: 0, apiKey: "" }), /API key must be non-empty/);
});

test("serve command: the API key comes from AGENT_R1_API_KEY", async () => {
  const child = spawn(
    process.execPath,
    [...process.execArgv, cliEntry(), "serve", "--model", modelDir, "--port", "0"],
    {
      env: { ...process.env, AGENT_R1_WORKERS: "0", AGENT_R1_API_KEY: "sk-from-env" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise<number | null>((ok) => child.on("exit", (code) => ok(code)));
  try {
    const url = await new Promise<string>((ok, fail) => {
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
        const m = /on (http:\/\/\S+)\n/.exec(out);
        if (m) ok(m[1]);
      });
      void exited.then((code) => fail(new Error(`serve exited ${code}: ${err}`)));
    });
    assert.equal((await send(url, "/v1/models")).status, 401);
    assert.equal((await send(url, "/v1/models", { headers: { Authorization: "Bearer sk-from-env" } })).status, 200);
  } finally {
    child.kill("SIGTERM");
  }
  assert.equal(await exited, 0, err);
});

// 3. Symlinks out of the run directory.

test("dashboard key: every route needs it (header, or ?key= once, then its cookie); wrong or empty keys are refused", async () => {
  await assert.rejects(
    startDashboard({ runDir: run, port: 0, apiKey: " " }),
    /dashboard: the API key must be non-empty and without spaces/,
  );
  const d = await startDashboard({ runDir: run, port: 0, apiKey: "s3cret" });
  try {
    for (const path of ["/", "/app.js", "/api/info", "/api/metrics", "/api/samples", "/api/samples/1"]) {
      const r = await send(d.url, path);
      assert.equal(r.status, 401, `${path} without the key`);
      assert.ok(!r.text.includes("iterations: 2") && !r.text.includes("r0-s0"), `${path} leaked data`);
      assert.equal((await send(d.url, path, { headers: { Authorization: "Bearer wrong" } })).status, 401);
      assert.equal((await send(d.url, path, { headers: { Cookie: "agent_r1_dashboard_key=" } })).status, 401);
      assert.equal((await send(d.url, path, { headers: { Authorization: "Bearer s3cret" } })).status, 200, path);
    }
    assert.equal((await send(d.url, "/?key=wrong")).status, 401);
    const first = await send(d.url, "/?key=s3cret");
    assert.equal(first.status, 303);
    assert.equal(first.headers.location, "/");
    const cookie = String(first.headers["set-cookie"]).split(";")[0];
    assert.match(String(first.headers["set-cookie"]), /HttpOnly; SameSite=Strict/);
    const info = await send(d.url, "/api/info", { headers: { Cookie: `theme=dark; ${cookie}` } });
    assert.equal(info.status, 200);
    assert.match(info.body.config, /iterations: 2/);
  } finally {
    await d.close();
  }
});

test("symlinked samples file outside the run → not served (not listed, 404); links inside the run still are", async () => {
  const list = await send(dash.url, "/api/samples");
  assert.deepEqual(list.body.iterations, [3, 1]);
  const secret = await send(dash.url, "/api/samples/7");
  assert.equal(secret.status, 404);
  assert.ok(!secret.text.includes("do not serve"));
  assert.equal((await send(dash.url, "/api/samples/3")).body.trajectories[0].id, "r0-s0");

  // config.yaml and metrics.jsonl that lead out of the run are absent too.
  const other = join(tempDir("agent-r1-sec-run-"), "run");
  mkdirSync(other);
  writeFileSync(join(outside, "config.yaml"), "secret: yes\n");
  symlinkSync(join(outside, "config.yaml"), join(other, "config.yaml"));
  writeFileSync(join(other, "metrics.jsonl"), '{"iteration":1}\n');
  const d = await startDashboard({ runDir: other, port: 0 });
  try {
    assert.equal((await send(d.url, "/api/info")).body.config, null);
  } finally {
    await d.close();
  }
  const linked = join(tempDir("agent-r1-sec-run-"), "run");
  mkdirSync(linked);
  symlinkSync(join(run, "metrics.jsonl"), join(linked, "metrics.jsonl"));
  assert.throws(() => checkRunDir(linked), /not a regular file inside the run directory/);
});

// 4. Pathologically nested JSON lines.

test("100k-deep JSON line → skipped, /api/metrics still 200 (and samples too)", async () => {
  const dir = join(tempDir("agent-r1-sec-deep-"), "run");
  mkdirSync(join(dir, "samples"), { recursive: true });
  const deepArray = "[".repeat(100_000) + "]".repeat(100_000);
  const deepObject = '{"a":'.repeat(50_000) + "1" + "}".repeat(50_000);
  writeFileSync(
    join(dir, "metrics.jsonl"),
    `{"iteration":1,"reward":0.5}\n{"iteration":2,"x":${deepArray}}\n${deepObject}\n{"iteration":3,"reward":1}\n`,
  );
  writeFileSync(join(dir, "samples", "iter-1.jsonl"), `{"id":"ok"}\n{"id":"deep","steps":${deepArray}}\n`);
  const d = await startDashboard({ runDir: dir, port: 0 });
  try {
    for (let i = 0; i < 2; i++) {
      const m = await send(d.url, "/api/metrics");
      assert.equal(m.status, 200, m.text.slice(0, 200));
      assert.deepEqual(
        m.body.records.map((r: { iteration: number }) => r.iteration),
        [1, 3],
      );
      assert.equal(m.body.skipped, 2);
    }
    const s = await send(d.url, "/api/samples/1");
    assert.equal(s.status, 200);
    assert.equal(s.body.trajectories.length, 1);
    assert.equal(s.body.skipped, 1);
  } finally {
    await d.close();
  }
});

test("JSON lines nest at most MAX_JSON_DEPTH deep; brackets inside strings do not count", () => {
  const nested = (depth: number) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
  assert.ok(parseJsonObject(nested(MAX_JSON_DEPTH)));
  assert.equal(parseJsonObject(nested(MAX_JSON_DEPTH + 1)), undefined);
  assert.deepEqual(parseJsonObject(JSON.stringify({ text: "[".repeat(500) + '\\"{' })), {
    text: "[".repeat(500) + '\\"{',
  });
  assert.equal(parseJsonObject("[1]"), undefined);
  assert.equal(parseJsonObject("{oops"), undefined);
});

// 5. Malformed request targets.

test("malformed URL → 400 on both servers, nothing logged as an internal error", async () => {
  logged.length = 0;
  for (const target of ["/v1/models/%E0%A4%A", "/v1/models/%", "http://[", "http://a:b@/", "*"]) {
    const r = await rawGet(server.port, target);
    assert.equal(r.status, 400, `${target}: ${r.body}`);
    const body = JSON.parse(r.body);
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.code, "invalid_url");
    assert.ok(!r.body.includes("    at "), "no stack trace");
  }
  assert.deepEqual(logged, []);
  for (const target of ["http://[", "http://a:b@/", "*"]) {
    const r = await rawGet(dash.port, target);
    assert.equal(r.status, 400, `${target}: ${r.body}`);
    assert.match(r.body, /"error":"malformed request target/); // chunked: the JSON sits between chunk sizes
  }
  // `//` is a well-formed path (empty segments): not found, not a 500.
  assert.equal((await rawGet(server.port, "//")).status, 404);
  assert.equal((await rawGet(dash.port, "//x")).status, 404);
  // A model id with valid percent-encoding is still looked up.
  assert.equal((await rawGet(server.port, "/v1/models/t%69ny")).status, 200);
});
