/**
 * The results the Tinker client reads, JSON (SDK ≤ 0.24.1) or protobuf (SDK ≥ 0.25), taken apart
 * as strictly as the SDK reads them (tensors: tinker-tensor.ts), and checked against the request
 * that asked for them: a sample's sequences (answer-checks.ts), a forward_backward chunk's outputs
 * (one per datum sent, each with its float32 logprobs, one per target token, not above 0) and its
 * `loss:sum` metric. Each violation is a TinkerAnswerError naming the server, the request and the
 * field; the call fails with it, and nothing of the answer reaches a datum or a result.
 */
import type { Answer } from "./tinker-answer.js";
import { isNot } from "./tinker-answer.js";
import { checkTrainingLogprobs } from "./answer-checks.js";
import type { SampleResponse, WireSequence } from "./tinker-codec.js";
import { decodeMessage, ForwardBackwardOutputMsg, SampleResponseMsg } from "./tinker-proto.js";
import type protobuf from "protobufjs";
import { jsonTensor, splitBatched, typedBlob, type WireTensor } from "./tinker-tensor.js";

/** A forward_backward result as read: per datum, its output tensors by name (with their shapes), and the metrics. */
export interface ForwardBackwardRead {
  outputs: Record<string, Required<WireTensor>>[];
  metrics: Record<string, number>;
}

/** A protobuf body decoded, or a fault naming what it should have been. */
function decoded(msg: protobuf.Type, bytes: Uint8Array, a: Answer): Record<string, unknown> {
  try {
    return decodeMessage(msg, bytes);
  } catch (e) {
    throw a.fault("the result", `does not decode as a protobuf ${msg.name} (${(e as Error).message})`);
  }
}

/** A list field of a JSON object. */
function list(o: Record<string, unknown>, key: string, a: Answer): unknown[] {
  const v = o[key];
  if (!Array.isArray(v)) throw a.fault(key, isNot(v, "a list"));
  return v;
}

// ---- sample ----

export function readSampleJson(raw: unknown, a: Answer): SampleResponse {
  const r = a.object(raw, "the result");
  const sequences = list(r, "sequences", a).map((x, i) => {
    const s = a.object(x, `sequences[${i}]`);
    const stopReason = s.stop_reason;
    if (stopReason !== "stop" && stopReason !== "length")
      throw a.fault(`sequences[${i}].stop_reason`, isNot(stopReason, '"stop" or "length"'));
    if (!Array.isArray(s.tokens)) throw a.fault(`sequences[${i}].tokens`, isNot(s.tokens, "a list of token ids"));
    const lp = s.logprobs ?? null;
    if (lp !== null && !Array.isArray(lp)) throw a.fault(`sequences[${i}].logprobs`, isNot(lp, "a list of logprobs"));
    const id = s.sequence_id ?? undefined;
    if (id !== undefined && (typeof id !== "string" || id === ""))
      throw a.fault(`sequences[${i}].sequence_id`, isNot(id, "a non-empty string"));
    // The values are checked against the request (answer-checks.ts) before anything uses them.
    return {
      tokens: s.tokens as number[],
      logprobs: lp as number[] | null,
      stopReason: stopReason as WireSequence["stopReason"],
      ...(id !== undefined ? { sequenceId: id as string } : {}),
    };
  });
  const pl = r.prompt_logprobs ?? null;
  if (pl !== null && !Array.isArray(pl)) throw a.fault("prompt_logprobs", isNot(pl, "a list of logprobs"));
  return { sequences, promptLogprobs: pl as (number | null)[] | null };
}

export function readSampleProto(bytes: Uint8Array, a: Answer): SampleResponse {
  const m = decoded(SampleResponseMsg, bytes, a);
  const sequences = (m.sequences as Record<string, unknown>[]).map((s, i): WireSequence => {
    if (s.stop_reason !== 0 && s.stop_reason !== 1)
      throw a.fault(`sequences[${i}].stop_reason`, `is ${String(s.stop_reason)}, neither stop (0) nor length (1)`);
    const lp = s.logprobs as Uint8Array | undefined;
    return {
      tokens: typedBlob("int32", s.tokens, `sequences[${i}].tokens`, a.faults),
      logprobs: lp && lp.byteLength > 0 ? typedBlob("float32", lp, `sequences[${i}].logprobs`, a.faults) : null,
      stopReason: s.stop_reason === 1 ? "length" : "stop",
    };
  });
  const pl = m.prompt_logprobs as Uint8Array | undefined;
  const promptLogprobs =
    pl && pl.byteLength > 0
      ? typedBlob("float32", pl, "prompt_logprobs", a.faults).map((x) => (Number.isNaN(x) ? null : x))
      : null;
  const hits = m.prompt_cache_hit_tokens;
  if (!Number.isSafeInteger(hits) || (hits as number) < 0)
    throw a.fault("prompt_cache_hit_tokens", isNot(hits, "a count of prompt tokens"));
  return { sequences, promptLogprobs, ...(hits ? { promptCacheHitTokens: hits as number } : {}) };
}

// ---- forward_backward ----

/** Metrics: names to numbers (required, as the SDK's ForwardBackwardOutput has them). */
function metricsOf(raw: unknown, a: Answer): Record<string, number> {
  const m = a.object(raw, "metrics");
  for (const [k, v] of Object.entries(m))
    if (typeof v !== "number") throw a.fault(`metrics.${k}`, isNot(v, "a number"));
  return m as Record<string, number>;
}

export function readForwardBackwardJson(raw: unknown, a: Answer): ForwardBackwardRead {
  const o = a.object(raw, "the result");
  const outputs = list(o, "loss_fn_outputs", a).map((rec, i) =>
    Object.fromEntries(
      Object.entries(a.object(rec, `loss_fn_outputs[${i}]`)).map(([k, t]) => [
        k,
        jsonTensor(t, `loss_fn_outputs[${i}].${k}`, a.faults),
      ]),
    ),
  );
  return { outputs, metrics: metricsOf(o.metrics, a) };
}

/** How many datums a record holds: num_datums, or (an older writer's 0) its first field's offsets less one. */
function datumCount(rec: Record<string, unknown>, at: string, a: Answer): number {
  const n = rec.num_datums;
  if (!Number.isSafeInteger(n) || (n as number) < 0) throw a.fault(`${at}.num_datums`, isNot(n, "a count"));
  const fields = Object.values(rec.fields as Record<string, Record<string, unknown>>);
  if (n !== 0 || fields.length === 0) return n as number;
  const offsets = fields[0].offsets;
  return offsets instanceof Uint8Array ? Math.max(0, Math.floor(offsets.byteLength / 8) - 1) : 0;
}

/** A protobuf ForwardBackwardOutput for a request of `sent` datums (more in its records is a fault, found before any is read). */
export function readForwardBackwardProto(bytes: Uint8Array, sent: number, a: Answer): ForwardBackwardRead {
  const m = decoded(ForwardBackwardOutputMsg, bytes, a);
  // Per datum (numbered across records, as num_datums add up), its [name, tensor] pairs.
  const entries: [string, Required<WireTensor>][][] = [];
  (m.loss_fn_outputs as Record<string, unknown>[]).forEach((rec, r) => {
    const at = `loss_fn_outputs[${r}]`;
    const n = datumCount(rec, at, a);
    const base = entries.length;
    if (base + n > sent)
      throw a.fault(`${at}.num_datums`, `is ${n}, which makes ${base + n} datums; ${sent} were sent`);
    for (let i = 0; i < n; i++) entries.push([]);
    for (const [name, bt] of Object.entries(rec.fields as Record<string, Record<string, unknown>>)) {
      const { rows, trailing, dtype } = splitBatched(bt, n, `${at}.fields.${name}`, a.faults);
      const per = trailing.reduce((p, x) => p * x, 1);
      rows.forEach((data, i) =>
        entries[base + i].push([name, { data, dtype, shape: [data.length / per, ...trailing] }]),
      );
    }
  });
  return { outputs: entries.map((e) => Object.fromEntries(e)), metrics: metricsOf(m.metrics, a) };
}

/**
 * A forward_backward chunk's result against the chunk: one output per datum sent, each with float32
 * `logprobs` of shape [targets], not above 0 (NaN and -Infinity pass as training numerics), and the
 * `loss:sum` metric (a missing one would be a silent NaN loss).
 */
export function checkChunkResult(
  out: ForwardBackwardRead,
  targets: readonly number[][],
  a: Answer,
): { logprobs: number[][]; lossSum: number } {
  if (out.outputs.length !== targets.length)
    throw a.fault("loss_fn_outputs", `holds ${out.outputs.length} outputs for the ${targets.length} datums sent`);
  const logprobs = out.outputs.map((rec, i) => {
    const at = `loss_fn_outputs[${i}].logprobs`;
    const t = rec.logprobs;
    if (!t) throw a.fault(at, "is missing");
    if (t.dtype !== "float32") throw a.fault(`${at}.dtype`, `is ${t.dtype}; logprobs are float32`);
    const want = targets[i].length;
    if (t.shape.length !== 1 || t.shape[0] !== want)
      throw a.fault(`${at}.shape`, `is [${t.shape.join(", ")}]; the datum has ${want} target tokens, so [${want}]`);
    checkTrainingLogprobs(t.data, at, a.faults);
    return t.data;
  });
  const lossSum = out.metrics["loss:sum"];
  if (lossSum === undefined) throw a.fault('metrics["loss:sum"]', "is missing; the loss cannot be read");
  return { logprobs, lossSum };
}
