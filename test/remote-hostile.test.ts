/**
 * The HTTP clients against hostile servers on loopback: the Tinker client (tinker-http.ts,
 * tinker-engine.ts) and the `engine.sampler` clients (sampler-client.ts, vLLM and SGLang APIs).
 * Answers without end and gzip bombs stop at the answer limit; redirects are never followed, so the
 * key never reaches another server; a server answering try_again at once is polled a few times a
 * second, not thousands; sampled tokens and logprobs that cannot be are refused by name; and the
 * temporary weights directory an `engine.sampler` run makes is gone after the run, after an error,
 * and after SIGTERM. Work is counted (bytes sent, requests made), never timed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { TinkerHttp } from "../src/engine/remote/tinker-http.js";
import { pollFuture } from "../src/engine/remote/tinker-future.js";
import { pollPauseMs } from "../src/engine/remote/tinker-waits.js";
import { TinkerEngine } from "../src/engine/remote/tinker-engine.js";
import { rolloutSampler, type SamplerKind } from "../src/engine/remote/sampler-client.js";
import { encodeSampleResponseProto, forwardBackwardOutputToJson } from "../src/engine/remote/tinker-codec.js";
import { runCli } from "../src/cli/main.js";
import { captureIO, cliEntry } from "./helpers.js";

/** The committed base model (vocabulary 640, EOS 574), from test/ under tsx and from dist/test/. */
const BASE = ["../assets/base/multihop", "../../assets/base/multihop"]
  .map((p) => fileURLToPath(new URL(p, import.meta.url)))
  .find((p) => existsSync(p))!;
const VOCAB = 640;
const MiB = 1 << 20;

interface Fake {
  url: string;
  /** Requests seen, in order: path and headers. */
  seen: { path: string; headers: IncomingMessage["headers"]; body: string }[];
  close(): Promise<void>;
}

/** A loopback server calling `handle` with each request's path and body. */
async function fake(handle: (path: string, body: string, res: ServerResponse) => void): Promise<Fake> {
  const seen: Fake["seen"] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      seen.push({ path: req.url ?? "", headers: req.headers, body });
      handle(req.url ?? "", body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const json = (res: ServerResponse, o: unknown, status = 200) => {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(o));
};

/**
 * An answer without end: spaces (valid JSON whitespace) in 64 KiB writes, minding backpressure,
 * until the client hangs up. Resolves with the bytes handed to the socket. It stops at 64 MiB
 * so that a client without a limit fails the test instead of eating the machine.
 */
function flood(res: ServerResponse, headers: Record<string, string> = {}): Promise<number> {
  res.writeHead(200, { "Content-Type": "application/json", ...headers });
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  return new Promise((resolve) => {
    let sent = 0,
      over = false;
    res.on("close", () => {
      over = true;
      resolve(sent);
    });
    const pump = () => {
      while (!over && sent < 64 * MiB) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
      if (!over) res.end();
    };
    pump();
  });
}

/** 16 MiB of spaces, gzipped to about 16 KiB: a small answer that inflates far past a 1 MiB limit. */
let bombBytes: Buffer | undefined;
const bomb = () => (bombBytes ??= gzipSync(Buffer.alloc(16 * MiB, 0x20), { level: 9 }));

function gzipBomb(res: ServerResponse): void {
  const body = bomb();
  res.writeHead(200, {
    "Content-Type": "application/json",
    "Content-Encoding": "gzip",
    "Content-Length": String(body.length),
  });
  res.end(body);
}

/** An error with a one-line message matching `msg` (and a hint matching `hint`). */
const fails = (msg: RegExp, hint?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof Error, String(e));
  assert.match(e.message, msg);
  assert.doesNotMatch(e.message, /\n/, "one line");
  if (hint) assert.match(String((e as { hint?: string }).hint), hint);
  return true;
};

/** Both checks on one error. */
const both =
  (...checks: ((e: unknown) => boolean)[]) =>
  (e: unknown) =>
    checks.every((c) => c(e));

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// ---- 1. answers within limits ----

test("tinker client: an endless answer, a gzip bomb and an oversized Content-Length stop at the answer limit, naming the server, request and limit", async () => {
  let mode: "endless" | "bomb" | "declared" = "endless";
  let sent: Promise<number> | undefined;
  const s = await fake((path, _body, res) => {
    if (mode === "bomb") return gzipBomb(res);
    sent = flood(res, mode === "declared" ? { "Content-Length": String(2 * MiB) } : {});
  });
  const http = new TinkerHttp({ url: s.url, sdkVersion: "0.24.1", maxResponseBytes: MiB, maxRetries: 2 });
  try {
    const limit = /the 1 MiB limit on answers \(maxResponseBytes\)/;
    await assert.rejects(
      http.json("/api/v1/client/config", {}, "client/config"),
      fails(new RegExp(`^${esc(s.url)}: client/config: the answer ran past ${limit.source} and was cut off$`)),
    );
    const bytes = await sent!;
    assert.ok(bytes < 16 * MiB, `the server sent ${bytes} bytes before the client hung up`);
    // The same through a future: the request id is named.
    await assert.rejects(
      pollFuture(http, "r-7", "asample", { type: "Sample" }),
      fails(new RegExp(`${esc(s.url)}: asample \\(request r-7\\): the answer ran past ${limit.source}`)),
    );
    assert.ok((await sent!) < 16 * MiB);
    mode = "bomb";
    await assert.rejects(
      http.json("/api/v1/create_session", {}, "create_session"),
      fails(new RegExp(`create_session: the answer ran past ${limit.source}`)),
    );
    mode = "declared";
    await assert.rejects(
      http.json("/api/v1/create_session", {}, "create_session"),
      fails(/create_session: the answer declares 2 MiB, over the 1 MiB limit on answers/),
    );
    assert.equal(s.seen.length, 4, "each refused once, never sent again");
  } finally {
    await s.close();
  }
});

test("sampler clients (vLLM and SGLang): an endless answer and a gzip bomb stop at the answer limit, naming the server, request and limit", async () => {
  let bombing = false;
  let sent: Promise<number> | undefined;
  const s = await fake((_path, _body, res) => {
    if (bombing) return gzipBomb(res);
    sent = flood(res);
  });
  try {
    for (const [kind, what] of [
      ["vllm", "completions"],
      ["sglang", "generate"],
    ] as [SamplerKind, string][]) {
      const sampler = rolloutSampler({ kind, url: s.url, maxResponseBytes: MiB });
      bombing = false;
      await assert.rejects(
        sampler.sample([1, 2], { maxTokens: 4 }, [574], VOCAB),
        fails(
          new RegExp(
            `^${esc(s.url)}: ${what}: the answer ran past the 1 MiB limit on answers \\(maxResponseBytes\\) and was cut off$`,
          ),
        ),
      );
      const bytes = await sent!;
      assert.ok(bytes < 16 * MiB, `${kind}: the server sent ${bytes} bytes before the client hung up`);
      bombing = true;
      await assert.rejects(
        sampler.sample([1, 2], { maxTokens: 4 }, [574], VOCAB),
        fails(new RegExp(`${what}: the answer ran past the 1 MiB limit on answers`)),
      );
    }
  } finally {
    await s.close();
  }
});

// ---- 2. credentials never follow a redirect ----

test("redirects are never followed: the other server never sees the key, and the error names where it pointed", async () => {
  const other = await fake((_path, _body, res) => json(res, {}));
  let status = 307;
  const first = await fake((path, _body, res) => {
    res.writeHead(status, { Location: `${other.url}${path}` });
    res.end();
  });
  try {
    // The Tinker client: the handshake, and a future.
    await assert.rejects(
      TinkerEngine.open({
        url: first.url,
        apiKey: "tml-secret",
        baseModel: "b",
        sdkVersion: "0.25.0",
        tokenizerDir: BASE,
        maxRetries: 2,
      }),
      fails(
        new RegExp(
          `^${esc(first.url)}: client/config: the server answered a redirect \\(HTTP 307\\) to ${esc(other.url)}/api/v1/client/config; not followed`,
        ),
        /point engine\.tinker\.url .* at the final address/,
      ),
    );
    const http = new TinkerHttp({ url: first.url, apiKey: "tml-secret", sdkVersion: "0.25.0" });
    status = 302;
    await assert.rejects(
      pollFuture(http, "r-1", "optim_step", { type: "OptimStep" }),
      fails(/optim_step \(request r-1\): the server answered a redirect \(HTTP 302\)/),
    );
    // The sampler clients, sampling and loading weights.
    for (const kind of ["vllm", "sglang"] as const) {
      const sampler = rolloutSampler({ kind, url: first.url, apiKey: "sk-secret" });
      await assert.rejects(
        sampler.sample([1, 2], { maxTokens: 2 }, [574], VOCAB),
        fails(/the server answered a redirect \(HTTP 302\) to http:\/\/127\.0\.0\.1:\d+\//, /engine\.sampler\.url/),
      );
      await assert.rejects(sampler.loadAdapter("a", "/w/v1"), fails(/the server answered a redirect/));
    }
    await assert.rejects(
      rolloutSampler({ kind: "sglang", url: first.url }).reload("/w/v1", 1),
      fails(/the server answered a redirect/),
    );
    assert.equal(first.seen.length, 7, "each request sent once (a redirect is not retried)");
    assert.equal(first.seen[0].headers["x-api-key"], "tml-secret");
    assert.equal(other.seen.length, 0, "the other server was never reached");
  } finally {
    await Promise.all([first.close(), other.close()]);
  }
});

// ---- 3. try_again pacing ----

test("tinker client: try_again is polled with growing pauses: N empty polls cost N+1 requests, and a server answering try_again at once gets a handful a second", async () => {
  // The pause after the n-th empty poll in a row: 75-100 ms, growing by 1.5 to a cap of 1.5-2 s.
  const low = (n: number) => pollPauseMs(n, () => 0),
    high = (n: number) => pollPauseMs(n, () => 1);
  assert.equal(high(0), 100);
  assert.equal(low(0), 75);
  for (let n = 1; n < 20; n++) {
    assert.ok(low(n) >= low(n - 1) && high(n) >= high(n - 1), `pause ${n} does not shrink`);
    assert.ok(high(n) <= 2000, `pause ${n} is capped`);
  }
  assert.ok(low(3) > high(0) * 2, "the pause grows");
  assert.equal(high(19), 2000);

  let emptyPolls = 3;
  let kind: "try_again" | "408" = "try_again";
  const s = await fake((_path, _body, res) => {
    if (emptyPolls-- > 0)
      return kind === "408" ? json(res, { detail: "timeout" }, 408) : json(res, { type: "try_again" });
    json(res, { type: "optim_step", metrics: {} });
  });
  const http = new TinkerHttp({ url: s.url, sdkVersion: "0.24.1" });
  try {
    const done = await pollFuture(http, "r-1", "optim_step", { type: "OptimStep" });
    assert.deepEqual(done, { json: { type: "optim_step", metrics: {} } });
    assert.equal(s.seen.length, 4, "3 empty polls, then the result");
    // Never a result: within 1 s the pauses (at least 75, 112, 169, 253, 380 ms) allow 6 polls at
    // most, however fast the machine; without them it was thousands.
    for (const k of ["try_again", "408"] as const) {
      kind = k;
      emptyPolls = Infinity;
      const before = s.seen.length;
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(new Error("enough")), 1000);
      await assert.rejects(pollFuture(http, "r-2", "optim_step", { type: "OptimStep", signal: stop.signal }), /enough/);
      clearTimeout(timer);
      const polls = s.seen.length - before;
      assert.ok(polls >= 1 && polls <= 6, `${k}: ${polls} polls in 1 s`);
    }
  } finally {
    await s.close();
  }
});

// ---- 4. answers are checked ----

/**
 * A Tinker server that answers the handshake, then `answer()` for every asample and forward_backward
 * result: JSON, or protobuf bytes.
 */
async function fakeTinker(answer: () => unknown): Promise<Fake> {
  return fake((path, body, res) => {
    if (path.endsWith("/client/config")) return json(res, {});
    if (path.endsWith("/create_session")) return json(res, { session_id: "s" });
    if (path.endsWith("/create_model")) return json(res, { request_id: "r-model" });
    if (path.endsWith("/save_weights_for_sampler")) return json(res, { request_id: "r-sampler" });
    if (path.endsWith("/asample")) return json(res, { request_id: "r-sample" });
    if (path.endsWith("/forward_backward")) return json(res, { request_id: "r-fb" });
    if (body.includes("r-model")) return json(res, { model_id: "m" });
    if (body.includes("r-sampler")) return json(res, { sampling_session_id: "x" });
    const a = answer();
    if (a instanceof Uint8Array) {
      res.writeHead(200, { "Content-Type": "application/x-protobuf" });
      return res.end(a);
    }
    json(res, a);
  });
}

test("tinker client: sampled answers are checked: logprobs above 0 or not finite, token ids outside the vocabulary, more tokens than max_tokens, unknown stop reasons, the wrong number of sequences", async () => {
  let answer: unknown;
  const s = await fakeTinker(() => answer);
  const open = (sdkVersion: string) =>
    TinkerEngine.open({ url: s.url, baseModel: "b", sdkVersion, tokenizerDir: BASE, maxRetries: 0 });
  const seq = (tokens: unknown[], logprobs: unknown[], stop_reason: unknown = "stop") => ({
    tokens,
    logprobs,
    stop_reason,
  });
  const jsonEngine = await open("0.24.1");
  const protoEngine = await open("0.25.0");
  try {
    const where = new RegExp(`^${esc(s.url)}: asample \\(request r-sample\\): `);
    const cases: [string, unknown, RegExp][] = [
      [
        "a logprob above 0",
        { sequences: [seq([5, 6], [-1, 0.5])] },
        /sequences\[0\]\.logprobs\[1\] is 0\.5: above 0, a probability over 1$/,
      ],
      [
        "a token id past the vocabulary",
        { sequences: [seq([5, VOCAB], [-1, -1])] },
        /sequences\[0\]\.tokens\[1\] is 640, outside the vocabulary \[0, 640\)/,
      ],
      [
        "a negative token id",
        { sequences: [seq([-1], [-1])] },
        /sequences\[0\]\.tokens\[0\] is -1, outside the vocabulary/,
      ],
      [
        "a fractional token id",
        { sequences: [seq([5, 1.5], [-1, -1])] },
        /sequences\[0\]\.tokens\[1\] is 1\.5, not an integer token id/,
      ],
      [
        "more tokens than max_tokens",
        { sequences: [seq([5, 6, 7, 8], [-1, -1, -1, -1])] },
        /sequences\[0\]\.tokens holds 4 tokens, over max_tokens 3/,
      ],
      [
        "two sequences for one",
        { sequences: [seq([5], [-1]), seq([6], [-1])] },
        /sequences holds 2 sequences; 1 were asked for/,
      ],
      [
        "an unknown stop reason",
        { sequences: [seq([5], [-1], "eos")] },
        /sequences\[0\]\.stop_reason is "eos", not "stop" or "length"/,
      ],
      [
        "logprobs that are not numbers",
        { sequences: [seq([5], ["-1"])] },
        /sequences\[0\]\.logprobs\[0\] is "-1": not a number/,
      ],
    ];
    for (const [label, a, msg] of cases) {
      answer = a;
      await assert.rejects(jsonEngine.sample([1, 2], { maxTokens: 3 }), both(fails(msg), fails(where)), label);
    }
    // Float32 rounding a hair above 0 is fine.
    answer = { sequences: [seq([5, 6], [-1, 5e-5])] };
    assert.deepEqual((await jsonEngine.sample([1, 2], { maxTokens: 3 })).sequences[0].tokens, [5, 6]);

    // Protobuf carries what JSON cannot: NaN and infinities.
    const proto = (logprob: number) =>
      encodeSampleResponseProto({
        sequences: [{ tokens: [5, 6], logprobs: [-1, logprob], stopReason: "stop" }],
        promptLogprobs: null,
      });
    for (const [x, msg] of [
      [NaN, /logprobs\[1\] is NaN: not a number/],
      [Infinity, /logprobs\[1\] is Infinity: above 0/],
      [-Infinity, /logprobs\[1\] is -Infinity: a sampled token cannot have probability 0/],
    ] as [number, RegExp][]) {
      answer = proto(x);
      await assert.rejects(protoEngine.sample([1, 2], { maxTokens: 3 }), fails(msg), String(x));
    }

    // Scored (prompt) logprobs: above 0 or NaN refused; -Infinity (a token the model rules out) passes.
    const scored = (lp: number[]) =>
      encodeSampleResponseProto({
        sequences: [{ tokens: [1], logprobs: [-1], stopReason: "length" }],
        promptLogprobs: [NaN, ...lp],
      });
    answer = scored([0.25, -1]);
    await assert.rejects(
      protoEngine.computeLogprobs([[1, 2, 3]]),
      fails(/asample \(request r-sample\): prompt_logprobs\[1\] is 0\.25: above 0/),
    );
    answer = scored([-1, NaN]);
    await assert.rejects(protoEngine.computeLogprobs([[1, 2, 3]]), fails(/prompt_logprobs\[2\] is null: not a number/));
    answer = scored([-1, -Infinity]);
    assert.deepEqual(await protoEngine.computeLogprobs([[1, 2, 3]]), [[null, -1, -Infinity]]);

    // forward_backward outputs: a logprob above 0 is refused.
    answer = forwardBackwardOutputToJson({ outputs: [{ logprobs: [0.7] }], metrics: { "loss:sum": 1 } });
    await assert.rejects(
      jsonEngine.forwardBackward([{ tokens: [1], targetTokens: [2], weights: [1] }], { type: "cross_entropy" }),
      fails(
        /forward_backward \(seq_id \d+, 1 datums\) \(request r-fb\): loss_fn_outputs\[0\]\.logprobs\[0\] is 0\.7: above 0/,
      ),
    );
  } finally {
    await jsonEngine.dispose();
    await protoEngine.dispose();
    await s.close();
  }
});

test("sampler clients: answers are checked: logprobs above 0, token ids outside the vocabulary, more tokens than max_tokens, unknown finish reasons, the wrong number of sequences", async () => {
  type Out = { tokens: unknown[]; logprobs: unknown[]; reason: unknown };
  let outs: Out[] = [];
  const s = await fake((path, _body, res) => {
    if (path === "/v1/completions")
      return json(res, {
        choices: outs.map((o, index) => ({
          index,
          token_ids: o.tokens,
          logprobs: { token_logprobs: o.logprobs },
          finish_reason: o.reason,
        })),
      });
    const one = (o: Out) => ({
      output_ids: o.tokens,
      meta_info: {
        finish_reason: { type: o.reason },
        output_token_logprobs: o.logprobs.map((x, i) => [x, o.tokens[i], null]),
      },
    });
    json(res, outs.length === 1 ? one(outs[0]) : outs.map(one));
  });
  const out = (tokens: unknown[], logprobs: unknown[], reason: unknown = "stop"): Out => ({ tokens, logprobs, reason });
  try {
    const cases: [string, Out[], RegExp][] = [
      ["a logprob above 0", [out([5, 6], [-1, 0.5])], /sequences\[0\]\.logprobs\[1\] is 0\.5: above 0/],
      [
        "a logprob that is not a number",
        [out([5, 6], [-1, null])],
        /sequences\[0\]\.logprobs\[1\] is null: not a number/,
      ],
      [
        "a token id past the vocabulary",
        [out([5, 700], [-1, -1])],
        /sequences\[0\]\.tokens\[1\] is 700, outside the vocabulary \[0, 640\)/,
      ],
      ["more tokens than max_tokens", [out([5, 6, 7, 8], [-1, -1, -1, -1])], /holds 4 tokens, over max_tokens 3/],
      [
        "an aborted sequence",
        [out([5], [-1], "abort")],
        /sequence 0 with finish reason "abort", neither "stop" nor "length"/,
      ],
      ["two sequences for one", [out([5], [-1]), out([6], [-1])], /sequences holds 2 sequences; 1 were asked for/],
      ["fewer logprobs than tokens", [out([5, 6], [-1])], /sequences\[0\]\.logprobs holds 1 logprobs for 2 tokens/],
    ];
    for (const [kind, what] of [
      ["vllm", "completions"],
      ["sglang", "generate"],
    ] as [SamplerKind, string][]) {
      const sampler = rolloutSampler({ kind, url: s.url });
      for (const [label, o, msg] of cases) {
        outs = o;
        await assert.rejects(
          sampler.sample([1, 2], { maxTokens: 3 }, [574], VOCAB),
          both(fails(msg), fails(new RegExp(`^${esc(s.url)}: ${what}`))),
          `${kind}: ${label}`,
        );
      }
      outs = [out([5, 574], [-0.5, 5e-5])];
      const ok = await sampler.sample([1, 2], { maxTokens: 3 }, [574], VOCAB);
      assert.deepEqual(ok.sequences, [{ tokens: [5, 574], logprobs: [-0.5, 5e-5], stopReason: "stop" }], kind);
    }
  } finally {
    await s.close();
  }
});

// ---- 5. no leftovers ----

/** A SGLang-style sampler: loads any weights (or refuses them), answers `n` short sequences, or never answers. */
async function fakeSglang(mode: { refuse?: boolean; hang?: boolean }): Promise<Fake & { loaded: string[] }> {
  const loaded: string[] = [];
  const s = await fake((path, body, res) => {
    if (path === "/update_weights_from_disk") {
      loaded.push((JSON.parse(body) as { model_path: string }).model_path);
      return json(res, mode.refuse ? { success: false, message: "cannot read it" } : { success: true });
    }
    if (mode.hang) return; // never answers
    const n = (JSON.parse(body) as { sampling_params: { n: number } }).sampling_params.n;
    const one = {
      output_ids: [5, 574],
      meta_info: {
        finish_reason: { type: "stop" },
        output_token_logprobs: [
          [-2, 5, null],
          [-1, 574, null],
        ],
      },
    };
    json(res, n === 1 ? one : Array.from({ length: n }, () => one));
  });
  return Object.assign(s, { loaded });
}

function recipe(dir: string, samplerUrl: string, extra = ""): string {
  const file = join(dir, `recipe-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    file,
    `model: { path: ${JSON.stringify(BASE)} }
task: { name: multihop }
rollout: { n: 2, maxTurns: 1, maxTokensPerTurn: 8, maxTotalTokens: 1024, temperature: 1 }
algorithm: { estimator: grpo }
train: { iterations: 1, batchSize: 2, valEvery: 0, valSize: 2, checkpointEvery: 1 }
engine:
  workers: 0
  sampler: { kind: sglang, url: ${JSON.stringify(samplerUrl)}${extra} }
`,
  );
  return file;
}

const leftovers = (dir: string) => readdirSync(dir).filter((n) => n.startsWith("agent-r1-sampler-"));

/** Runs `fn` with TMPDIR (so os.tmpdir()) pointing at a fresh directory; returns that directory. */
async function withTmpdir(fn: (tmp: string) => Promise<void>): Promise<string> {
  const tmp = mkdtempSync(join(tmpdir(), "agent-r1-hostile-tmp-"));
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  try {
    await fn(tmp);
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
  return tmp;
}

test("engine.sampler: the temporary weights directory is gone after a run and after a failed run; a weightsDir of the user's is kept", async () => {
  const work = mkdtempSync(join(tmpdir(), "agent-r1-hostile-"));
  const good = await fakeSglang({});
  const bad = await fakeSglang({ refuse: true });
  try {
    await withTmpdir(async (tmp) => {
      const io = captureIO();
      const code = await runCli(["train", "--config", recipe(work, good.url), "--out", join(work, "run")], io);
      assert.equal(code, 0, io.stderr.join("\n"));
      // The server loaded weights from a temporary directory ...
      assert.ok(good.loaded.length >= 1, "the sampler was given weights");
      assert.ok(good.loaded[0].startsWith(join(tmp, "agent-r1-sampler-")), good.loaded[0]);
      // ... which is gone now.
      assert.equal(existsSync(good.loaded[0]), false);
      assert.deepEqual(leftovers(tmp), []);

      const failed = captureIO();
      const code2 = await runCli(["train", "--config", recipe(work, bad.url), "--out", join(work, "bad")], failed);
      assert.equal(code2, 1);
      assert.match(failed.stderr.join("\n"), /update_weights_from_disk .* failed: cannot read it/);
      assert.equal(bad.loaded.length, 1);
      assert.equal(existsSync(bad.loaded[0]), false, "the directory of a failed run is removed too");
      assert.deepEqual(leftovers(tmp), []);

      const mine = join(work, "my-weights");
      const kept = captureIO();
      const cfg = recipe(work, good.url, `, weightsDir: ${JSON.stringify(mine)}`);
      assert.equal(
        await runCli(["train", "--config", cfg, "--out", join(work, "kept")], kept),
        0,
        kept.stderr.join("\n"),
      );
      assert.ok(existsSync(mine) && readdirSync(mine).length > 0, "a user's weightsDir stays");
    }).then((tmp) => rmSync(tmp, { recursive: true, force: true }));
  } finally {
    await Promise.all([good.close(), bad.close()]);
    rmSync(work, { recursive: true, force: true });
  }
});

test("engine.sampler: a run killed with SIGTERM while it samples leaves no temporary weights directory, and dies by the signal", async () => {
  const work = mkdtempSync(join(tmpdir(), "agent-r1-hostile-"));
  const tmp = mkdtempSync(join(tmpdir(), "agent-r1-hostile-tmp-"));
  const server = await fakeSglang({ hang: true });
  try {
    const child = spawn(
      process.execPath,
      [...process.execArgv, cliEntry(), "train", "--config", recipe(work, server.url), "--out", join(work, "run")],
      { env: { ...process.env, TMPDIR: tmp, AGENT_R1_WORKERS: "0" }, stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    const exited = new Promise<NodeJS.Signals | number | null>((r) => child.on("exit", (code, sig) => r(sig ?? code)));
    // Wait (by counting requests, not time) until the run has loaded weights and is sampling.
    while (!server.seen.some((r) => r.path === "/generate")) {
      const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r("running"), 50))]);
      assert.equal(early, "running", `the run ended before sampling: ${stderr}`);
    }
    assert.equal(server.loaded.length, 1);
    assert.ok(server.loaded[0].startsWith(join(tmp, "agent-r1-sampler-")), server.loaded[0]);
    assert.ok(existsSync(server.loaded[0]), "the weights directory exists while the run samples");
    child.kill("SIGTERM");
    assert.equal(await exited, "SIGTERM", stderr);
    assert.deepEqual(leftovers(tmp), []);
  } finally {
    await server.close();
    for (const d of [work, tmp]) rmSync(d, { recursive: true, force: true });
  }
});

/** src/util/temp-dirs as a child imports it: .js under dist/, .ts under tsx. */
function tempDirsModule(): string {
  const js = fileURLToPath(new URL("../src/util/temp-dirs.js", import.meta.url));
  return existsSync(js) ? js : js.replace(/\.js$/, ".ts");
}

/** A child that makes a temporary directory (`dir`), runs `then`, prints "ready" and waits; its exit and output. */
async function tempDirChild(tmp: string, then: string) {
  const code = `import { existsSync } from "node:fs";
import { makeTempDir } from ${JSON.stringify(tempDirsModule())};
const dir = makeTempDir("agent-r1-sampler-");
${then}
console.log("ready");
setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, [...process.execArgv, "--input-type=module", "-e", code], {
    env: { ...process.env, TMPDIR: tmp },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "",
    err = "";
  child.stderr!.on("data", (d) => (err += d));
  const exited = new Promise<NodeJS.Signals | number | null>((r) => child.on("exit", (c, sig) => r(sig ?? c)));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      if (out.includes("ready")) resolve();
    });
    void exited.then((c) => reject(new Error(`the child ended (${c}) before it was ready: ${err}`)));
  });
  return { child, exited, out: () => out, err: () => err };
}

test("temporary directories go when the process ends by SIGINT or an uncaught error; a signal other code handles is left to it", async () => {
  const tmp = mkdtempSync(join(tmpdir(), "agent-r1-hostile-tmp-"));
  // SIGINT with no other listener: removed, and the process dies by the signal.
  const a = await tempDirChild(tmp, "");
  assert.equal(leftovers(tmp).length, 1, "the child made its directory");
  a.child.kill("SIGINT");
  assert.equal(await a.exited, "SIGINT", a.err());
  assert.deepEqual(leftovers(tmp), []);
  // SIGINT handled by the program (as serve does): its handler runs and decides; removed at exit.
  const b = await tempDirChild(
    tmp,
    `process.on("SIGINT", () => { console.log("closing; dir there:", existsSync(dir)); setTimeout(() => process.exit(0), 20); });`,
  );
  assert.equal(leftovers(tmp).length, 1);
  b.child.kill("SIGINT");
  assert.equal(await b.exited, 0, b.err());
  assert.match(b.out(), /closing; dir there: true/, "the directory stays while the program's own handler runs");
  assert.deepEqual(leftovers(tmp), []);
  // An uncaught error ends the process: removed at exit.
  const c = await tempDirChild(tmp, `setTimeout(() => { throw new Error("boom"); }, 20);`);
  assert.equal(await c.exited, 1);
  assert.match(c.err(), /boom/);
  assert.deepEqual(leftovers(tmp), []);
  rmSync(tmp, { recursive: true, force: true });
});
