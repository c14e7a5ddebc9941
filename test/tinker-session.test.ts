/**
 * The Tinker client's session against loopback servers: the auth flows (an API key exchanged for a
 * JWT at auth/token when the client config says pjwt_auth_enabled, renewed before it expires,
 * against `serve --tinker`'s test issuer; a credential command, run again when the server refuses
 * what it printed, failing with one line that names the command and never its output), the
 * `create_session` messages (logged; an error fails the run with one line naming the server, also
 * through `agent-r1 train`), a server that speaks other SDK versions, the session poller's faults,
 * and samples past their deadline cancelled once each (scripted server,
 * test/fixtures/scripted-tinker.ts, on a virtual clock).
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTinkerServer } from "../src/serve/tinker/server.js";
import { TinkerEngine } from "../src/engine/remote/tinker-engine.js";
import { TinkerAnswerError } from "../src/engine/remote/tinker-error.js";
import type { Clock } from "../src/engine/remote/tinker-waits.js";
import { runCli } from "../src/cli/main.js";
import { captureIO, tempDir } from "./helpers.js";
import { BASE } from "./fixtures/remote-recipes.js";
import { recordingProxy } from "./fixtures/recording-proxy.js";
import { scriptedTinker, type Script } from "./fixtures/scripted-tinker.js";
import { shiftedClock } from "./fixtures/shifted-clock.js";

const root = tempDir("agent-r1-session-");
after(() => rmSync(root, { recursive: true, force: true }));

const KEY = "tml-test-key";

const open = (url: string, extra: Partial<Parameters<typeof TinkerEngine.open>[0]> = {}) =>
  TinkerEngine.open({ url, baseModel: "multihop", sdkVersion: "0.31.0", tokenizerDir: BASE, ...extra });

const message = (re: RegExp) => (e: unknown) => {
  assert.match((e as Error).message, re);
  return true;
};

test("JWT exchange: the key goes only to auth/token, the JWT everywhere else, renewed a minute before it expires; the server refuses the bare key", async () => {
  const vc = shiftedClock(); // the client's and the issuer's
  const s = await startTinkerServer({
    baseModels: new Map([["multihop", BASE]]),
    stateDir: join(root, "state-jwt"),
    port: 0,
    apiKey: KEY,
    jwt: { ttlS: 120, now: () => vc.clock.now() },
    log: () => {},
  });
  const proxy = await recordingProxy(s.url);
  try {
    const engine = await open(proxy.url, { apiKey: KEY, clock: vc.clock });
    try {
      assert.equal((await engine.sample([1, 2, 3], { maxTokens: 3 })).sequences.length, 1);
      const exchanges = proxy.on("auth/token");
      assert.equal(exchanges.length, 1);
      assert.equal(exchanges[0].headers["x-api-key"], KEY);
      for (const x of proxy.log.filter((y) => !/\/(auth\/token|client\/config)$/.test(y.path))) {
        assert.match(String(x.headers["x-api-key"]), /^eyJ/, `${x.path} carries the JWT`);
        assert.equal(x.status, 200, x.path);
      }
      // 61 s later the 120 s token has less than a minute left: exchanged again before the next request.
      vc.advance(61_000);
      await engine.sample([1, 2, 3], { maxTokens: 3 });
      assert.equal(proxy.on("auth/token").length, 2);
    } finally {
      await engine.dispose();
    }
    // The bare key on a route that takes a JWT; and a key the exchange refuses.
    const bare = await fetch(`${s.url}/api/v1/create_session`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-API-Key": KEY },
      body: "{}",
    });
    assert.equal(bare.status, 401);
    assert.match(
      ((await bare.json()) as { detail: string }).detail,
      /takes the API key only at \/api\/v1\/auth\/token/,
    );
    await assert.rejects(
      open(s.url, { apiKey: "tml-wrong" }),
      message(/client\/config was refused \(HTTP 401: this server requires its API key as X-API-Key\)$/),
    );
    // A credential command whose output is exchanged the same way.
    const viaCommand = await open(s.url, { credentialCommand: `printf '%s\\n' ${KEY}`, samplerOnly: true });
    await viaCommand.sample([1, 2, 3], { maxTokens: 2 });
    await viaCommand.dispose();
  } finally {
    await proxy.close();
    await s.close();
  }
});

test("a credential command runs when first needed and again when its credential is refused (401), not per request; its failure names the command, never its output", async () => {
  const s = await startTinkerServer({
    baseModels: new Map([["multihop", BASE]]),
    stateDir: join(root, "state-cmd"),
    port: 0,
    apiKey: "tml-second",
    log: () => {},
  });
  const proxy = await recordingProxy(s.url);
  const flag = join(root, "rotated"),
    runs = join(root, "runs");
  // The first run prints a credential that has since been replaced; the next ones the current one.
  const command = `echo run >> ${runs}; if [ -f ${flag} ]; then echo tml-second; else touch ${flag}; echo tml-first; fi`;
  try {
    const engine = await open(proxy.url, { credentialCommand: command, samplerOnly: true });
    await engine.sample([1, 2, 3], { maxTokens: 3 });
    await engine.sample([4, 5], { maxTokens: 3 });
    await engine.dispose();
    const config = proxy.on("client/config");
    assert.deepEqual(
      config.map((x) => [x.status, x.headers["x-api-key"]]),
      [
        [401, "tml-first"],
        [200, "tml-second"],
      ],
      "refused once, then sent again with the command's new credential",
    );
    assert.ok(proxy.log.slice(2).every((x) => x.headers["x-api-key"] === "tml-second" && x.status === 200));
    assert.equal(readFileSync(runs, "utf8").trim().split("\n").length, 2, "two runs for a dozen requests");
    await assert.rejects(
      open(s.url, { credentialCommand: "echo tml-secret-output; exit 3" }),
      (e: unknown) =>
        (e as Error).message === "the credential command 'echo tml-secret-output; exit 3' failed (exit status 3)" &&
        !JSON.stringify(e).includes("tml-secret-output"),
    );
    await assert.rejects(
      open(s.url, { credentialCommand: "true" }),
      message(/^the credential command 'true' printed nothing$/),
    );
  } finally {
    await proxy.close();
    await s.close();
  }
});

test("create_session messages: info and warning are logged, an error fails the run with one line naming the server (engine and agent-r1 train)", async (t) => {
  const messages: Script = {
    session: { json: { session_id: "s-1", info_message: "welcome", warning_message: "SDK 0.31 is deprecated soon" } },
  };
  const s = await scriptedTinker(messages);
  t.after(() => s.close());
  const logs: string[] = [];
  const engine = await open(s.url, { log: (l) => logs.push(l) });
  await engine.dispose();
  assert.deepEqual(logs, [
    `tinker: ${s.url} says: welcome`,
    `tinker: warning from ${s.url}: SDK 0.31 is deprecated soon`,
  ]);
  s.script.session = { json: { session_id: "s-2", error_message: "SDK 0.31.0 is no longer served;\nupgrade" } };
  await assert.rejects(
    open(s.url),
    (e: unknown) =>
      (e as Error).message ===
      `${s.url}: create_session: the server refuses this client: SDK 0.31.0 is no longer served; upgrade`,
  );
  const recipe = join(root, "refused.yaml");
  writeFileSync(
    recipe,
    `model: { tokenizer: ${JSON.stringify(BASE)} }
engine: { kind: tinker, tinker: { url: ${JSON.stringify(s.url)}, baseModel: multihop, sdkVersion: "0.31.0" } }
task: { name: multihop }
train: { iterations: 1, batchSize: 2 }
`,
  );
  const io = captureIO();
  const code = await runCli(["train", "--config", recipe, "--out", join(root, "refused")], io);
  assert.notEqual(code, 0);
  const err = io.stderr.join("\n");
  assert.match(
    err,
    new RegExp(
      `${s.url.replace(/[.:/]/g, "\\$&")}: create_session: the server refuses this client: SDK 0\\.31\\.0 is no longer served; upgrade`,
    ),
  );
});

test("a server that speaks other SDK versions fails the client at once; the session poller's faults fail the sample naming the field", async (t) => {
  const s = await scriptedTinker({
    config: { json: { supported_sdk_versions: { oldest: "0.24.0", newest: "0.25.0" } } },
  });
  t.after(() => s.close());
  await assert.rejects(open(s.url), message(/this server speaks Tinker SDK 0\.24\.0 to 0\.25\.0, not 0\.31\.0/));
  // Completions polled per session, answered malformed, or not at all (a server that claims the flag without the route).
  s.script.config = { json: { sample_use_retrieve_futures: true } };
  s.script.retrieve_futures = { json: { completions: [{ state: "done", request_id: "r-asample-1" }], cursor: 1 } };
  const engine = await open(s.url);
  t.after(() => engine.dispose());
  await assert.rejects(
    engine.sample([1, 2], { maxTokens: 3 }),
    (e: unknown) =>
      e instanceof TinkerAnswerError &&
      /^http:\/\/127\.0\.0\.1:\d+: retrieve_futures \(sampling session sampler-\d+\): completions\[0\]\.state is "done", not "finished" or "failed"$/.test(
        e.message,
      ),
  );
  s.script.retrieve_futures = { status: 404, detail: "Not Found" };
  await assert.rejects(
    engine.sample([1, 2], { maxTokens: 3 }),
    message(/retrieve_futures \(sampling session .*\): the server has no such endpoint/),
  );
  // Well-formed: the default scripted answers (every acknowledged sample finished), ids from the acknowledgement.
  delete s.script.retrieve_futures;
  const r = await engine.sample([1, 2], { n: 2, maxTokens: 3 });
  const [a, b] = r.sequences.map((q) => q.sequenceId!);
  assert.match(a, /^r-asample-\d+-s0$/);
  assert.equal(b, a.replace(/s0$/, "s1"));
  assert.equal(
    s.requests("retrieve_future").filter((x) => String(x.body?.request_id).startsWith("r-asample")).length,
    1,
    "one result fetch, for the one sample that completed",
  );
});

test("samples past their call's deadline are cancelled (cancel_future), each once, when the dynamic config enables it", async (t) => {
  let now = 1_000_000;
  const clock: Clock = {
    now: () => now,
    random: () => 1,
    async sleep(ms, _reason, signal) {
      if (signal?.aborted) throw signal.reason;
      now += ms;
      await new Promise((r) => setImmediate(r));
    },
  };
  const s = await scriptedTinker({
    dynamic_config: { json: { sample_cancel_enabled: true, sample_cancel_max_batch_size: 2 } },
    "asample-result": { json: { type: "try_again", queue_state: "active" } },
  });
  t.after(() => s.close());
  const engine = await open(s.url, { clock, futureTimeoutMs: 30_000 });
  const samples = [1, 2, 3].map((k) => engine.sample([k, 2], { maxTokens: 3 }));
  await Promise.all(
    samples.map((p) => assert.rejects(p, message(/asample \(request r-asample-\d+\) is not done after 30 s$/))),
  );
  await engine.dispose(); // the cancels go out before it returns
  // The samples' request ids, as their polls named them: each cancelled once.
  const polled = new Set(
    s
      .requests("retrieve_future")
      .map((r) => String(r.body?.request_id))
      .filter((id) => id.startsWith("r-asample")),
  );
  assert.equal(polled.size, 3);
  assert.deepEqual(
    s
      .requests("cancel_future")
      .map((r) => String(r.body?.request_id))
      .sort(),
    [...polled].sort(),
  );
});
