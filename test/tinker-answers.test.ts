/**
 * Malformed answers replayed against the Tinker client, one class of fault each, from a scripted
 * server on loopback (test/fixtures/scripted-tinker.ts): wrong and unspecified dtypes, byte blobs
 * that are not whole values, per-datum offsets that do not match num_datums (or would give a datum
 * "the rest of the buffer"), trailing shapes and shapes that do not fit, token ids outside the
 * vocabulary, logprobs above 0 or not numbers, a missing `loss:sum`, handshake answers of the
 * wrong type, and the newer wire's (per-sequence sample ids missing, short or not strings; a
 * dynamic config or a session message of the wrong type). Each must fail the call with a TinkerAnswerError naming the server, the request and
 * the field, and nothing of the answer may reach a caller (no result, no streamed token).
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type protobuf from "protobufjs";
import { TinkerEngine } from "../src/engine/remote/tinker-engine.js";
import { TinkerAnswerError, TinkerError } from "../src/engine/remote/tinker-error.js";
import {
  DTYPE,
  float32Bytes,
  ForwardBackwardOutputMsg,
  int32Bytes,
  int64Bytes,
  SampleResponseMsg,
} from "../src/engine/remote/tinker-proto.js";
import { tempDir } from "./helpers.js";
import { BASE_MODEL, VOCAB, scriptedTinker, type Reply, type Route } from "./fixtures/scripted-tinker.js";

/** Encodes without the schema's checks, so a test can send what a broken server would. */
const raw = (msg: protobuf.Type, obj: Record<string, unknown>): Reply => ({
  bytes: msg.encode(msg.fromObject(obj)).finish(),
});

/** A SampleResponse of one sequence, with its parts replaceable. */
const sampleProto = (seq: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  raw(SampleResponseMsg, {
    sequences: [{ stop_reason: 0, tokens: int32Bytes([5, 6]), logprobs: float32Bytes([-1, -1]), ...seq }],
    ...extra,
  });

/** A ForwardBackwardOutput of one record with a logprobs field for the two datums sent (2 values each). */
const fbProto = (field: Record<string, unknown>, rec: Record<string, unknown> = {}, metrics = { "loss:sum": 4 }) =>
  raw(ForwardBackwardOutputMsg, {
    loss_fn_output_type: "ArrayRecord",
    loss_fn_outputs: [
      {
        type_tag: "ArrayRecord",
        num_datums: 2,
        fields: {
          logprobs: {
            data: float32Bytes([-1, -1, -1, -1]),
            offsets: int64Bytes([0, 8, 16]),
            dtype: DTYPE.float32,
            ...field,
          },
        },
        ...rec,
      },
    ],
    metrics,
  });

const tensor = (data: unknown, extra: Record<string, unknown> = {}) => ({ data, dtype: "float32", ...extra });
const fbJson = (logprobs: unknown, metrics: unknown = { "loss:sum": 4 }): Reply => ({
  json: { loss_fn_outputs: [{ logprobs }, { logprobs: tensor([-1, -1]) }], metrics },
});

type Act = "open" | "sample" | "score" | "train" | "optim" | "save";

interface Case {
  label: string;
  act: Act;
  sdk: "0.24.1" | "0.25.0" | "0.27.0" | "0.31.0";
  route: Route;
  reply: Reply;
  /** The request the error must name. */
  request: RegExp;
  field: string;
}

const SAMPLE = /^asample \(request r-asample-\d+\)$/;
const TRAIN = /^forward_backward \(seq_id \d+, 2 datums\) \(request r-forward_backward-\d+\)$/;
const P = "0.25.0",
  J = "0.24.1",
  NEWEST = "0.31.0";

const CASES: Case[] = [
  // dtypes
  ...[
    ["unspecified", 0],
    ["unknown", 9],
  ].map(([what, dtype]): Case => ({
    label: `an ${what} dtype is an error, never float32`,
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ dtype }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.dtype",
  })),
  {
    label: "int64 logprobs",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ data: int64Bytes([-1, -1, -1, -1]), offsets: int64Bytes([0, 16, 32]), dtype: DTYPE.int64 }),
    request: TRAIN,
    field: "loss_fn_outputs[0].logprobs.dtype",
  },
  {
    label: "a JSON tensor without a dtype",
    act: "train",
    sdk: J,
    route: "forward_backward-result",
    reply: fbJson({ data: [-1, -1] }),
    request: TRAIN,
    field: "loss_fn_outputs[0].logprobs.dtype",
  },
  // whole values
  {
    label: "token ids that are not whole int32 values",
    act: "sample",
    sdk: P,
    route: "asample-result",
    reply: sampleProto({ tokens: Uint8Array.of(5, 0, 0, 0, 6) }),
    request: SAMPLE,
    field: "sequences[0].tokens",
  },
  {
    label: "logprobs that are not whole float32 values",
    act: "sample",
    sdk: P,
    route: "asample-result",
    reply: sampleProto({ logprobs: new Uint8Array(6) }),
    request: SAMPLE,
    field: "sequences[0].logprobs",
  },
  {
    label: "prompt logprobs that are not whole float32 values",
    act: "score",
    sdk: P,
    route: "asample-result",
    reply: sampleProto({}, { prompt_logprobs: new Uint8Array(7) }),
    request: SAMPLE,
    field: "prompt_logprobs",
  },
  {
    label: "a batched tensor whose data is not whole values",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ data: new Uint8Array(14), offsets: int64Bytes([0, 8, 14]) }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.data",
  },
  // offsets against num_datums
  {
    label: "offsets for fewer datums than num_datums (the last would get the rest of the buffer)",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ offsets: int64Bytes([0, 8]) }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.offsets",
  },
  {
    label: "offsets that do not start at 0",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ offsets: int64Bytes([4, 8, 16]) }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.offsets[0]",
  },
  {
    label: "offsets that go back",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ offsets: int64Bytes([0, 12, 8]) }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.offsets[2]",
  },
  {
    label: "an offset inside a value",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ offsets: int64Bytes([0, 6, 16]) }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.offsets[1]",
  },
  {
    label: "offsets that end before the data does",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ offsets: int64Bytes([0, 4, 8]) }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.offsets[2]",
  },
  {
    label: "a negative num_datums",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({}, { num_datums: -1 }),
    request: TRAIN,
    field: "loss_fn_outputs[0].num_datums",
  },
  {
    label: "records whose num_datums add up to more datums than were sent",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: raw(ForwardBackwardOutputMsg, {
      loss_fn_outputs: [1, 2].map((n) => ({
        num_datums: n,
        fields: {
          logprobs: {
            data: float32Bytes(Array(2 * n).fill(-1)),
            offsets: int64Bytes(n === 1 ? [0, 8] : [0, 8, 16]),
            dtype: DTYPE.float32,
          },
        },
      })),
      metrics: { "loss:sum": 1 },
    }),
    request: TRAIN,
    field: "loss_fn_outputs[1].num_datums",
  },
  // shapes
  {
    label: "a trailing_shape that does not divide a datum's values",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({
      data: float32Bytes([-1, -1, -1, -1, -1]),
      offsets: int64Bytes([0, 8, 20]),
      trailing_shape: [2],
    }),
    request: TRAIN,
    field: "loss_fn_outputs[0].fields.logprobs.trailing_shape",
  },
  {
    label: "logprobs of two dimensions",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ trailing_shape: [1] }),
    request: TRAIN,
    field: "loss_fn_outputs[0].logprobs.shape",
  },
  {
    label: "a JSON shape that does not hold the data",
    act: "train",
    sdk: J,
    route: "forward_backward-result",
    reply: fbJson(tensor([-1, -1], { shape: [3] })),
    request: TRAIN,
    field: "loss_fn_outputs[0].logprobs.shape",
  },
  {
    label: "fewer logprobs than target tokens",
    act: "train",
    sdk: J,
    route: "forward_backward-result",
    reply: fbJson(tensor([-1])),
    request: TRAIN,
    field: "loss_fn_outputs[0].logprobs.shape",
  },
  {
    label: "no logprobs output",
    act: "train",
    sdk: J,
    route: "forward_backward-result",
    reply: { json: { loss_fn_outputs: [{}, { logprobs: tensor([-1, -1]) }], metrics: { "loss:sum": 1 } } },
    request: TRAIN,
    field: "loss_fn_outputs[0].logprobs",
  },
  // token ids and logprobs
  {
    label: "a token id outside the vocabulary",
    act: "sample",
    sdk: P,
    route: "asample-result",
    reply: sampleProto({ tokens: int32Bytes([5, VOCAB]) }),
    request: SAMPLE,
    field: "sequences[0].tokens[1]",
  },
  {
    label: "a negative token id",
    act: "sample",
    sdk: J,
    route: "asample-result",
    reply: { json: { sequences: [{ tokens: [-3], logprobs: [-1], stop_reason: "stop" }] } },
    request: SAMPLE,
    field: "sequences[0].tokens[0]",
  },
  {
    label: "a sampled logprob that is NaN",
    act: "sample",
    sdk: P,
    route: "asample-result",
    reply: sampleProto({ logprobs: float32Bytes([-1, NaN]) }),
    request: SAMPLE,
    field: "sequences[0].logprobs[1]",
  },
  {
    label: "a sampled logprob above 0",
    act: "sample",
    sdk: J,
    route: "asample-result",
    reply: { json: { sequences: [{ tokens: [5], logprobs: [0.5], stop_reason: "length" }] } },
    request: SAMPLE,
    field: "sequences[0].logprobs[0]",
  },
  {
    label: "a scored logprob above 0",
    act: "score",
    sdk: J,
    route: "asample-result",
    reply: {
      json: { sequences: [{ tokens: [5], logprobs: [-1], stop_reason: "length" }], prompt_logprobs: [null, 2, -1] },
    },
    request: SAMPLE,
    field: "prompt_logprobs[1]",
  },
  {
    label: "prompt logprobs that are not a list",
    act: "score",
    sdk: J,
    route: "asample-result",
    reply: { json: { sequences: [], prompt_logprobs: "lots" } },
    request: SAMPLE,
    field: "prompt_logprobs",
  },
  {
    label: "a training logprob above 0",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({ data: float32Bytes([-1, -1, 3, -1]) }),
    request: TRAIN,
    field: "loss_fn_outputs[1].logprobs[0]",
  },
  {
    label: "an unknown stop reason",
    act: "sample",
    sdk: P,
    route: "asample-result",
    reply: sampleProto({ stop_reason: 4 }),
    request: SAMPLE,
    field: "sequences[0].stop_reason",
  },
  {
    label: "a protobuf result that does not decode",
    act: "sample",
    sdk: P,
    route: "asample-result",
    reply: { bytes: Uint8Array.of(0x0a, 0xff, 0xff, 0xff) },
    request: SAMPLE,
    field: "the result",
  },
  // required metrics
  {
    label: "no loss:sum (never a silent NaN loss)",
    act: "train",
    sdk: P,
    route: "forward_backward-result",
    reply: fbProto({}, {}, { "loss:mean": 1 } as never),
    request: TRAIN,
    field: 'metrics["loss:sum"]',
  },
  {
    label: "a metric that is not a number",
    act: "train",
    sdk: J,
    route: "forward_backward-result",
    reply: fbJson(tensor([-1, -1]), { "loss:sum": "4" }),
    request: TRAIN,
    field: "metrics.loss:sum",
  },
  // handshake and the other results
  {
    label: "a chunk length that is not a positive integer",
    act: "open",
    sdk: P,
    route: "config",
    reply: { json: { fwdbwd_max_chunk_len: -5 } },
    request: /^client\/config$/,
    field: "fwdbwd_max_chunk_len",
  },
  {
    label: "a compression flag that is not a boolean",
    act: "open",
    sdk: P,
    route: "config",
    reply: { json: { proto_compress_fwdbwd: "yes" } },
    request: /^client\/config$/,
    field: "proto_compress_fwdbwd",
  },
  {
    label: "no session id",
    act: "open",
    sdk: P,
    route: "session",
    reply: { json: { session: "s" } },
    request: /^create_session$/,
    field: "session_id",
  },
  {
    label: "a model id that is not a string",
    act: "open",
    sdk: P,
    route: "create_model-result",
    reply: { json: { model_id: 7 } },
    request: /^create_model of 'b' \(request r-create_model-\d+\)$/,
    field: "model_id",
  },
  {
    label: "an acknowledgement without a request id",
    act: "sample",
    sdk: P,
    route: "asample",
    reply: { json: { id: "r-1" } },
    request: /^asample$/,
    field: "request_id",
  },
  {
    label: "a step count that is negative",
    act: "optim",
    sdk: P,
    route: "optim_step-result",
    reply: { json: { metrics: { step: -2 } } },
    request: /^optim_step \(request r-optim_step-\d+\)$/,
    field: "metrics.step",
  },
  {
    label: "a saved path that is not tinker://",
    act: "save",
    sdk: P,
    route: "save_weights-result",
    reply: { json: { path: "/etc/passwd" } },
    request: /^save_weights \(request r-save_weights-\d+\)$/,
    field: "path",
  },
  // the newer wire (SDK 0.25 to 0.31)
  {
    label: "a sample acknowledgement without per-sequence ids (required from 0.27)",
    act: "sample",
    sdk: NEWEST,
    route: "asample",
    reply: { json: { request_id: "r-sample" } },
    request: /^asample \(request r-sample\)$/,
    field: "sample_sequence_ids",
  },
  {
    label: "fewer per-sequence ids than sequences asked for",
    act: "sample",
    sdk: "0.27.0",
    route: "asample",
    reply: { json: { request_id: "r-sample", sample_sequence_ids: [] } },
    request: /^asample \(request r-sample\)$/,
    field: "sample_sequence_ids",
  },
  {
    label: "per-sequence ids that are not strings, where they are only checked (0.25)",
    act: "score",
    sdk: P,
    route: "asample",
    reply: { json: { request_id: "r-sample", sample_sequence_ids: [7] } },
    request: /^asample \(request r-sample\)$/,
    field: "sample_sequence_ids[0]",
  },
  {
    label: "a dynamic config with a cancel batch of 0",
    act: "open",
    sdk: NEWEST,
    route: "dynamic_config",
    reply: { json: { sample_cancel_max_batch_size: 0 } },
    request: /^client\/dynamic_config$/,
    field: "sample_cancel_max_batch_size",
  },
  {
    label: "a session message that is not a string",
    act: "open",
    sdk: NEWEST,
    route: "session",
    reply: { json: { session_id: "s-1", warning_message: 5 } },
    request: /^create_session$/,
    field: "warning_message",
  },
];

/** Where a save would write (it must not get that far). */
const saves = tempDir("agent-r1-answers-");
after(() => rmSync(saves, { recursive: true, force: true }));

const DATUMS = [1, 2].map(() => ({ tokens: [1, 2], targetTokens: [2, 3], weights: [1, 1] }));

/** Runs a case's act; returns whatever reached the caller (it must be nothing). */
async function act(e: TinkerEngine, what: Act, tokens: unknown[]): Promise<unknown> {
  switch (what) {
    case "sample":
      return e.sample([1, 2], { maxTokens: 4, onToken: (t) => tokens.push(t) });
    case "score":
      return e.computeLogprobs([[1, 2, 3]]);
    case "train":
      return e.forwardBackward(DATUMS, { type: "cross_entropy", aggregation: "sum" });
    case "optim":
      return e.optimStep({ lr: 1e-4 });
    case "save":
      return e.save(join(saves, "checkpoint"));
    default:
      return undefined;
  }
}

test("malformed answers of every class fail the call with a TinkerAnswerError naming the server, the request and the field; nothing reaches the caller", async () => {
  for (const c of CASES) {
    const s = await scriptedTinker({ [c.route]: c.reply });
    const tokens: unknown[] = [];
    let engine: TinkerEngine | undefined;
    try {
      const open = () =>
        TinkerEngine.open({ url: s.url, baseModel: "b", sdkVersion: c.sdk, tokenizerDir: BASE_MODEL, maxRetries: 0 });
      const run = c.act === "open" ? open() : open().then((e) => ((engine = e), act(e, c.act, tokens)));
      await assert.rejects(run, (e: unknown) => {
        assert.ok(e instanceof TinkerAnswerError, `${c.label}: ${String(e)}`);
        assert.ok(e instanceof TinkerError);
        assert.equal(e.server, s.url, c.label);
        assert.match(e.request, c.request, c.label);
        assert.equal(e.field, c.field, `${c.label}: ${e.message}`);
        assert.ok(e.message.startsWith(`${s.url}: ${e.request}: ${c.field} `), `${c.label}: ${e.message}`);
        assert.doesNotMatch(e.message, /\n/, `${c.label}: one line`);
        return true;
      });
      assert.deepEqual(tokens, [], `${c.label}: no token reached the caller`);
    } finally {
      await engine?.dispose();
      await s.close();
    }
  }
});

test("the well-formed answers of the scripted server pass, in each generation (the cases above differ from them only where named)", async () => {
  const s = await scriptedTinker();
  try {
    for (const sdkVersion of ["0.24.1", "0.25.0", "0.31.0"]) {
      const e = await TinkerEngine.open({ url: s.url, baseModel: "b", sdkVersion, tokenizerDir: BASE_MODEL });
      try {
        assert.deepEqual((await e.sample([1, 2], { maxTokens: 4 })).sequences[0].tokens, [5]);
        assert.deepEqual(await e.computeLogprobs([[1, 2, 3]]), [[null, -1, -1]]);
        const fb = await e.forwardBackward(DATUMS, { type: "cross_entropy", aggregation: "sum" });
        assert.deepEqual(fb.logprobs, [
          [-1, -1],
          [-1, -1],
        ]);
        assert.equal((await e.optimStep({ lr: 1e-4 })).step, 1);
      } finally {
        await e.dispose();
      }
    }
  } finally {
    await s.close();
  }
});
