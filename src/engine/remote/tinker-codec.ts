/**
 * Tinker's wire objects and their two encodings, shared by the client (tinker-engine.ts) and
 * `agent-r1 serve --tinker` (src/serve/tinker/):
 *  - JSON (SDK ≤ 0.24.1): tensors as `{data, dtype, shape}` with numbers in lists;
 *  - protobuf (SDK ≥ 0.25; tinker-proto.ts): forward_backward requests, and the SampleResponse and
 *    ForwardBackwardOutput results, with tensors as little-endian byte blobs.
 * The wire types here are the decoded, encoding-independent form both sides work with. What the
 * client writes and the server reads (requests), and what the server writes (results), are here;
 * how the client reads results is tinker-results.ts, tensors read strictly tinker-tensor.ts.
 */
import { TinkerError, type Fault } from "./tinker-error.js";
import {
  DTYPE,
  decodeMessage,
  encodeMessage,
  float32Bytes,
  ForwardBackwardOutputMsg,
  ForwardBackwardRequestMsg,
  int32Bytes,
  int64Bytes,
  SampleResponseMsg,
} from "./tinker-proto.js";
import { protoTensor, typedBlob, type WireTensor } from "./tinker-tensor.js";

export type { WireTensor } from "./tinker-tensor.js";

/** A datum: its input tokens (one encoded-text chunk) and its loss inputs by name. */
export interface WireDatum {
  tokens: number[];
  inputs: Record<string, WireTensor>;
}

export interface ForwardBackwardRequest {
  modelId: string;
  seqId: number;
  data: WireDatum[];
  lossFn: string;
  lossFnConfig?: Record<string, number>;
  /** Forward only: compute losses and outputs without accumulating gradients. */
  forwardOnly?: boolean;
}

export interface ForwardBackwardOutput {
  /** Per datum, its output tensors by name (`logprobs`, `elementwise_loss`). */
  outputs: Record<string, number[]>[];
  /** Keys `name:reduction` (e.g. `loss:sum`), as the SDK requires. */
  metrics: Record<string, number>;
}

export interface WireSequence {
  tokens: number[];
  logprobs: number[] | null;
  stopReason: "stop" | "length";
  /** The server's id of the sequence (SDK 0.25 on: from the acknowledgement, or a JSON result's `sequence_id`). */
  sequenceId?: string;
}

export interface SampleResponse {
  sequences: WireSequence[];
  /** One per prompt token, the first null; present when asked for. */
  promptLogprobs: (number | null)[] | null;
  /** Prompt tokens the server took from its prefix cache (SampleResponse field 4), where it says. */
  promptCacheHitTokens?: number;
}

// ---- JSON ----

interface JsonDatum {
  model_input: { chunks: { type?: string; tokens?: unknown }[] };
  loss_fn_inputs: Record<string, { data: unknown; dtype: unknown; shape?: unknown }>;
}

export function datumToJson(d: WireDatum): JsonDatum {
  return {
    model_input: { chunks: [{ type: "encoded_text", tokens: d.tokens }] },
    loss_fn_inputs: Object.fromEntries(
      Object.entries(d.inputs).map(([k, t]) => [
        k,
        { data: t.data, dtype: t.dtype, shape: t.shape ?? [t.data.length] },
      ]),
    ),
  };
}

export function forwardBackwardToJson(r: ForwardBackwardRequest): Record<string, unknown> {
  const input = {
    data: r.data.map(datumToJson),
    loss_fn: r.lossFn,
    ...(r.lossFnConfig ? { loss_fn_config: r.lossFnConfig } : {}),
  };
  return { [r.forwardOnly ? "forward_input" : "forward_backward_input"]: input, model_id: r.modelId, seq_id: r.seqId };
}

export function forwardBackwardOutputToJson(o: ForwardBackwardOutput): Record<string, unknown> {
  return {
    loss_fn_output_type: "ArrayRecord",
    loss_fn_outputs: o.outputs.map((rec) =>
      Object.fromEntries(Object.entries(rec).map(([k, v]) => [k, { data: v, dtype: "float32", shape: [v.length] }])),
    ),
    metrics: o.metrics,
  };
}

export function sampleResponseToJson(r: SampleResponse): Record<string, unknown> {
  return {
    type: "sample",
    sequences: r.sequences.map((s) => ({ tokens: s.tokens, logprobs: s.logprobs, stop_reason: s.stopReason })),
    prompt_logprobs: r.promptLogprobs,
  };
}

// ---- protobuf ----

function tensorToProto(t: WireTensor): Record<string, unknown> {
  return {
    dense: t.dtype === "int64" ? int64Bytes(t.data) : float32Bytes(t.data),
    dtype: t.dtype === "int64" ? DTYPE.int64 : DTYPE.float32,
    shape: t.shape ?? [t.data.length],
  };
}

export function encodeForwardBackwardProto(r: ForwardBackwardRequest): Uint8Array {
  return encodeMessage(ForwardBackwardRequestMsg, {
    model_id: r.modelId,
    seq_id: r.seqId,
    loss_fn: r.lossFn,
    loss_fn_config: r.lossFnConfig ?? {},
    forward_only: r.forwardOnly ?? false,
    data: r.data.map((d) => ({
      model_input: [{ encoded_text: { tokens: int32Bytes(d.tokens) } }],
      loss_fn_inputs: Object.fromEntries(Object.entries(d.inputs).map(([k, t]) => [k, tensorToProto(t)])),
    })),
  });
}

/** A field of a request `serve --tinker` refuses: a 400 naming it. */
const requestFault: Fault = (field, problem) => new TinkerError(`${field} ${problem}`);

/**
 * A protobuf ForwardBackwardRequest as `serve --tinker` reads it: a body that does not decode is a
 * 422; a chunk that is not encoded text, token ids that are not whole int32 values, and tensors
 * whose dtype, shape or sparse indices are wrong (tinker-tensor.ts) are 400s naming the field.
 */
export function decodeForwardBackwardProto(bytes: Uint8Array): ForwardBackwardRequest {
  let m: Record<string, unknown>;
  try {
    m = decodeMessage(ForwardBackwardRequestMsg, bytes);
  } catch (e) {
    throw new TinkerError(`the ForwardBackwardRequest body does not decode: ${(e as Error).message}`, undefined, 422);
  }
  const data = (m.data as Record<string, unknown>[]).map((d, i) => {
    const tokens: number[] = [];
    (d.model_input as Record<string, unknown>[]).forEach((c, j) => {
      const text = c.encoded_text as { tokens?: Uint8Array } | undefined;
      if (!text) throw requestFault(`data[${i}].model_input[${j}]`, "is not an encoded_text chunk");
      tokens.push(
        ...typedBlob("int32", text.tokens ?? new Uint8Array(), `data[${i}].model_input[${j}].tokens`, requestFault),
      );
    });
    const inputs = Object.fromEntries(
      Object.entries(d.loss_fn_inputs as Record<string, Record<string, unknown>>).map(([k, t]) => [
        k,
        protoTensor(t, `data[${i}].loss_fn_inputs.${k}`, requestFault),
      ]),
    );
    return { tokens, inputs };
  });
  return {
    modelId: m.model_id as string,
    seqId: m.seq_id as number,
    data,
    lossFn: m.loss_fn as string,
    lossFnConfig: m.loss_fn_config as Record<string, number>,
    forwardOnly: m.forward_only as boolean,
  };
}

/** One ArrayRecord holding every output name, each a BatchedTensor with int64 byte offsets (n + 1). */
export function encodeForwardBackwardOutputProto(o: ForwardBackwardOutput): Uint8Array {
  const names = [...new Set(o.outputs.flatMap((r) => Object.keys(r)))];
  const fields: Record<string, unknown> = {};
  for (const name of names) {
    const rows = o.outputs.map((r) => r[name] ?? []);
    const offsets = [0];
    for (const r of rows) offsets.push(offsets[offsets.length - 1] + r.length * 4);
    fields[name] = { data: float32Bytes(rows.flat()), offsets: int64Bytes(offsets), dtype: DTYPE.float32 };
  }
  return encodeMessage(ForwardBackwardOutputMsg, {
    loss_fn_output_type: "ArrayRecord",
    loss_fn_outputs: o.outputs.length ? [{ type_tag: "ArrayRecord", fields, num_datums: o.outputs.length }] : [],
    metrics: o.metrics,
  });
}

export function encodeSampleResponseProto(r: SampleResponse): Uint8Array {
  return encodeMessage(SampleResponseMsg, {
    sequences: r.sequences.map((s) => ({
      stop_reason: s.stopReason === "length" ? 1 : 0,
      tokens: int32Bytes(s.tokens),
      ...(s.logprobs ? { logprobs: float32Bytes(s.logprobs) } : {}),
    })),
    ...(r.promptLogprobs ? { prompt_logprobs: float32Bytes(r.promptLogprobs.map((x) => (x === null ? NaN : x))) } : {}),
    ...(r.promptCacheHitTokens ? { prompt_cache_hit_tokens: r.promptCacheHitTokens } : {}),
  });
}
