/**
 * `agent-r1 serve --tinker` under hostile and careless requests, on loopback with the tiny model:
 * zstd bombs, requests that ask for unbounded work, tinker:// paths that leave the state
 * directory, empty API keys, training requests that wait in vain or fail, optimizer settings that
 * make NaN weights, and malformed bodies on every route. Each is refused with one line naming the
 * field or the limit (never a 500), and the server keeps serving.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { encodeForwardBackwardProto } from "../src/engine/remote/tinker-codec.js";
import { zstdCompress } from "../src/engine/remote/zstd.js";
import { runCli } from "../src/cli/main.js";
import { captureIO, tempDir } from "./helpers.js";

const root = tempDir("agent-r1-tinker-hostile-");
const tiny = join(root, "tiny");
const state = join(root, "state");
const KEY = "tml-hostile";
let srv: RunningTinkerServer;
/** What the server logged (a 500 is logged with its stack). */
const logged: string[] = [];
/** The tiny model's context window and vocabulary. */
const WINDOW = 2048,
  VOCAB = 1024;

before(async () => {
  await initModel({ preset: "tiny", out: tiny, seed: 3 });
  srv = await startTinkerServer({
    baseModels: new Map([["tiny", tiny]]),
    stateDir: state,
    port: 0,
    apiKey: KEY,
    bodyLimit: 1 << 20,
    seqWaitMs: 300,
    pollMs: 200,
    maxSequences: 8,
    maxRequestTokens: 4000,
    maxDatums: 4,
    engineOptions: { workers: 0 },
    log: (line) => logged.push(line),
  });
});

after(() => srv?.close());

type Reply = { status: number; json: Record<string, unknown> };

async function post(path: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(`${srv.url}/api/v1/${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-API-Key": KEY, ...headers },
    body: body as BodyInit,
  });
  const text = await res.text();
  return { status: res.status, json: text.startsWith("{") ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const postJson = (path: string, body: unknown) => post(path, JSON.stringify(body));

/** A future's result, polled a bounded number of times (each poll waits up to 200 ms on the server). */
async function result(requestId: unknown): Promise<Record<string, unknown>> {
  for (let i = 0; i < 300; i++) {
    const r = await postJson("retrieve_future", { request_id: requestId });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    if (r.json.type !== "try_again") return r.json;
  }
  throw new Error(`request ${String(requestId)} never settled`);
}

/** A 400 (or `status`) whose one-line detail matches `detail`. */
function refused(r: Reply, detail: RegExp, label: string, status = 400): void {
  assert.equal(r.status, status, `${label}: ${JSON.stringify(r.json)}`);
  assert.match(String(r.json.detail), detail, label);
  assert.doesNotMatch(String(r.json.detail), /\n/, `${label}: one line`);
}

async function healthy(): Promise<void> {
  const res = await fetch(`${srv.url}/api/v1/healthz`, { headers: { "X-API-Key": KEY } });
  assert.deepEqual(await res.json(), { status: "ok" });
}

let sessionId: string | undefined;
async function session(): Promise<string> {
  sessionId ??= (await postJson("create_session", { tags: [], sdk_version: "0.24.1" })).json.session_id as string;
  return sessionId;
}

async function newModel(): Promise<string> {
  const made = await postJson("create_model", { session_id: await session(), model_seq_id: 0, base_model: "tiny" });
  assert.equal(made.status, 200, JSON.stringify(made.json));
  const id = (await result(made.json.request_id)).model_id;
  assert.match(String(id), /^model-/);
  return id as string;
}

const chunk = (tokens: number[]) => ({ chunks: [{ type: "encoded_text", tokens }] });
const datum = (tokens: number[]) => ({
  model_input: chunk(tokens),
  loss_fn_inputs: { target_tokens: { data: [...tokens.slice(1), 1], dtype: "int64" } },
});
const fwdbwd = (model: string, seq: number, data: unknown[], extra: Record<string, unknown> = {}) => ({
  model_id: model,
  seq_id: seq,
  forward_backward_input: { data, loss_fn: "cross_entropy", ...extra },
  type: "forward_backward",
});
const optim = (model: string, seq: number, adam: Record<string, unknown> = { learning_rate: 1e-3 }) => ({
  model_id: model,
  seq_id: seq,
  adam_params: adam,
  type: "optim_step",
});

/** A zstd frame that declares `declared` bytes (0 = no size) and holds RLE blocks of 128 KiB: a tiny body, a huge inflation. */
function rleFrame(blocks: number, declared = 0): Uint8Array {
  const out = [0x28, 0xb5, 0x2f, 0xfd];
  if (declared) out.push(0xa0, declared & 255, (declared >>> 8) & 255, (declared >>> 16) & 255, declared >>> 24);
  else out.push(0x00, 0x58); // no content size: a window descriptor instead
  for (let i = 0; i < blocks; i++) {
    const h = ((128 << 10) << 3) | (1 << 1) | (i === blocks - 1 ? 1 : 0);
    out.push(h & 255, (h >> 8) & 255, (h >> 16) & 255, 0);
  }
  return Uint8Array.from(out);
}

test("a zstd bomb (a 32 KB body declaring 1 GiB, 2 MiB of zeros, a frame of no declared size) gets 413 naming the limit, memory stays put, and the server keeps serving", async () => {
  const zstd = { "Content-Type": "application/x-protobuf", "Content-Encoding": "zstd" };
  const before = process.memoryUsage();
  const bombs: [string, Uint8Array][] = [
    ["32 KB declaring 1 GiB", rleFrame(8192, 1 << 30)],
    ["2 MiB of zeros", await zstdCompress(new Uint8Array(2 << 20))],
    ["16 RLE blocks of no declared size", rleFrame(16)],
    ["a header alone declaring 4 GiB - 1", rleFrame(1, 0xffffffff).subarray(0, 9)],
  ];
  for (const [label, body] of bombs) {
    const r = await post("forward_backward", body, zstd);
    refused(r, /decompresses to more than 1048576 bytes, this server's limit \(bodyLimit\)/, label, 413);
  }
  const grown = process.memoryUsage().rss - before.rss;
  assert.ok(grown < 200 << 20, `rss grew by ${grown} bytes`);
  // A zstd body within the limit still decompresses and decodes (an unknown model: 404).
  const pb = encodeForwardBackwardProto({
    modelId: "model-zzz",
    seqId: 1,
    lossFn: "cross_entropy",
    data: [{ tokens: [1, 2], inputs: { target_tokens: { data: [2, 3], dtype: "int64" } } }],
  });
  refused(await post("forward_backward", await zstdCompress(pb), zstd), /no model model-zzz/, "small body", 404);
  await healthy();
});

test("per-request limits: num_samples, max_tokens, prompt length, datums and tokens per request get 400 naming the field and the limit, before any work", async () => {
  const config = await postJson("client/config", {});
  assert.equal(config.json.fwdbwd_max_chunk_len, 4, "the client config asks for chunks within maxDatums");
  assert.equal(config.json.fwdbwd_max_chunk_bytes_count, 4000 * 12, "... and within maxRequestTokens");
  const sampler = await postJson("create_sampling_session", {
    session_id: await session(),
    sampling_session_seq_id: 0,
    base_model: "tiny",
  });
  const sid = sampler.json.sampling_session_id;
  const sample = (prompt: number[], n: number, maxTokens: number, extra: Record<string, unknown> = {}) =>
    postJson("asample", {
      sampling_session_id: sid,
      prompt: chunk(prompt),
      num_samples: n,
      sampling_params: { max_tokens: maxTokens, temperature: 1, seed: 1 },
      ...extra,
    });
  refused(await sample([1, 2, 3], 20_000, 4), /num_samples 20000 is over this server's limit of 8 .*maxSequences/, "n");
  refused(await sample([1, 2, 3], 1, 1e9), /sampling_params\.max_tokens must be an integer in \[1, 2048\]/, "max");
  refused(
    await sample(Array(WINDOW + 1).fill(1), 1, 1),
    /prompt is 2049 tokens; this model's context window is 2048/,
    "prompt",
  );
  refused(
    await sample([1, 2, 3], 8, 1000),
    /up to 8003 tokens .*at most 4000 per request \(maxRequestTokens\)/,
    "token budget",
  );
  refused(
    await sample(Array(2000).fill(1), 1, 10, { prompt_logprobs: true }),
    /up to 4010 tokens \(2000 prompt \+ 2000 scored \+ 1 samples × 10 new\)/,
    "scored prompt tokens count",
  );
  refused(
    await sample([1, VOCAB], 1, 1),
    /prompt\.chunks\[0\]\.tokens\[1\] must be a token id in \[0, 1024\)/,
    "vocab",
  );
  // Within the limits it samples.
  const ok = await sample([1, 2, 3], 8, 4);
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  assert.equal(((await result(ok.json.request_id)).sequences as unknown[]).length, 8);

  const model = await newModel();
  const small = datum([1, 2, 3]);
  refused(
    await postJson("forward_backward", fwdbwd(model, 1, Array(5).fill(small))),
    /holds 5 datums.*maxDatums/,
    "datums",
  );
  refused(
    await postJson("forward_backward", fwdbwd(model, 1, Array(3).fill(datum(Array(1500).fill(1))))),
    /up to 4500 tokens .*maxRequestTokens/,
    "training tokens",
  );
  refused(
    await postJson("forward_backward", fwdbwd(model, 1, [datum(Array(WINDOW + 1).fill(1))])),
    /data\[0\]\.model_input is 2049 tokens; this model's context window is 2048/,
    "datum length",
  );
  refused(
    await postJson("forward_backward", fwdbwd(model, 1, [])),
    /forward_backward_input\.data|data must be a list of at least one datum/,
    "no datums",
  );
  // The same limits on the protobuf wire.
  const proto = encodeForwardBackwardProto({
    modelId: model,
    seqId: 1,
    lossFn: "cross_entropy",
    data: Array(5).fill({ tokens: [1, 2], inputs: { target_tokens: { data: [2, 3], dtype: "int64" } } }),
  });
  refused(await post("forward_backward", proto, { "Content-Type": "application/x-protobuf" }), /maxDatums/, "proto");
  // seq_id 1 was refused each time, so a good request may still use it.
  const good = await postJson("forward_backward", fwdbwd(model, 1, [small, small]));
  assert.equal(good.status, 200, JSON.stringify(good.json));
  assert.equal(((await result(good.json.request_id)).loss_fn_outputs as unknown[]).length, 2);
});

test("tinker:// paths with '..', empty or absolute parts, or links out of the state directory get 400 naming the path; saved checkpoints still load", async () => {
  const model = await newModel();
  const saved = await postJson("save_weights", { model_id: model, seq_id: 1, path: "good", type: "save_weights" });
  assert.equal((await result(saved.json.request_id)).path, `tinker://${model}/weights/good`);
  // A model directory beside the state directory, where `tinker://../weights/NAME` used to lead.
  const outside = join(root, "weights", "evil");
  mkdirSync(join(root, "weights"), { recursive: true });
  cpSync(tiny, outside, { recursive: true });
  const before = readdirSync(outside).sort();
  // Links inside the state directory that lead out of it: a checkpoint, and a file of one.
  const weights = join(state, model, "weights");
  symlinkSync(outside, join(weights, "link"));
  mkdirSync(join(weights, "mixed"));
  for (const f of readdirSync(join(weights, "good"))) {
    if (f === "config.json") symlinkSync(join(outside, f), join(weights, "mixed", f));
    else cpSync(join(weights, "good", f), join(weights, "mixed", f));
  }
  const escapes = [
    "tinker://../weights/evil",
    `tinker://${model}/weights/..`,
    `tinker://${model}/weights/...`,
    "tinker:///weights/evil",
    `tinker://${model}/weights/good/../../../weights/evil`,
    `tinker://${model}/weights//etc`,
    `tinker://${model}/weights/link`,
    `tinker://${model}/weights/mixed`,
  ];
  const sid = await session();
  for (const path of escapes) {
    const label = path;
    const sampling = await postJson("create_sampling_session", { session_id: sid, model_path: path });
    refused(sampling, /path|model_path/, `create_sampling_session ${label}`);
    assert.ok(String(sampling.json.detail).includes(path.slice(0, 40)), `${label}: the path is named`);
    refused(
      await postJson("load_weights", { model_id: model, seq_id: 2, path, type: "load_weights" }),
      /path/,
      `load_weights ${label}`,
    );
  }
  // A save may not write through a link either, nor name a path that leaves its directory.
  for (const name of ["link", "..", "../../x", "/tmp/x"])
    refused(
      await postJson("save_weights", { model_id: model, seq_id: 2, path: name, type: "save_weights" }),
      /path/,
      `save_weights ${name}`,
    );
  assert.deepEqual(readdirSync(outside).sort(), before, "nothing written outside the state directory");
  // The refusals left seq_id 2 free: the checkpoint saved inside loads with it.
  const loaded = await postJson("load_weights", {
    model_id: model,
    seq_id: 2,
    path: `tinker://${model}/weights/good`,
    type: "load_weights",
  });
  assert.equal(loaded.status, 200, JSON.stringify(loaded.json));
  assert.equal((await result(loaded.json.request_id)).type, "load_weights");
  const sampling = await postJson("create_sampling_session", {
    session_id: sid,
    model_path: `tinker://${model}/weights/good`,
  });
  assert.equal(sampling.status, 200, JSON.stringify(sampling.json));
});

test("an empty or blank API key is refused at start (startTinkerServer and the CLI), and an empty X-API-Key never gets in", async () => {
  for (const apiKey of ["", " ", "\t"])
    await assert.rejects(
      startTinkerServer({ baseModels: new Map([["tiny", tiny]]), stateDir: state, port: 0, apiKey }),
      /serve --tinker: the API key must be non-empty and without spaces/,
      JSON.stringify(apiKey),
    );
  const io = captureIO();
  const code = await runCli(["serve", "--tinker", "--model", tiny, "--port", "0", "--api-key", " "], io);
  assert.equal(code, 1, io.stderr.join("\n"));
  assert.match(io.stderr.join("\n"), /^error: serve --tinker: the API key must be non-empty/m);
  const saved = process.env.AGENT_R1_API_KEY;
  process.env.AGENT_R1_API_KEY = "  ";
  try {
    const env = captureIO();
    assert.equal(await runCli(["serve", "--tinker", "--model", tiny, "--port", "0"], env), 1);
    assert.match(env.stderr.join("\n"), /API key must be non-empty/);
  } finally {
    if (saved === undefined) delete process.env.AGENT_R1_API_KEY;
    else process.env.AGENT_R1_API_KEY = saved;
  }
  for (const given of ["", " "]) {
    const r = await post("create_session", "{}", { "X-API-Key": given });
    refused(r, /requires its API key as X-API-Key/, `X-API-Key ${JSON.stringify(given)}`, 401);
  }
});

test("a training request that waits in vain, fails, or is refused does not wedge its model: the next seq_id still trains", async () => {
  const model = await newModel();
  // seq_id 1 never comes: 2 fails once its wait (300 ms) is over, and the queue goes on.
  const orphan = await postJson("optim_step", optim(model, 2));
  const failed = await result(orphan.json.request_id);
  assert.match(
    String(failed.error),
    /seq_id 2 waited 0\.3 s for seq_id 1, which never came; the queue goes on after 2/,
  );
  assert.equal(failed.category, "user");
  const third = await result((await postJson("optim_step", optim(model, 3))).json.request_id);
  assert.equal(third.type, "optim_step", JSON.stringify(third));
  // A late seq_id 1 is behind the queue.
  refused(await postJson("optim_step", optim(model, 1)), /seq_id 1 comes after 3/, "late", 409);
  // A step that fails while it runs (its checkpoint directory cannot be made) lets the next one go.
  mkdirSync(join(state, model), { recursive: true });
  writeFileSync(join(state, model, "sampler_weights"), "a file where a directory goes");
  const save = await postJson("save_weights_for_sampler", {
    model_id: model,
    seq_id: 4,
    path: "blocked",
    type: "save_weights_for_sampler",
  });
  assert.equal(save.status, 200, JSON.stringify(save.json));
  const saveResult = await result(save.json.request_id);
  assert.ok(saveResult.error, `the save failed: ${JSON.stringify(saveResult)}`);
  assert.equal((await result((await postJson("optim_step", optim(model, 5))).json.request_id)).type, "optim_step");
  // A refused request (beta1 5) never sent again: the next number runs after the wait, not fails.
  refused(await postJson("optim_step", optim(model, 6, { beta1: 5 })), /adam_params\.beta1/, "beta1");
  const seventh = await result((await postJson("optim_step", optim(model, 7))).json.request_id);
  assert.equal(seventh.type, "optim_step", JSON.stringify(seventh));
});

test("optimizer and loss settings out of range get 400 naming the field, and the weights stay finite", async () => {
  const model = await newModel();
  const fb = await postJson("forward_backward", fwdbwd(model, 1, [datum([1, 2, 3, 4])]));
  await result(fb.json.request_id);
  const bad: [Record<string, unknown> | string, RegExp][] = [
    [{ learning_rate: 1e308 }, /adam_params\.learning_rate must be a number in \[0, 1\], got 1e\+308/],
    [{ learning_rate: -1 }, /adam_params\.learning_rate/],
    [{ learning_rate: "0.1" }, /adam_params\.learning_rate must be a finite number/],
    [{ beta1: 5 }, /adam_params\.beta1 must be a number in \[0, 1\)/],
    [{ beta2: 1 }, /adam_params\.beta2 must be a number in \[0, 1\)/],
    [{ eps: 0 }, /adam_params\.eps must be a number in \(0, 1\]/],
    [{ eps: -1e-8 }, /adam_params\.eps/],
    [{ weight_decay: -1 }, /adam_params\.weight_decay must be a number in \[0, 1\]/],
    [{ grad_clip_norm: -1 }, /adam_params\.grad_clip_norm must be a finite number >= 0/],
    ["fast", /adam_params must be an object/],
  ];
  for (const [adam, detail] of bad)
    refused(
      await postJson("optim_step", optim(model, 2, adam as Record<string, unknown>)),
      detail,
      JSON.stringify(adam),
    );
  // 1e400 parses as Infinity.
  const inf = JSON.stringify(optim(model, 2)).replace('"learning_rate":0.001', '"learning_rate":1e400');
  refused(await post("optim_step", inf), /adam_params\.learning_rate must be a finite number, got Infinity/, "1e400");
  const ppo = (config: unknown) =>
    postJson(
      "forward_backward",
      fwdbwd(model, 2, [datum([1, 2])], {
        loss_fn: "ppo",
        loss_fn_config: config,
      }),
    );
  refused(await ppo({ clip_low_threshold: "x" }), /loss_fn_config\.clip_low_threshold must be a finite number/, "x");
  refused(await ppo({ clip: 0.2 }), /loss_fn_config\.clip is not read by ppo/, "unknown key");
  refused(await ppo([0.2]), /loss_fn_config must be an object/, "list");
  refused(
    await postJson("forward_backward", fwdbwd(model, 2, [datum([1, 2])], { loss_fn: "toString" })),
    /loss_fn 'toString' is not one of/,
    "a prototype name as loss_fn",
  );
  // seq_id 2 is still free: a sane step runs, and the weights it leaves give finite logprobs.
  const step = await result((await postJson("optim_step", optim(model, 2))).json.request_id);
  assert.ok(Number.isFinite((step.metrics as Record<string, number>).grad_norm), JSON.stringify(step));
  const forward = await postJson("forward", {
    model_id: model,
    seq_id: 3,
    forward_input: { data: [datum([1, 2, 3, 4])], loss_fn: "cross_entropy" },
    type: "forward",
  });
  const out = await result(forward.json.request_id);
  const lp = (out.loss_fn_outputs as { logprobs: { data: number[] } }[])[0].logprobs.data;
  assert.equal(lp.length, 4);
  assert.ok(
    lp.every((x) => Number.isFinite(x)),
    `finite logprobs: ${lp}`,
  );
});

/** Values of the wrong type or range for any field. */
const GARBAGE: unknown[] = [
  null,
  5,
  -1,
  1.5,
  2 ** 60,
  1e308,
  "x",
  "",
  "../../etc/passwd",
  true,
  [],
  [null],
  {},
  { a: { b: [{ c: null }] } },
];

/** Every path to a value inside `v` (object keys and list items), the root excluded. */
function leafPaths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [];
  if (Array.isArray(v)) v.forEach((x, i) => out.push([...at, i], ...leafPaths(x, [...at, i])));
  else if (v && typeof v === "object")
    for (const [k, x] of Object.entries(v)) out.push([...at, k], ...leafPaths(x, [...at, k]));
  return out;
}

/** `body` with the value at `path` replaced (or, for `undefined`, removed). */
function mutate(body: unknown, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let parent = copy;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (value === undefined) {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else parent[last] = value;
  return copy;
}

/** A small deterministic byte generator for protobuf garbage. */
function bytes(seed: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

test("malformed bodies on every route (wrong types, null, lists, nested garbage, missing fields, huge and negative numbers) answer 4xx naming the field, never 500, and the server keeps serving", async () => {
  const sid = await session();
  const model = await newModel();
  const sampler = (await postJson("create_sampling_session", { session_id: sid, base_model: "tiny" })).json
    .sampling_session_id;
  const settled = await postJson("save_weights", { model_id: model, seq_id: 1, path: "ok" });
  await result(settled.json.request_id);
  const data = [
    {
      model_input: chunk([1, 2, 3]),
      loss_fn_inputs: {
        target_tokens: { data: [2, 3, 4], dtype: "int64" },
        weights: { data: [1, 1, 0], dtype: "float32" },
      },
    },
  ];
  const templates: Record<string, Record<string, unknown>> = {
    session_heartbeat: { session_id: sid },
    create_model: { session_id: sid, base_model: "tiny", lora_config: { rank: 8 } },
    get_info: { model_id: model },
    unload_model: { model_id: model },
    forward_backward: {
      model_id: model,
      seq_id: 2,
      forward_backward_input: { data, loss_fn: "cross_entropy", loss_fn_config: null },
    },
    forward: { model_id: model, seq_id: 2, forward_input: { data, loss_fn: "cross_entropy" } },
    optim_step: optim(model, 2, { learning_rate: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0 }),
    save_weights: { model_id: model, seq_id: 2, path: "ok2" },
    load_weights: { model_id: model, seq_id: 2, path: `tinker://${model}/weights/ok` },
    save_weights_for_sampler: { model_id: model, seq_id: 2, sampling_session_seq_id: 0 },
    create_sampling_session: { session_id: sid, model_path: `tinker://${model}/weights/ok` },
    asample: {
      sampling_session_id: sampler,
      prompt: chunk([1, 2]),
      num_samples: 2,
      sampling_params: { max_tokens: 2, temperature: 1, top_k: -1, top_p: 1, seed: 1, stop: [5] },
      prompt_logprobs: false,
    },
    retrieve_future: { request_id: settled.json.request_id },
  };
  let requests = 0,
    refusedCount = 0;
  const accepted: unknown[] = [];
  /** Sends one body; `fields` are the names a 400 must mention (the changed field or its parent). */
  const check = async (route: string, body: string | Uint8Array, label: string, fields?: string[], proto = false) => {
    requests++;
    const r = await post(route, body, proto ? { "Content-Type": "application/x-protobuf" } : {});
    assert.ok(r.status < 500, `${label}: ${r.status} ${JSON.stringify(r.json)}`);
    if (r.status >= 400) {
      refusedCount++;
      assert.equal(typeof r.json.detail, "string", label);
      assert.doesNotMatch(String(r.json.detail), /\n|internal error/, label);
      if (r.status === 400 && fields)
        assert.ok(
          fields.some((f) => String(r.json.detail).includes(f)),
          `${label}: the detail names ${fields.join(" or ")}: ${r.json.detail}`,
        );
    } else if (typeof r.json.request_id === "string" && route !== "retrieve_future") accepted.push(r.json.request_id);
  };
  for (const [route, template] of Object.entries(templates)) {
    for (const top of ["null", "5", '"x"', "[]", "[{}]"]) await check(route, top, `${route} ${top}`);
    for (const path of leafPaths(template)) {
      const names = path.filter((k) => typeof k === "string") as string[];
      const fields = names.slice(-2);
      for (const value of [undefined, ...GARBAGE]) {
        const label = `${route} ${path.join(".")} = ${JSON.stringify(value) ?? "(missing)"}`;
        await check(route, JSON.stringify(mutate(template, path, value)), label, fields);
      }
    }
  }
  // Protobuf forward_backward bodies: random bytes, and a valid one cut short or with bytes flipped.
  const valid = encodeForwardBackwardProto({
    modelId: model,
    seqId: 3,
    lossFn: "cross_entropy",
    data: [{ tokens: [1, 2, 3], inputs: { target_tokens: { data: [2, 3, 4], dtype: "int64" } } }],
  });
  for (let i = 0; i < 40; i++)
    await check("forward_backward", bytes(i + 1, 1 + i * 7), `random bytes ${i}`, undefined, true);
  for (let cut = 1; cut < valid.length; cut += 3)
    await check("forward_backward", valid.subarray(0, cut), `cut at ${cut}`, undefined, true);
  for (let i = 0; i < valid.length; i++) {
    const flipped = valid.slice();
    flipped[i] ^= 0xff;
    await check("forward_backward", flipped, `byte ${i} flipped`, undefined, true);
  }
  assert.ok(refusedCount > 500, `${refusedCount} of ${requests} requests refused`);
  // What was accepted settles as a result or a user error, never a server error.
  for (const id of accepted) {
    const r = await result(id);
    assert.notEqual(r.category, "server", JSON.stringify(r));
  }
  assert.deepEqual(
    logged.filter((l) => l.startsWith("serve --tinker:")),
    [],
    "nothing logged as an internal error",
  );
  await healthy();
  const ok = await postJson("asample", templates.asample);
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  assert.equal(((await result(ok.json.request_id)).sequences as unknown[]).length, 2);
});

test("ids, names and paths a client sends come back in errors on one line: control characters are quoted, long ones cut", async () => {
  const sid = await session();
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ["get_info", { model_id: "model-a\nb\rc" }, /no model "model-a\\nb\\rc" on this server/],
    ["create_model", { session_id: sid, base_model: "ti\nny" }, /base_model '"ti\\nny"' is not served here/],
    ["session_heartbeat", { session_id: "s\u2028x" }, /no session "s\\u2028x" on this server/],
    ["get_info", { model_id: "m".repeat(500) }, /no model m{80}\.\.\. on this server/],
  ];
  for (const [route, body, want] of cases) {
    const r = await postJson(route, body);
    assert.ok(r.status >= 400 && r.status < 500, `${route}: ${r.status}`);
    assert.doesNotMatch(String(r.json.detail), /[\n\r\u2028]/, route);
    assert.match(String(r.json.detail), want, route);
  }
});

test("a session that goes quiet is closed after sessionTtlMs, its models and sampling engines unloaded; past maxModels a model is refused with 429 naming the limit", async () => {
  const small = await startTinkerServer({
    baseModels: new Map([["tiny", tiny]]),
    stateDir: join(root, "state-small"),
    port: 0,
    sessionTtlMs: 400,
    maxModels: 2,
    pollMs: 200,
    engineOptions: { workers: 0 },
    log: () => {},
  });
  const call = async (path: string, body: unknown): Promise<Reply> => {
    const res = await fetch(`${small.url}/api/v1/${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const settle = async (id: unknown) => {
    for (let i = 0; i < 300; i++) {
      const r = await call("retrieve_future", { request_id: id });
      if (r.json.type !== "try_again") return r.json;
    }
    throw new Error("never settled");
  };
  try {
    const quiet = (await call("create_session", {})).json.session_id;
    const alive = (await call("create_session", {})).json.session_id;
    const model = (
      await settle((await call("create_model", { session_id: quiet, base_model: "tiny" })).json.request_id)
    ).model_id;
    assert.equal((await call("create_sampling_session", { session_id: quiet, base_model: "tiny" })).status, 200);
    assert.deepEqual(small.service.stats(), { sessions: 2, models: 1, samplers: 1, diskEngines: 1 });
    refused(
      await call("create_model", { session_id: alive, base_model: "tiny" }),
      /this server holds 2 models \(maxModels\)/,
      "a third engine",
      429,
    );
    // `alive` heartbeats; `quiet` sends nothing, and is closed with what it holds.
    for (let i = 0; i < 100 && small.service.stats().models > 0; i++) {
      assert.equal((await call("session_heartbeat", { session_id: alive })).status, 200);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(small.service.stats(), { sessions: 1, models: 0, samplers: 0, diskEngines: 0 });
    refused(await call("get_info", { model_id: model }), /no model .*idle/, "the closed session's model", 404);
    refused(await call("session_heartbeat", { session_id: quiet }), /no session .*idle/, "the closed session", 404);
    const again = await call("create_model", { session_id: alive, base_model: "tiny" });
    assert.match(String((await settle(again.json.request_id)).model_id), /^model-/, "room again");
  } finally {
    await small.close();
  }
});
