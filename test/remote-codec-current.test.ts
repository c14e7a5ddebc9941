/**
 * The Tinker wire after SDK 0.25, without a server: the bytes and JSON the newest SDK (0.31) makes
 * and reads, built here by hand from the schema (field numbers, wire types, little-endian blobs)
 * rather than with our own encoder, so a wrong field number fails even when our encoder and
 * decoder agree; then the readers of the new answers (sample ids, retrieve_futures, the dynamic
 * config, the client config's supported versions, the session's messages), each fault one line
 * naming the field; and the version table.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  decodeForwardBackwardProto,
  encodeForwardBackwardProto,
  encodeSampleResponseProto,
} from "../src/engine/remote/tinker-codec.js";
import { readSampleJson, readSampleProto } from "../src/engine/remote/tinker-results.js";
import { Answer } from "../src/engine/remote/tinker-answer.js";
import { TinkerAnswerError } from "../src/engine/remote/tinker-error.js";
import { matchSequences, readSampleIds } from "../src/engine/remote/tinker-sample-ids.js";
import { readCompletions } from "../src/engine/remote/tinker-session-poller.js";
import { DYNAMIC_DEFAULTS, readDynamicConfig } from "../src/engine/remote/tinker-cancel.js";
import { readClientFlags, readSession } from "../src/engine/remote/tinker-handshake.js";
import { jwtExpiry } from "../src/engine/remote/tinker-auth.js";
import { sdkVersionProblem, wireFeatures } from "../src/engine/remote/tinker-versions.js";
import { parseConfig } from "../src/train/load-config.js";

const A = new Answer("http://test", "asample (request r-1)");
const hex = (b: Uint8Array | number[]) => Buffer.from(b).toString("hex");

// ---- a protobuf writer by hand: tags, varints, length-delimited fields, little-endian blobs ----

function varint(n: number): number[] {
  const out: number[] = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return out;
}
const tag = (field: number, wire: number) => varint((field << 3) | wire);
const len = (field: number, payload: number[]) => [...tag(field, 2), ...varint(payload.length), ...payload];
const num = (field: number, n: number) => [...tag(field, 0), ...varint(n)];
const str = (field: number, s: string) => len(field, [...Buffer.from(s, "utf8")]);
const f64 = (field: number, x: number) => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(x);
  return [...tag(field, 1), ...b];
};
const i32s = (xs: number[]) => xs.flatMap((x) => [...new Uint8Array(Int32Array.of(x).buffer)]);
const f32s = (xs: number[]) => xs.flatMap((x) => [...new Uint8Array(Float32Array.of(x).buffer)]);
const i64s = (xs: number[]) => xs.flatMap((x) => [...new Uint8Array(BigInt64Array.of(BigInt(x)).buffer)]);

test("SampleResponse as SDK 0.31 writes it (prompt_cache_hit_tokens, field 4) decodes, and ours encodes to the same bytes", () => {
  // sequences = 1 {stop_reason = 1 (length), tokens = 2, logprobs = 3}; prompt_logprobs = 2; prompt_cache_hit_tokens = 4.
  const bytes = [
    ...len(1, [...num(1, 1), ...len(2, i32s([11, 12])), ...len(3, f32s([-0.5, -1.25]))]),
    ...len(1, [...len(2, i32s([13])), ...len(3, f32s([-2]))]),
    ...len(2, f32s([NaN, -3, -0.25])),
    ...num(4, 2),
  ];
  const r = readSampleProto(Uint8Array.from(bytes), A);
  assert.deepEqual(r, {
    sequences: [
      { tokens: [11, 12], logprobs: [-0.5, -1.25], stopReason: "length" },
      { tokens: [13], logprobs: [-2], stopReason: "stop" },
    ],
    promptLogprobs: [null, -3, -0.25],
    promptCacheHitTokens: 2,
  });
  assert.equal(hex(encodeSampleResponseProto(r)), hex(bytes));
  // A count of any varint width reads as a count; a negative one (int64 -1) is refused.
  assert.equal(readSampleProto(Uint8Array.from(num(4, 2 ** 40)), A).promptCacheHitTokens, 2 ** 40);
  const negative = Uint8Array.from([...tag(4, 0), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
  assert.throws(() => readSampleProto(negative, A), /prompt_cache_hit_tokens is -1, not a count of prompt tokens$/);
});

test("a ForwardBackwardRequest with fields a 0.31 SDK adds past ours (loss_fn_config_v2, provenance spans) decodes as the same request", () => {
  // Datum = 3 {model_input = 1 [Chunk {encoded_text = 1 {tokens = 1}}], loss_fn_inputs = 2 {key: Tensor {dense = 1, dtype = 3, shape = 4}}}.
  const tensor = [...len(1, i64s([6, 7, 8])), ...num(3, 2), ...len(4, varint(3))];
  const datum = [
    ...len(1, len(1, len(1, i32s([5, 6, 7])))),
    ...len(2, [...str(1, "target_tokens"), ...len(2, tensor)]),
  ];
  const ours = [
    ...str(1, "model-1"),
    ...num(2, 7),
    ...len(3, datum),
    ...str(4, "importance_sampling"),
    ...len(5, [...str(1, "clip_low_threshold"), ...f64(2, 0.75)]),
  ];
  // What 0.31 adds after them: a datum provenance span (Datum field 3) and the loss config again as
  // loss_fn_config_v2 (field 7: name -> {number}); a reader that does not know them skips them.
  const span = len(3, len(2, [...str(1, "seq-1"), ...num(2, 0), ...num(3, 3)]));
  const newest = [
    ...str(1, "model-1"),
    ...num(2, 7),
    ...len(3, [...datum, ...span]),
    ...str(4, "importance_sampling"),
    ...len(5, [...str(1, "clip_low_threshold"), ...f64(2, 0.75)]),
    ...len(7, [...str(1, "clip_low_threshold"), ...len(2, f64(1, 0.75))]),
  ];
  const want = {
    modelId: "model-1",
    seqId: 7,
    lossFn: "importance_sampling",
    lossFnConfig: { clip_low_threshold: 0.75 },
    forwardOnly: false,
    data: [{ tokens: [5, 6, 7], inputs: { target_tokens: { data: [6, 7, 8], dtype: "int64", shape: [3] } } }],
  };
  assert.deepEqual(decodeForwardBackwardProto(Uint8Array.from(newest)), want);
  assert.deepEqual(decodeForwardBackwardProto(Uint8Array.from(ours)), want);
  assert.equal(hex(encodeForwardBackwardProto(want as Parameters<typeof encodeForwardBackwardProto>[0])), hex(ours));
});

test("sample ids: the acknowledgement's are checked (count, strings, distinct; required from 0.27) and go to the sequences by position or by name", () => {
  const ack = { request_id: "r-1", sample_sequence_ids: ["a", "b"] };
  assert.deepEqual(readSampleIds(ack, 2, "required", A), ["a", "b"]);
  assert.equal(readSampleIds({ request_id: "r-1" }, 2, "checked", A), undefined);
  assert.equal(readSampleIds({ request_id: "r-1", sample_sequence_ids: 5 }, 2, "none", A), undefined);
  const fault = (ack2: Record<string, unknown>, re: RegExp, mode: "checked" | "required" = "required") =>
    assert.throws(
      () => readSampleIds(ack2, 2, mode, A),
      (e: unknown) =>
        e instanceof TinkerAnswerError &&
        re.test(e.message) &&
        e.message.startsWith("http://test: asample (request r-1): "),
    );
  fault({}, /sample_sequence_ids is missing; from SDK 0\.27/);
  fault({ sample_sequence_ids: ["a"] }, /sample_sequence_ids holds 1 ids; 2 sequences were asked for/, "checked");
  fault({ sample_sequence_ids: ["a", "a"] }, /sample_sequence_ids\[1\] is "a" again/);
  fault({ sample_sequence_ids: ["a", ""] }, /sample_sequence_ids\[1\] is "", not a non-empty string/);
  fault({ sample_sequence_ids: "ab" }, /sample_sequence_ids is "ab", not a list of ids/);

  const seq = (t: number, id?: string) => ({
    tokens: [t],
    logprobs: [-1],
    stopReason: "stop" as const,
    ...(id ? { sequenceId: id } : {}),
  });
  // Protobuf results name no sequence: by position, as the SDK stamps them.
  assert.deepEqual(
    matchSequences({ sequences: [seq(1), seq(2)], promptLogprobs: null }, ["a", "b"], A).sequences.map(
      (s) => s.sequenceId,
    ),
    ["a", "b"],
  );
  // A JSON result that names them, in another order: put in the acknowledgement's order.
  const json = readSampleJson(
    {
      sequences: [
        { tokens: [2], logprobs: [-1], stop_reason: "stop", sequence_id: "b" },
        { tokens: [1], logprobs: [-1], stop_reason: "stop", sequence_id: "a" },
      ],
    },
    A,
  );
  assert.deepEqual(
    matchSequences(json, ["a", "b"], A).sequences.map((s) => [s.sequenceId, s.tokens[0]]),
    [
      ["a", 1],
      ["b", 2],
    ],
  );
  assert.throws(
    () => matchSequences({ sequences: [seq(1, "a"), seq(2, "c")], promptLogprobs: null }, ["a", "b"], A),
    /sequences\[1\]\.sequence_id is "c", not one of the acknowledged ids/,
  );
  assert.throws(
    () => matchSequences({ sequences: [seq(1, "a"), seq(2, "a")], promptLogprobs: null }, ["a", "b"], A),
    /sequences\[1\]\.sequence_id is "a" again/,
  );
  assert.throws(
    () => matchSequences({ sequences: [seq(1)], promptLogprobs: null }, ["a", "b"], A),
    /sequences holds 1 sequences for the 2 ids of the acknowledgement/,
  );
  assert.throws(
    () => readSampleJson({ sequences: [{ tokens: [1], stop_reason: "stop", sequence_id: 3 }] }, A),
    /sequences\[0\]\.sequence_id is 3, not a non-empty string/,
  );
});

test("retrieve_futures answers, the dynamic config, the client config's versions and the session's messages are read strictly", () => {
  const P = new Answer("http://test", "retrieve_futures (sampling session s-1)");
  assert.deepEqual(
    readCompletions(
      {
        completions: [
          { state: "finished", request_id: "r-1", response_payload_uncompressed_size: 10 },
          { state: "failed", request_id: "r-2" },
        ],
        cursor: 7,
      },
      P,
    ),
    {
      completions: [
        { state: "finished", requestId: "r-1" },
        { state: "failed", requestId: "r-2" },
      ],
      cursor: 7,
    },
  );
  assert.throws(
    () => readCompletions({ completions: [{ state: "done", request_id: "r" }], cursor: 1 }, P),
    /completions\[0\]\.state is "done", not "finished" or "failed"$/,
  );
  assert.throws(() => readCompletions({ completions: [], cursor: -1 }, P), /cursor is -1, not a count$/);
  assert.throws(() => readCompletions({ cursor: 1 }, P), /completions is missing$/);
  assert.throws(
    () => readCompletions({ completions: [{ state: "failed" }], cursor: 1 }, P),
    /completions\[0\]\.request_id is missing$/,
  );

  const D = new Answer("http://test", "client/dynamic_config");
  assert.deepEqual(readDynamicConfig({}, D), DYNAMIC_DEFAULTS);
  assert.deepEqual(
    readDynamicConfig(
      { refresh_interval_sec: 5, sample_cancel_enabled: true, sample_cancel_max_batch_size: 3, later_flag: 1 },
      D,
    ),
    {
      refreshMs: 5000,
      cancelEnabled: true,
      cancelBatch: 3,
    },
  );
  assert.throws(
    () => readDynamicConfig({ sample_cancel_max_batch_size: 0 }, D),
    /sample_cancel_max_batch_size is 0, not an integer >= 1$/,
  );
  assert.throws(
    () => readDynamicConfig({ sample_cancel_enabled: "yes" }, D),
    /sample_cancel_enabled is "yes", not true or false$/,
  );

  const flags = readClientFlags(
    {
      pjwt_auth_enabled: true,
      sample_use_retrieve_futures: true,
      supported_sdk_versions: { oldest: "0.24.0", newest: "0.31.0" },
    },
    "0.31.0",
    "http://test",
  );
  assert.equal(flags.jwt, true);
  assert.equal(flags.retrieveFutures, true);
  assert.throws(
    () => readClientFlags({ supported_sdk_versions: { oldest: "0.24.0", newest: "0.25.0" } }, "0.31.0", "http://test"),
    (e: unknown) =>
      (e as Error).message ===
      "http://test: this server speaks Tinker SDK 0.24.0 to 0.25.0, not 0.31.0 (engine.tinker.sdkVersion)",
  );
  assert.throws(
    () => readClientFlags({ supported_sdk_versions: { oldest: 24 } }, "0.31.0", "http://test"),
    /supported_sdk_versions\.oldest is 24, not a version x\.y\.z$/,
  );

  const logs: string[] = [];
  assert.equal(
    readSession({ session_id: "s-1", info_message: "hello", warning_message: "0.25 is\nold" }, "http://test", (l) =>
      logs.push(l),
    ),
    "s-1",
  );
  assert.deepEqual(logs, ["tinker: http://test says: hello", "tinker: warning from http://test: 0.25 is old"]);
  assert.throws(
    () => readSession({ session_id: "s-1", error_message: "SDK 0.24 is no longer served" }, "http://test"),
    (e: unknown) =>
      e instanceof Error &&
      e.message === "http://test: create_session: the server refuses this client: SDK 0.24 is no longer served",
  );
  assert.throws(
    () => readSession({ session_id: "s-1", warning_message: 3 }, "http://test"),
    /warning_message is 3, not a message \(a string\)$/,
  );
});

test("the version table: what each generation gets, and versions past the newest published are refused (config and client)", () => {
  assert.deepEqual(wireFeatures("0.24.1"), {
    protobuf: false,
    sampleIds: "none",
    sessionPolling: false,
    cancel: false,
  });
  assert.deepEqual(wireFeatures("0.25.0"), {
    protobuf: true,
    sampleIds: "checked",
    sessionPolling: false,
    cancel: false,
  });
  assert.deepEqual(wireFeatures("0.27.0"), {
    protobuf: true,
    sampleIds: "required",
    sessionPolling: false,
    cancel: false,
  });
  assert.deepEqual(wireFeatures("0.31.0"), {
    protobuf: true,
    sampleIds: "required",
    sessionPolling: true,
    cancel: true,
  });
  assert.equal(sdkVersionProblem("0.31.0"), undefined);
  assert.match(
    sdkVersionProblem("0.32.0")!,
    /0\.32\.0 is newer than 0\.31\.0, the newest SDK whose source is published/,
  );
  assert.match(sdkVersionProblem("0.23.0")!, /older than 0\.24\.0/);
  assert.equal(
    parseConfig({
      model: { tokenizer: "t" },
      engine: { kind: "tinker", tinker: { baseModel: "b", sdkVersion: "0.31.0" } },
    }).engine.tinker?.sdkVersion,
    "0.31.0",
  );
  assert.throws(
    () =>
      parseConfig({
        model: { tokenizer: "t" },
        engine: { kind: "tinker", tinker: { baseModel: "b", sdkVersion: "0.38.0" } },
      }),
    /engine\.tinker\.sdkVersion.*0\.38\.0 is newer than 0\.31\.0/,
  );
  // A JWT's expiry, read without trusting anything else in it.
  const jwt = (claims: object) => `e30.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`;
  assert.equal(jwtExpiry(jwt({ exp: 100 })), 100_000);
  assert.equal(jwtExpiry(jwt({ sub: "x" })), undefined);
  assert.equal(jwtExpiry("tml-abc"), undefined);
});
