/**
 * The Tinker wire codecs and the loss mapping, without a server. The protobuf side is checked
 * against bytes made with the message classes the Tinker SDK ships (test/fixtures/tinker-golden.json,
 * from dev/experiments/tinker-golden.py), so a wrong field number or type fails here even when our
 * encoder and decoder agree with each other.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  datumToJson,
  decodeForwardBackwardProto,
  encodeForwardBackwardOutputProto,
  encodeForwardBackwardProto,
  encodeSampleResponseProto,
  forwardBackwardOutputToJson,
  sampleResponseToJson,
} from "../src/engine/remote/tinker-codec.js";
import {
  readForwardBackwardJson,
  readForwardBackwardProto,
  readSampleJson,
  readSampleProto,
} from "../src/engine/remote/tinker-results.js";
import { Answer } from "../src/engine/remote/tinker-answer.js";
import { jsonTensor } from "../src/engine/remote/tinker-tensor.js";
import { TinkerError } from "../src/engine/remote/tinker-error.js";
import { chunkDatums, tinkerLoss } from "../src/engine/remote/tinker-loss.js";
import { versionAtLeast } from "../src/engine/remote/tinker-http.js";
import { zstdCompress, zstdDecompress } from "../src/engine/remote/zstd.js";
import { elementwiseLosses, wireDatums, wireLossSpec } from "../src/serve/tinker/wire-loss.js";
import type { Datum } from "../src/engine/types.js";

function golden(): Record<string, Uint8Array> {
  for (const rel of ["./fixtures/tinker-golden.json", "../../test/fixtures/tinker-golden.json"]) {
    try {
      const raw = JSON.parse(readFileSync(fileURLToPath(new URL(rel, import.meta.url)), "utf8")) as Record<
        string,
        string
      >;
      return Object.fromEntries(Object.entries(raw).map(([k, hex]) => [k, Uint8Array.from(Buffer.from(hex, "hex"))]));
    } catch {
      // try the next location (tests run from dist/test)
    }
  }
  throw new Error("test/fixtures/tinker-golden.json not found");
}
const G = golden();
/** The answer results are read as here (no server: the names only appear in errors). */
const A = new Answer("http://test", "a result (request r-1)");
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

test("protobuf ForwardBackwardRequest: the SDK's bytes decode to the request, and ours encode to the SDK's bytes", () => {
  const req = decodeForwardBackwardProto(G.forward_backward_request);
  assert.deepEqual(req, {
    modelId: "model-1",
    seqId: 7,
    lossFn: "importance_sampling",
    lossFnConfig: { clip_low_threshold: 0.75 },
    forwardOnly: false,
    data: [{ tokens: [5, 6, 7], inputs: { target_tokens: { data: [6, 7, 8], dtype: "int64", shape: [3] } } }],
  });
  const ours = encodeForwardBackwardProto({
    ...req,
    data: [{ tokens: [5, 6, 7], inputs: { target_tokens: { data: [6, 7, 8], dtype: "int64", shape: [3] } } }],
  });
  assert.equal(hex(ours), hex(G.forward_backward_request));
  const fwd = decodeForwardBackwardProto(G.forward_only_request);
  assert.equal(fwd.forwardOnly, true);
  assert.equal(fwd.seqId, 1);
  assert.equal(
    hex(encodeForwardBackwardProto({ modelId: "m", seqId: 1, lossFn: "cross_entropy", data: [], forwardOnly: true })),
    hex(G.forward_only_request),
  );
});

test("protobuf SampleResponse: the SDK's bytes decode (NaN prompt logprob = null) and ours match them", () => {
  const r = readSampleProto(G.sample_response, A);
  assert.deepEqual(r, {
    sequences: [
      { tokens: [11, 12], logprobs: [-0.5, -1.25], stopReason: "length" },
      { tokens: [13], logprobs: [-2], stopReason: "stop" },
    ],
    promptLogprobs: [null, -3, -0.25],
  });
  assert.equal(hex(encodeSampleResponseProto(r)), hex(G.sample_response));
});

test("protobuf ForwardBackwardOutput: batched tensors split by their int64 byte offsets, and ours match the SDK's", () => {
  const o = readForwardBackwardProto(G.forward_backward_output, 2, A);
  const f32 = (data: number[]) => ({ data, dtype: "float32", shape: [data.length] });
  assert.deepEqual(o, {
    outputs: [{ logprobs: f32([-1, -2]) }, { logprobs: f32([-3]) }],
    metrics: { "loss:sum": 1.5 },
  });
  const plain = { outputs: [{ logprobs: [-1, -2] }, { logprobs: [-3] }], metrics: { "loss:sum": 1.5 } };
  assert.equal(hex(encodeForwardBackwardOutputProto(plain)), hex(G.forward_backward_output));
});

test("JSON forms round-trip, and malformed ones are one-line errors naming the field", () => {
  const fault = (field: string, problem: string) => new TinkerError(`${field} ${problem}`);
  const d = { tokens: [1, 2], inputs: { target_tokens: { data: [2, 3], dtype: "int64" as const } } };
  const json = datumToJson(d);
  assert.deepEqual(jsonTensor(json.loss_fn_inputs.target_tokens, "t", fault), {
    data: [2, 3],
    dtype: "int64",
    shape: [2],
  });
  assert.throws(
    () => jsonTensor({ data: [1], dtype: "f16" }, "data[0].loss_fn_inputs.w", fault),
    /data\[0\]\.loss_fn_inputs\.w\.dtype is "f16", not "float32" or "int64"$/,
  );
  assert.throws(() => jsonTensor({ data: [1.5], dtype: "int64" }, "w", fault), /w\.data\[0\] is 1\.5, not an integer$/);
  assert.throws(
    () => jsonTensor({ data: [1, 2, 3], dtype: "float32", shape: [2, 2] }, "w", fault),
    /w\.shape is \[2, 2\], which holds 4 values, but the data holds 3$/,
  );
  const s = { sequences: [{ tokens: [4], logprobs: [-1], stopReason: "stop" as const }], promptLogprobs: null };
  assert.deepEqual(readSampleJson(sampleResponseToJson(s), A), s);
  assert.throws(
    () => readSampleJson({ sequences: [{ tokens: [1], stop_reason: "eos" }] }, A),
    /http:\/\/test: a result \(request r-1\): sequences\[0\]\.stop_reason is "eos", not "stop" or "length"$/,
  );
  const o = { outputs: [{ logprobs: [-1, -2], elementwise_loss: [0.5, 0] }], metrics: { "loss:sum": 0.5 } };
  const read = readForwardBackwardJson(forwardBackwardOutputToJson(o), A);
  assert.deepEqual(read.outputs[0].elementwise_loss, { data: [0.5, 0], dtype: "float32", shape: [2] });
  assert.deepEqual(read.metrics, o.metrics);
});

test("tinkerLoss: every aggregation is realized by scaling the per-token inputs (worked by hand)", () => {
  // Two datums, weights [0, 1, 1] and [1, 0]: 3 weighted tokens, 2 sequences.
  const datums: Datum[] = [
    { tokens: [1, 2, 3], targetTokens: [2, 3, 4], weights: [0, 1, 1], advantages: [9, 2, -1], logprobs: [-1, -2, -3] },
    { tokens: [5, 6], targetTokens: [6, 7], weights: [1, 0], advantages: [4, 9], logprobs: [-4, -5] },
  ];
  const adv = (spec: Parameters<typeof tinkerLoss>[1]) =>
    tinkerLoss(datums, spec).data.map((d) => d.inputs.advantages.data);
  // token-mean: c = w / 3.
  assert.deepEqual(adv({ type: "importance_sampling" }), [
    [0, 2 / 3, -1 / 3],
    [4 / 3, 0],
  ]);
  // seq-mean-token-mean: c = w / (W_s · S) = w / (2·2) for datum 0, w / (1·2) for datum 1.
  assert.deepEqual(adv({ type: "importance_sampling", aggregation: "seq-mean-token-mean" }), [
    [0, 2 / 4, -1 / 4],
    [4 / 2, 0],
  ]);
  // sum: c = w.
  assert.deepEqual(adv({ type: "ppo", aggregation: "sum", dualClip: 0 }), [
    [0, 2, -1],
    [4, 0],
  ]);
  // PPO and CISPO send absolute clip thresholds; cross-entropy sends c as its weights.
  const ppo = tinkerLoss(datums, { type: "ppo", clipLow: 0.2, clipHigh: 0.28, dualClip: 0 });
  assert.deepEqual(ppo.lossFnConfig, { clip_low_threshold: 0.8, clip_high_threshold: 1.28 });
  assert.deepEqual(tinkerLoss(datums, { type: "cispo" }).lossFnConfig, {
    clip_low_threshold: 0,
    clip_high_threshold: 4,
  });
  const ce = tinkerLoss(datums, { type: "cross_entropy", aggregation: "seq-mean-token-sum" });
  assert.deepEqual(
    ce.data.map((d) => d.inputs.weights.data),
    [
      [0, 1 / 2, 1 / 2],
      [1 / 2, 0],
    ],
  );
  assert.deepEqual(ce.data[0].inputs.target_tokens, { data: [2, 3, 4], dtype: "int64" });
});

test("tinkerLoss refuses what Tinker lacks, saying what to use instead", () => {
  const d: Datum[] = [
    { tokens: [1], targetTokens: [2], weights: [1], advantages: [1], logprobs: [-1], refLogprobs: [-1] },
  ];
  const refused = (msg: RegExp, hint: RegExp) => (e: unknown) =>
    e instanceof Error && msg.test(e.message) && hint.test(String((e as { hint?: string }).hint));
  assert.throws(() => tinkerLoss(d, { type: "ppo" }), refused(/dual clip/, /loss\.dualClip=0/));
  assert.throws(() => tinkerLoss(d, { type: "gspo" }), refused(/cannot run gspo/, /use ppo/));
  assert.throws(
    () => tinkerLoss(d, { type: "ppo", dualClip: 0, kl: { coef: 0.1 } }),
    refused(/KL term/, /inReward=true/),
  );
  assert.throws(() => tinkerLoss(d, { type: "importance_sampling", temperature: 0.7 }), /temperature 1/);
  assert.throws(
    () => tinkerLoss([{ ...d[0], weights: [0.5] }], { type: "dro", aggregation: "sum" }),
    /dro only with aggregation sum/,
  );
  assert.equal(tinkerLoss(d, { type: "dro", aggregation: "sum", beta: 0.1 }).lossFnConfig?.beta, 0.1);
});

test("the server's side: Tinker losses as ours sum to Tinker's per-token definitions", () => {
  const data = [
    {
      tokens: [1, 2],
      inputs: {
        target_tokens: { data: [2, 3], dtype: "int64" as const },
        advantages: { data: [0, 2], dtype: "float32" as const },
        logprobs: { data: [-1, -1], dtype: "float32" as const },
      },
    },
  ];
  const spec = wireLossSpec("ppo", { clip_low_threshold: 0.8, clip_high_threshold: 1.2 });
  assert.deepEqual(spec, { type: "ppo", aggregation: "sum", dualClip: 0, clipLow: 1 - 0.8, clipHigh: 1.2 - 1 });
  const datums = wireDatums(data, "ppo");
  assert.deepEqual(datums[0].weights, [1, 1], "Tinker has no mask: every token counts, a zero advantage masks");
  // Learner logprob -1 + ln 1.5: r = 1.5 is clipped to 1.2 for A = 2: l = -2.4; A = 0 gives 0.
  const l = elementwiseLosses(datums, spec, [[-1 + Math.log(1.5), -1 + Math.log(1.5)]]);
  assert.ok(Math.abs(l[0][0]) < 1e-12 && Math.abs(l[0][1] - -2.4) < 1e-12, String(l));
  assert.throws(() => wireLossSpec("kl_div"), /loss_fn 'kl_div' is not one of/);
  assert.throws(
    () => wireDatums([{ tokens: [1], inputs: { target_tokens: data[0].inputs.target_tokens } }], "ppo"),
    /has 2 values for 1/,
  );
  assert.throws(
    () => wireDatums([{ tokens: [1, 2], inputs: { target_tokens: data[0].inputs.target_tokens } }], "ppo"),
    /logprobs is required by ppo/,
  );
});

test("chunks keep order and respect both the datum and the byte limit", () => {
  const mk = (n: number) => ({
    tokens: Array(n).fill(1),
    inputs: { x: { data: Array(n).fill(0), dtype: "float32" as const } },
  });
  const data = [mk(10), mk(10), mk(10), mk(100), mk(1)];
  assert.deepEqual(
    chunkDatums(data, 2, 1e9).map((c) => c.length),
    [2, 2, 1],
  );
  // 12 bytes per token here: [10, 10] = 240 bytes; 100 tokens = 1200 bytes go alone.
  assert.deepEqual(
    chunkDatums(data, 100, 400).map((c) => c.map((d) => d.tokens.length)),
    [[10, 10, 10], [100], [1]],
  );
});

test("zstd round-trips and refuses garbage and bombs; SDK versions compare as numbers", async () => {
  const text = new TextEncoder().encode("tinker ".repeat(1000));
  const z = await zstdCompress(text);
  assert.ok(z.length < text.length / 10);
  assert.deepEqual(await zstdDecompress(z, 1 << 20), text);
  await assert.rejects(() => zstdDecompress(z, 100), /more than 100 bytes/);
  await assert.rejects(() => zstdDecompress(Uint8Array.of(1, 2, 3, 4), 1 << 20));
  assert.ok(
    versionAtLeast("0.25.0", "0.25.0") && versionAtLeast("0.31.2", "0.25.0") && versionAtLeast("1.0.0", "0.25.0"),
  );
  assert.ok(!versionAtLeast("0.24.1", "0.25.0") && !versionAtLeast("0.9.9", "0.25.0"));
});
