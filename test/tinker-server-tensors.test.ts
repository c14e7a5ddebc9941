/**
 * `serve --tinker` reads the tensors of a request the same way on both paths (JSON bodies and
 * protobuf bodies): a dtype it knows, a shape that holds the values there are, a sparse (CSR)
 * tensor whose indices are sound (then dense, and a loss input must be 1-D), each refusal a 400
 * naming the field. And a forward-only pass takes targets that are not the input shifted by one,
 * answering the logprobs forward_backward gives for the same datum, within the token budget.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { encodeForwardBackwardProto } from "../src/engine/remote/tinker-codec.js";
import {
  decodeMessage,
  DTYPE,
  float32Bytes,
  ForwardBackwardOutputMsg,
  ForwardBackwardRequestMsg,
  int32Bytes,
  int64Bytes,
} from "../src/engine/remote/tinker-proto.js";
import { tempDir } from "./helpers.js";

const root = tempDir("agent-r1-tinker-tensors-");
let srv: RunningTinkerServer;

before(async () => {
  const tiny = join(root, "tiny");
  await initModel({ preset: "tiny", out: tiny, seed: 5 });
  srv = await startTinkerServer({
    baseModels: new Map([["tiny", tiny]]),
    stateDir: join(root, "state"),
    port: 0,
    pollMs: 200,
    maxRequestTokens: 4000,
    engineOptions: { workers: 0 },
    log: () => {},
  });
});

after(async () => {
  await srv?.close();
  rmSync(root, { recursive: true, force: true });
});

type Reply = { status: number; json: Record<string, unknown>; bytes?: Uint8Array };

async function post(path: string, body: unknown, proto = false, accept = "application/json"): Promise<Reply> {
  const res = await fetch(`${srv.url}/api/v1/${path}`, {
    method: "POST",
    headers: { "Content-Type": proto ? "application/x-protobuf" : "application/json", Accept: accept },
    body: (proto ? body : JSON.stringify(body)) as BodyInit,
  });
  const buf = new Uint8Array(await res.arrayBuffer());
  if ((res.headers.get("content-type") ?? "").includes("protobuf")) return { status: res.status, json: {}, bytes: buf };
  return { status: res.status, json: JSON.parse(new TextDecoder().decode(buf)) as Record<string, unknown> };
}

async function result(id: unknown, accept = "application/json"): Promise<Reply> {
  for (let i = 0; i < 300; i++) {
    const r = await post("retrieve_future", { request_id: id }, false, accept);
    if (r.json.type !== "try_again") return r;
  }
  throw new Error(`request ${String(id)} never settled`);
}

let model = "";
let seq = 0;
async function newModel(): Promise<void> {
  const session = (await post("create_session", { tags: [] })).json.session_id;
  const made = await post("create_model", { session_id: session, model_seq_id: 0, base_model: "tiny" });
  model = (await result(made.json.request_id)).json.model_id as string;
  seq = 0;
}

const TOKENS = [11, 12, 13, 14];
const ints = (data: number[]) => ({ data, dtype: "int64" });

/** A JSON forward_backward body of one datum with these loss inputs. */
const jsonBody = (inputs: Record<string, unknown>) => ({
  model_id: model,
  seq_id: seq + 1,
  forward_backward_input: {
    data: [{ model_input: { chunks: [{ type: "encoded_text", tokens: TOKENS }] }, loss_fn_inputs: inputs }],
    loss_fn: "cross_entropy",
  },
});

/** A protobuf forward_backward body of one datum with these (raw) loss input tensors. */
const protoBody = (inputs: Record<string, unknown>): Uint8Array =>
  ForwardBackwardRequestMsg.encode(
    ForwardBackwardRequestMsg.fromObject({
      model_id: model,
      seq_id: seq + 1,
      loss_fn: "cross_entropy",
      data: [{ model_input: [{ encoded_text: { tokens: int32Bytes(TOKENS) } }], loss_fn_inputs: inputs }],
    } as Record<string, unknown>),
  ).finish();

const targets64 = { dense: int64Bytes([12, 13, 14, 15]), dtype: DTYPE.int64 };

function refused(r: Reply, detail: RegExp, label: string): void {
  assert.equal(r.status, 400, `${label}: ${JSON.stringify(r.json)}`);
  assert.match(String(r.json.detail), detail, label);
  assert.doesNotMatch(String(r.json.detail), /\n/, `${label}: one line`);
}

test("shapes and sparse tensors are checked on the JSON path and the protobuf path alike, each a 400 naming the field", async () => {
  await newModel();
  const T = "forward_backward_input.data[0].loss_fn_inputs";
  const jsonCases: [string, Record<string, unknown>, RegExp][] = [
    [
      "a shape that does not hold the data",
      { target_tokens: { ...ints([12, 13, 14, 15]), shape: [5] } },
      new RegExp(
        `${T.replace(/[.[\]]/g, "\\$&")}\\.target_tokens\\.shape is \\[5\\], which holds 5 values, but the data holds 4`,
      ),
    ],
    [
      "a 2-D loss input",
      { target_tokens: { ...ints([12, 13, 14, 15]), shape: [2, 2] } },
      /loss_fn_inputs\.target_tokens has shape \[2, 2\]; a loss input holds one value per input token \(shape \[4\]\)/,
    ],
    [
      "sparse row pointers past the values",
      {
        target_tokens: ints([12, 13, 14, 15]),
        weights: { data: [1], dtype: "float32", shape: [1, 4], sparse_crow_indices: [0, 2], sparse_col_indices: [0] },
      },
      /loss_fn_inputs\.weights\.sparse_crow_indices\[1\] is 2, but there are 1 values/,
    ],
    [
      "sparse column indices out of the row",
      {
        target_tokens: ints([12, 13, 14, 15]),
        weights: { data: [1], dtype: "float32", shape: [1, 4], sparse_crow_indices: [0, 1], sparse_col_indices: [4] },
      },
      /loss_fn_inputs\.weights\.sparse_col_indices\[0\] is 4, outside the 4 columns/,
    ],
    [
      "half a sparse tensor",
      { target_tokens: ints([12, 13, 14, 15]), weights: { data: [1], dtype: "float32", sparse_crow_indices: [0, 1] } },
      /loss_fn_inputs\.weights gives only one of sparse_crow_indices and sparse_col_indices/,
    ],
    [
      "a sound sparse tensor (2-D, so not a loss input)",
      {
        target_tokens: ints([12, 13, 14, 15]),
        weights: {
          data: [1, 1],
          dtype: "float32",
          shape: [1, 4],
          sparse_crow_indices: [0, 2],
          sparse_col_indices: [1, 3],
        },
      },
      /loss_fn_inputs\.weights has shape \[1, 4\]; a loss input holds one value per input token/,
    ],
  ];
  for (const [label, inputs, detail] of jsonCases)
    refused(await post("forward_backward", jsonBody(inputs)), detail, `JSON: ${label}`);

  const P = "data[0].loss_fn_inputs";
  const protoCases: [string, Record<string, unknown>, RegExp][] = [
    [
      "an unspecified dtype",
      { target_tokens: { dense: int64Bytes([12, 13, 14, 15]) } },
      new RegExp(`^${P.replace(/[.[\]]/g, "\\$&")}\\.target_tokens\\.dtype is unspecified`),
    ],
    [
      "an unknown dtype",
      { target_tokens: { dense: int64Bytes([12, 13, 14, 15]), dtype: 11 } },
      /target_tokens\.dtype is 11, not a dtype of the protocol/,
    ],
    [
      "a shape that does not hold the data",
      { target_tokens: { ...targets64, shape: [3] } },
      /target_tokens\.shape is \[3\], which holds 3 values, but the data holds 4/,
    ],
    [
      "a 2-D loss input",
      { target_tokens: { ...targets64, shape: [4, 1] } },
      /loss_fn_inputs\.target_tokens has shape \[4, 1\]; a loss input holds one value per input token/,
    ],
    [
      "values that are not whole float32 values",
      { target_tokens: targets64, weights: { dense: new Uint8Array(6), dtype: DTYPE.float32 } },
      /weights\.dense holds 6 bytes, not a whole number of 4-byte float32 values/,
    ],
    [
      "sparse without a shape",
      {
        target_tokens: targets64,
        weights: {
          sparse_csr: { values: float32Bytes([1]), crow_indices: int64Bytes([0, 1]), col_indices: int64Bytes([0]) },
          dtype: DTYPE.float32,
        },
      },
      /weights\.shape is missing; a sparse tensor needs a 2-D shape/,
    ],
    [
      "sparse column indices not increasing in a row",
      {
        target_tokens: targets64,
        weights: {
          sparse_csr: {
            values: float32Bytes([1, 1]),
            crow_indices: int64Bytes([0, 2]),
            col_indices: int64Bytes([2, 1]),
          },
          dtype: DTYPE.float32,
          shape: [1, 4],
        },
      },
      /weights\.sparse_csr\.col_indices\[1\] is 1, not after the column before it in row 0 \(2\)/,
    ],
    [
      "a sound sparse tensor (2-D, so not a loss input)",
      {
        target_tokens: targets64,
        weights: {
          sparse_csr: { values: float32Bytes([1]), crow_indices: int64Bytes([0, 1]), col_indices: int64Bytes([2]) },
          dtype: DTYPE.float32,
          shape: [1, 4],
        },
      },
      /loss_fn_inputs\.weights has shape \[1, 4\]/,
    ],
  ];
  for (const [label, inputs, detail] of protoCases)
    refused(await post("forward_backward", protoBody(inputs), true), detail, `protobuf: ${label}`);

  // A well-formed request still trains, on either path (the refused ones left seq_id 1 free).
  const ok = await post("forward_backward", jsonBody({ target_tokens: { ...ints([12, 13, 14, 15]), shape: [4] } }));
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  assert.ok(Array.isArray((await result(ok.json.request_id)).json.loss_fn_outputs));
});

/** Logprobs of a forward_backward-style answer (JSON) per datum. */
const logprobsOf = (r: Reply) =>
  (r.json.loss_fn_outputs as { logprobs: { data: number[] } }[]).map((o) => o.logprobs.data);

test("forward-only passes take targets that are not the input shifted by one, and answer what forward_backward answers", async () => {
  await newModel();
  // Targets: position 1's is the next input token (13); the others are not.
  const targets = [40, 13, 7, 900];
  const datum = {
    model_input: { chunks: [{ type: "encoded_text", tokens: TOKENS }] },
    loss_fn_inputs: { target_tokens: ints(targets) },
  };
  const input = {
    data: [datum, { ...datum, loss_fn_inputs: { target_tokens: ints([12, 13, 14, 15]) } }],
    loss_fn: "cross_entropy",
  };
  const fwd = await post("forward", { model_id: model, seq_id: ++seq, forward_input: input });
  assert.equal(fwd.status, 200, JSON.stringify(fwd.json));
  const forward = logprobsOf(await result(fwd.json.request_id));
  // The protobuf generation's forward: forward_backward with forward_only, answered as protobuf.
  const pb = encodeForwardBackwardProto({
    modelId: model,
    seqId: ++seq,
    lossFn: "cross_entropy",
    forwardOnly: true,
    data: [{ tokens: TOKENS, inputs: { target_tokens: { data: targets, dtype: "int64" } } }],
  });
  const viaProto = await post("forward_backward", pb, true);
  assert.equal(viaProto.status, 200, JSON.stringify(viaProto.json));
  const bytes = (await result(viaProto.json.request_id, "application/x-protobuf")).bytes!;
  const rec = (decodeMessage(ForwardBackwardOutputMsg, bytes).loss_fn_outputs as Record<string, unknown>[])[0];
  const field = (rec.fields as Record<string, { data: Uint8Array }>).logprobs;
  const protoLp = Array.from(new Float32Array(Uint8Array.from(field.data).buffer));
  // forward_backward on the same weights (no step between) gives the reference logprobs.
  const fb = await post("forward_backward", { model_id: model, seq_id: ++seq, forward_backward_input: input });
  const trained = logprobsOf(await result(fb.json.request_id));
  for (const [label, got, want] of [
    ["forward, datum 0", forward[0], trained[0]],
    ["forward, datum 1 (shifted)", forward[1], trained[1]],
    ["forward_only over protobuf", protoLp, trained[0]],
  ] as [string, number[], number[]][]) {
    assert.equal(got.length, 4, label);
    got.forEach((x, j) => assert.ok(Math.abs(x - want[j]) < 1e-4, `${label}, position ${j}: ${x} vs ${want[j]}`));
  }
  assert.ok(new Set(trained[0]).size > 1, "the targets score differently");
});

test("a forward-only pass whose targets would take more scoring than the token budget is refused before any work, naming the limit", async () => {
  await newModel();
  const tokens = Array.from({ length: 100 }, (_, i) => 10 + i);
  const r = await post("forward", {
    model_id: model,
    seq_id: ++seq,
    forward_input: {
      data: [
        {
          model_input: { chunks: [{ type: "encoded_text", tokens }] },
          loss_fn_inputs: { target_tokens: ints(tokens.map(() => 3)) },
        },
      ],
      loss_fn: "cross_entropy",
    },
  });
  refused(
    r,
    /forward_input\.data: this request may take up to \d+ tokens \(100 sequences scored for the targets of 1 datums\); this server allows at most 4000/,
    "budget",
  );
  seq--; // refused: its seq_id is free again
});
