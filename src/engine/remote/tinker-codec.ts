/**
 * Tinker's wire objects and their two encodings, shared by the client (tinker-engine.ts) and
 * `agent-r1 serve --tinker` (src/serve/tinker/):
 *  - JSON (SDK ≤ 0.24.1): tensors as `{data, dtype, shape}` with numbers in lists;
 *  - protobuf (SDK ≥ 0.25; tinker-proto.ts): forward_backward requests, and the SampleResponse and
 *    ForwardBackwardOutput results, with tensors as little-endian byte blobs.
 * The wire types here are the decoded, encoding-independent form both sides work with.
 */
import { TinkerError } from "./tinker-error.js";
import {
  DTYPE,
  decodeMessage,
  encodeMessage,
  float32Bytes,
  ForwardBackwardOutputMsg,
  ForwardBackwardRequestMsg,
  int32Bytes,
  int64Bytes,
  readFloat32,
  readInt32,
  readInt64,
  SampleResponseMsg,
} from "./tinker-proto.js";

/** A 1-D tensor of the wire (`TensorData`): int64 for token ids, float32 for the rest. */
export interface WireTensor {
  data: number[];
  dtype: "float32" | "int64";
  shape?: number[];
}

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
}

export interface SampleResponse {
  sequences: WireSequence[];
  /** One per prompt token, the first null; present when asked for. */
  promptLogprobs: (number | null)[] | null;
}

// ---- JSON ----

interface JsonDatum {
  model_input: { chunks: { type?: string; tokens?: unknown }[] };
  loss_fn_inputs: Record<string, { data: unknown; dtype: unknown; shape?: unknown }>;
}

const isNumbers = (x: unknown): x is number[] => Array.isArray(x) && x.every((v) => typeof v === "number");

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

/** A JSON datum from a request; `where` names it in errors ("data[3]"). */
export function datumFromJson(raw: unknown, where: string): WireDatum {
  const d = raw as Partial<JsonDatum> | null;
  const chunks = d?.model_input?.chunks;
  if (!Array.isArray(chunks)) throw new TinkerError(`${where}.model_input.chunks must be a list`);
  const tokens: number[] = [];
  chunks.forEach((c, i) => {
    if ((c.type ?? "encoded_text") !== "encoded_text" || !isNumbers(c.tokens))
      throw new TinkerError(`${where}.model_input.chunks[${i}] must be an encoded_text chunk with integer tokens`);
    tokens.push(...c.tokens);
  });
  const inputs: Record<string, WireTensor> = {};
  for (const [k, t] of Object.entries(d?.loss_fn_inputs ?? {})) {
    if (!t || !isNumbers(t.data) || (t.dtype !== "float32" && t.dtype !== "int64"))
      throw new TinkerError(`${where}.loss_fn_inputs.${k} must be {data: number[], dtype: "float32" | "int64"}`);
    inputs[k] = { data: t.data, dtype: t.dtype };
  }
  return { tokens, inputs };
}

export function forwardBackwardToJson(r: ForwardBackwardRequest): Record<string, unknown> {
  const input = {
    data: r.data.map(datumToJson),
    loss_fn: r.lossFn,
    ...(r.lossFnConfig ? { loss_fn_config: r.lossFnConfig } : {}),
  };
  return { [r.forwardOnly ? "forward_input" : "forward_backward_input"]: input, model_id: r.modelId, seq_id: r.seqId };
}

export function forwardBackwardFromJson(body: Record<string, unknown>, forwardOnly: boolean): ForwardBackwardRequest {
  const input = (body[forwardOnly ? "forward_input" : "forward_backward_input"] ?? body.forward_backward_input) as
    { data?: unknown; loss_fn?: unknown; loss_fn_config?: unknown } | undefined;
  if (!input || !Array.isArray(input.data))
    throw new TinkerError(`${forwardOnly ? "forward_input" : "forward_backward_input"}.data must be a list of datums`);
  if (typeof input.loss_fn !== "string") throw new TinkerError("loss_fn must be a string");
  return {
    modelId: String(body.model_id ?? ""),
    seqId: Number(body.seq_id ?? 0),
    data: input.data.map((d, i) => datumFromJson(d, `data[${i}]`)),
    lossFn: input.loss_fn,
    lossFnConfig: numberRecord(input.loss_fn_config, "loss_fn_config"),
    forwardOnly,
  };
}

function numberRecord(x: unknown, what: string): Record<string, number> | undefined {
  if (x === undefined || x === null) return undefined;
  if (typeof x !== "object" || Object.values(x).some((v) => typeof v !== "number"))
    throw new TinkerError(`${what} must map names to numbers`);
  return x as Record<string, number>;
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

export function forwardBackwardOutputFromJson(raw: unknown): ForwardBackwardOutput {
  const o = raw as { loss_fn_outputs?: unknown; metrics?: unknown } | null;
  if (!o || !Array.isArray(o.loss_fn_outputs)) throw new TinkerError("the result has no loss_fn_outputs list");
  const outputs = o.loss_fn_outputs.map((rec, i) => {
    const out: Record<string, number[]> = {};
    for (const [k, t] of Object.entries((rec ?? {}) as Record<string, { data?: unknown }>)) {
      if (!isNumbers(t?.data)) throw new TinkerError(`loss_fn_outputs[${i}].${k} has no numeric data`);
      out[k] = t.data;
    }
    return out;
  });
  return { outputs, metrics: numberRecord(o.metrics, "metrics") ?? {} };
}

export function sampleResponseToJson(r: SampleResponse): Record<string, unknown> {
  return {
    type: "sample",
    sequences: r.sequences.map((s) => ({ tokens: s.tokens, logprobs: s.logprobs, stop_reason: s.stopReason })),
    prompt_logprobs: r.promptLogprobs,
  };
}

export function sampleResponseFromJson(raw: unknown): SampleResponse {
  const r = raw as { sequences?: unknown; prompt_logprobs?: unknown } | null;
  if (!r || !Array.isArray(r.sequences)) throw new TinkerError("the sample result has no sequences list");
  const sequences = r.sequences.map((s: { tokens?: unknown; logprobs?: unknown; stop_reason?: unknown }, i) => {
    if (!isNumbers(s?.tokens)) throw new TinkerError(`sequences[${i}].tokens must be a list of token ids`);
    if (s.stop_reason !== "stop" && s.stop_reason !== "length")
      throw new TinkerError(
        `sequences[${i}].stop_reason must be "stop" or "length", got ${JSON.stringify(s.stop_reason)}`,
      );
    const lp = s.logprobs ?? null;
    if (lp !== null && !isNumbers(lp)) throw new TinkerError(`sequences[${i}].logprobs must be a list of numbers`);
    return { tokens: s.tokens, logprobs: lp, stopReason: s.stop_reason } satisfies WireSequence;
  });
  const pl = r.prompt_logprobs;
  const promptLogprobs =
    Array.isArray(pl) && pl.every((v) => v === null || typeof v === "number") ? (pl as (number | null)[]) : null;
  return { sequences, promptLogprobs };
}

// ---- protobuf ----

function tensorToProto(t: WireTensor): Record<string, unknown> {
  return {
    dense: t.dtype === "int64" ? int64Bytes(t.data) : float32Bytes(t.data),
    dtype: t.dtype === "int64" ? DTYPE.int64 : DTYPE.float32,
    shape: t.shape ?? [t.data.length],
  };
}

function tensorFromProto(t: Record<string, unknown>, where: string): WireTensor {
  const dense = t.dense as Uint8Array | undefined;
  if (!dense || t.sparse_csr) throw new TinkerError(`${where}: only dense tensors are accepted`);
  switch (t.dtype) {
    case DTYPE.float32:
      return { data: readFloat32(dense, where), dtype: "float32" };
    case DTYPE.int64:
      return { data: readInt64(dense, where), dtype: "int64" };
    case DTYPE.int32:
      return { data: readInt32(dense, where), dtype: "int64" };
    default:
      throw new TinkerError(`${where}: dtype ${String(t.dtype)} is not float32, int64 or int32`);
  }
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

export function decodeForwardBackwardProto(bytes: Uint8Array): ForwardBackwardRequest {
  let m: Record<string, unknown>;
  try {
    m = decodeMessage(ForwardBackwardRequestMsg, bytes);
  } catch (e) {
    throw new TinkerError(`the ForwardBackwardRequest body does not decode: ${(e as Error).message}`);
  }
  const data = (m.data as Record<string, unknown>[]).map((d, i) => {
    const tokens: number[] = [];
    (d.model_input as Record<string, unknown>[]).forEach((c, j) => {
      const text = c.encoded_text as { tokens?: Uint8Array } | undefined;
      if (!text?.tokens) throw new TinkerError(`data[${i}].model_input[${j}] is not an encoded_text chunk`);
      tokens.push(...readInt32(text.tokens, `data[${i}].model_input[${j}].tokens`));
    });
    const inputs: Record<string, WireTensor> = {};
    for (const [k, t] of Object.entries(d.loss_fn_inputs as Record<string, Record<string, unknown>>))
      inputs[k] = tensorFromProto(t, `data[${i}].loss_fn_inputs.${k}`);
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

export function decodeForwardBackwardOutputProto(bytes: Uint8Array): ForwardBackwardOutput {
  const m = decodeMessage(ForwardBackwardOutputMsg, bytes);
  const outputs: Record<string, number[]>[] = [];
  for (const rec of m.loss_fn_outputs as Record<string, unknown>[]) {
    const fields = rec.fields as Record<string, Record<string, unknown>>;
    const names = Object.keys(fields);
    const n =
      Number(rec.num_datums) ||
      (names.length ? readInt64(fields[names[0]].offsets as Uint8Array, "offsets").length - 1 : 0);
    const base = outputs.length;
    for (let i = 0; i < n; i++) outputs.push({});
    for (const name of names) {
      const f = fields[name];
      const offsets = readInt64(f.offsets as Uint8Array, `${name}.offsets`);
      const data = f.data as Uint8Array;
      for (let i = 0; i < n; i++) {
        const slice = data.subarray(offsets[i], offsets[i + 1]);
        outputs[base + i][name] =
          f.dtype === DTYPE.int64
            ? readInt64(slice, name)
            : f.dtype === DTYPE.int32
              ? readInt32(slice, name)
              : f.dtype === DTYPE.bfloat16
                ? bf16ToFloat(slice)
                : readFloat32(slice, name);
      }
    }
  }
  return { outputs, metrics: m.metrics as Record<string, number> };
}

function bf16ToFloat(bytes: Uint8Array): number[] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new DataView(new ArrayBuffer(4));
  return Array.from({ length: bytes.byteLength / 2 }, (_, i) => {
    out.setUint32(0, v.getUint16(i * 2, true) << 16, true);
    return out.getFloat32(0, true);
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
  });
}

export function decodeSampleResponseProto(bytes: Uint8Array): SampleResponse {
  const m = decodeMessage(SampleResponseMsg, bytes);
  const sequences = (m.sequences as Record<string, unknown>[]).map((s, i) => {
    if (s.stop_reason !== 0 && s.stop_reason !== 1)
      throw new TinkerError(`sequences[${i}].stop_reason ${String(s.stop_reason)} is neither stop nor length`);
    const lp = s.logprobs as Uint8Array | undefined;
    return {
      tokens: readInt32(s.tokens as Uint8Array, `sequences[${i}].tokens`),
      logprobs: lp && lp.byteLength > 0 ? readFloat32(lp, `sequences[${i}].logprobs`) : null,
      stopReason: s.stop_reason === 1 ? "length" : "stop",
    } satisfies WireSequence;
  });
  const pl = m.prompt_logprobs as Uint8Array | undefined;
  const promptLogprobs =
    pl && pl.byteLength > 0 ? readFloat32(pl, "prompt_logprobs").map((x) => (Number.isNaN(x) ? null : x)) : null;
  return { sequences, promptLogprobs };
}

// ---- checks of answers ----
//
// What a sampling or training server answers is checked before anything uses it (both the Tinker
// client and the `engine.sampler` clients), each failure one TinkerError naming the server, the
// request, the sequence and the position:
//  - sampled sequences: as many as were asked for, each at most max_tokens integer token ids inside
//    the vocabulary, with one logprob per token that is a finite number not above 0 (a sampled token
//    had a probability above 0, so -Infinity is refused too);
//  - scored (prompt) logprobs: one per token, a number not above 0 after the first; -Infinity passes
//    (a token the model rules out), NaN does not;
//  - forward_backward logprobs: not above 0; NaN and -Infinity pass, as the training numerics they
//    are (a NaN step is the trainer's to skip, as with a local engine).
// "Not above 0" allows LOGPROB_SLACK for float rounding.

/** How far above 0 a logprob may come back: a float32 log-softmax of a near-certain token rounds a hair above 0. */
export const LOGPROB_SLACK = 1e-4;

/** What a sampling request asked for. */
export interface SampleBounds {
  /** Sequences asked for (num_samples, n). */
  n: number;
  maxTokens: number;
  /** Token ids must be below this (when known). */
  vocabSize?: number;
}

/** A sequence as a server sent it, before it is trusted. */
export interface UncheckedSequence {
  tokens: unknown;
  logprobs: unknown;
}

/** A value from a server in a message: short, one line. */
function shown(x: unknown): string {
  const s = typeof x === "number" ? String(x) : (JSON.stringify(x) ?? String(x));
  return s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

/**
 * Why `x` cannot be a logprob, or undefined when it can. `-Infinity` passes where `impossibleOk`,
 * `NaN` where `nanOk`.
 */
export function logprobProblem(x: unknown, o: { impossibleOk?: boolean; nanOk?: boolean } = {}): string | undefined {
  if (typeof x !== "number") return "not a number";
  if (Number.isNaN(x)) return o.nanOk ? undefined : "not a number";
  if (x === -Infinity) return o.impossibleOk ? undefined : "a sampled token cannot have probability 0";
  if (x > LOGPROB_SLACK) return "above 0, a probability over 1";
  return undefined;
}

/**
 * Checks sampled sequences against what was asked. `where` names the server and request
 * ("http://host: asample"), `suffix` adds to each message (" (request r-1)").
 */
export function checkSampledSequences(
  where: string,
  sequences: UncheckedSequence[],
  b: SampleBounds,
  suffix = "",
): { tokens: number[]; logprobs: number[] }[] {
  const fail = (m: string): never => {
    throw new TinkerError(`${where} ${m}${suffix}`);
  };
  if (sequences.length !== b.n) fail(`returned ${sequences.length} sequences, ${b.n} were asked for`);
  return sequences.map((s, i) => {
    const seq = `returned sequence ${i}`;
    if (!Array.isArray(s.tokens)) return fail(`${seq} without token ids`);
    const tokens = s.tokens as unknown[];
    if (tokens.length > b.maxTokens) fail(`${seq} with ${tokens.length} tokens, over max_tokens ${b.maxTokens}`);
    tokens.forEach((t, p) => {
      if (!Number.isInteger(t)) fail(`${seq} with token id ${shown(t)} at position ${p}, not an integer`);
      if ((t as number) < 0 || (b.vocabSize !== undefined && (t as number) >= b.vocabSize))
        fail(
          `${seq} with token id ${shown(t)} at position ${p}, outside the vocabulary [0, ${b.vocabSize ?? "vocab_size"})`,
        );
    });
    const logprobs = Array.isArray(s.logprobs) ? (s.logprobs as unknown[]) : [];
    if (logprobs.length !== tokens.length) fail(`${seq} with ${logprobs.length} logprobs for ${tokens.length} tokens`);
    logprobs.forEach((x, p) => {
      const problem = logprobProblem(x);
      if (problem) fail(`${seq} with logprob ${shown(x)} at position ${p}: ${problem}`);
    });
    return { tokens: tokens as number[], logprobs: logprobs as number[] };
  });
}

/** Checks the logprobs a server scored for a sequence of `length` tokens: one each, the first ignored. */
export function checkScoredLogprobs(where: string, logprobs: unknown, length: number, suffix = ""): number[] {
  const lp = Array.isArray(logprobs) ? (logprobs as unknown[]) : [];
  if (lp.length !== length)
    throw new TinkerError(`${where} returned ${lp.length} logprobs for a ${length}-token sequence${suffix}`);
  lp.forEach((x, p) => {
    const problem = p === 0 ? undefined : logprobProblem(x, { impossibleOk: true });
    if (problem) throw new TinkerError(`${where} returned logprob ${shown(x)} at position ${p}: ${problem}${suffix}`);
  });
  return lp.slice(1) as number[];
}

/** Checks forward_backward logprobs, datum by datum. */
export function checkTrainingLogprobs(where: string, logprobs: number[][]): void {
  logprobs.forEach((row, i) =>
    row.forEach((x, p) => {
      const problem = logprobProblem(x, { impossibleOk: true, nanOk: true });
      if (problem)
        throw new TinkerError(`${where} returned logprob ${shown(x)} for datum ${i} at position ${p}: ${problem}`);
    }),
  );
}
