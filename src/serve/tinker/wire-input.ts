/**
 * What `serve --tinker` takes from a request body, read strictly: each field of the expected type
 * and range, or a 400 naming it (never a TypeError that becomes a 500). Token ids are checked
 * against the model's vocabulary and sequence lengths against its context window here, before
 * anything is queued; optimizer settings against the ranges where an AdamW step stays finite.
 */
import type { SamplingParams } from "../../engine/types.js";
import type { ModelConfig } from "../../model/config.js";
import { readModelConfig } from "../../model/model-dir.js";
import { AgentR1Error } from "../../util/errors.js";
import { adamFieldProblem, type ResolvedAdamParams } from "../../engine/optim-params.js";
import type { WireDatum, WireTensor } from "../../engine/remote/tinker-codec.js";
import { TinkerError, type Fault } from "../../engine/remote/tinker-error.js";
import { jsonTensor as readJsonTensor } from "../../engine/remote/tinker-tensor.js";
import { checkDatumCount, checkRequestTokens, type TinkerLimits } from "./limits.js";

/** What a request is checked against: the model's vocabulary size and context window. */
export interface ModelShape {
  vocab: number;
  window: number;
}

const show = (x: unknown): string => {
  if (x === null) return "null";
  if (Array.isArray(x)) return "a list";
  if (typeof x === "string") return JSON.stringify(x.length > 40 ? `${x.slice(0, 40)}...` : x);
  if (typeof x === "object") return "an object";
  return String(x);
};

export const bad = (field: string, want: string, got: unknown): TinkerError =>
  new TinkerError(`${field} must be ${want}, got ${show(got)}`);

export function str(x: unknown, field: string): string {
  if (typeof x !== "string" || x === "") throw bad(field, "a non-empty string", x);
  return x;
}

export function int(x: unknown, field: string, min = 0): number {
  if (!Number.isSafeInteger(x) || (x as number) < min) throw bad(field, `an integer >= ${min}`, x);
  return x as number;
}

/** A JSON object (not null, not a list); undefined and null give `{}` when `optional`. */
export function obj(x: unknown, field: string, optional = false): Record<string, unknown> {
  if (optional && (x === undefined || x === null)) return {};
  if (typeof x !== "object" || x === null || Array.isArray(x)) throw bad(field, "an object", x);
  return x as Record<string, unknown>;
}

/** A number field that may be left out (undefined or null). */
function optNumber(o: Record<string, unknown>, key: string, field: string): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v)) throw bad(`${field}.${key}`, "a finite number", v);
  return v;
}

/** Token ids: integers in [0, vocab). */
export function checkTokenIds(ids: readonly unknown[], vocab: number, field: string): void {
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i];
    if (!Number.isInteger(t) || (t as number) < 0 || (t as number) >= vocab)
      throw bad(`${field}[${i}]`, `a token id in [0, ${vocab})`, t);
  }
}

/** A ModelInput (`{chunks: [{type: "encoded_text", tokens}]}`) as token ids, checked against the vocabulary. */
export function modelInput(raw: unknown, field: string, vocab: number): number[] {
  const chunks = obj(raw, field).chunks;
  if (!Array.isArray(chunks)) throw bad(`${field}.chunks`, "a list", chunks);
  const tokens: number[] = [];
  chunks.forEach((c, i) => {
    const chunk = obj(c, `${field}.chunks[${i}]`);
    const type = chunk.type ?? "encoded_text";
    if (type !== "encoded_text") throw bad(`${field}.chunks[${i}].type`, '"encoded_text"', type);
    const ids = chunk.tokens;
    if (!Array.isArray(ids)) throw bad(`${field}.chunks[${i}].tokens`, "a list of token ids", ids);
    checkTokenIds(ids, vocab, `${field}.chunks[${i}].tokens`);
    for (const t of ids) tokens.push(t as number);
  });
  return tokens;
}

/** A field of a request refused: a 400 naming it. */
const fault: Fault = (field, problem) => new TinkerError(`${field} ${problem}`);

/**
 * A JSON TensorData (`{data, dtype, shape?}`, or sparse with `sparse_crow_indices` and
 * `sparse_col_indices`), read as the protobuf path reads a Tensor (tinker-tensor.ts): its shape
 * must hold its values, a sparse one is checked and made dense; every value finite.
 */
function jsonTensor(raw: unknown, field: string): WireTensor {
  obj(raw, field);
  const t = readJsonTensor(raw, field, fault);
  t.data.forEach((x, i) => {
    if (!Number.isFinite(x)) throw bad(`${field}.data[${i}]`, "a finite number", x);
  });
  return t;
}

/** The JSON datums of a forward_backward or forward body. */
export function jsonDatums(raw: unknown, field: string, shape: ModelShape, limits: TinkerLimits): WireDatum[] {
  if (!Array.isArray(raw)) throw bad(field, "a list of datums", raw);
  checkDatumCount(limits, raw.length, field);
  return raw.map((d, i) => {
    const where = `${field}[${i}]`;
    const datum = obj(d, where);
    const tokens = modelInput(datum.model_input, `${where}.model_input`, shape.vocab);
    const inputs: Record<string, WireTensor> = Object.create(null);
    for (const [k, t] of Object.entries(obj(datum.loss_fn_inputs, `${where}.loss_fn_inputs`, true)))
      inputs[k] = jsonTensor(t, `${where}.loss_fn_inputs.${k}`);
    return { tokens, inputs };
  });
}

/**
 * Datums (from JSON or protobuf) against the model and the limits: at least one, each within the
 * context window, its token ids and target_tokens in the vocabulary, and all of them within the
 * token budget.
 */
export function checkDatums(data: WireDatum[], field: string, shape: ModelShape, limits: TinkerLimits): void {
  if (data.length === 0) throw bad(field, "a list of at least one datum", data);
  checkDatumCount(limits, data.length, field);
  let total = 0;
  data.forEach((d, i) => {
    const where = `${field}[${i}]`;
    const length = d.tokens.length;
    if (length === 0) throw new TinkerError(`${where}.model_input.chunks hold no tokens`);
    if (length > shape.window)
      throw new TinkerError(
        `${where}.model_input is ${length} tokens; this model's context window is ${shape.window} tokens`,
      );
    checkTokenIds(d.tokens, shape.vocab, `${where}.model_input.tokens`);
    const targets = d.inputs.target_tokens;
    if (targets) checkTokenIds(targets.data, shape.vocab, `${where}.loss_fn_inputs.target_tokens.data`);
    total += length;
  });
  checkRequestTokens(limits, total, field, `the tokens of ${data.length} datums`);
}

/** Tinker's AdamParams: each wire field, ours, and the SDK's default. */
const ADAM_WIRE: [string, keyof ResolvedAdamParams, number][] = [
  ["learning_rate", "lr", 1e-4],
  ["beta1", "beta1", 0.9],
  ["beta2", "beta2", 0.95],
  ["eps", "eps", 1e-12],
  ["weight_decay", "weightDecay", 0],
  ["grad_clip_norm", "gradClipNorm", 0],
];

/** Tinker's AdamParams as ours, each in the range where an AdamW step stays finite (the engines' own ranges). */
export function adamParams(raw: unknown): ResolvedAdamParams {
  const a = obj(raw, "adam_params", true);
  const out = {} as ResolvedAdamParams;
  for (const [wire, key, fallback] of ADAM_WIRE) {
    const v = optNumber(a, wire, "adam_params") ?? fallback;
    const wrong = adamFieldProblem(key, v);
    if (wrong) throw bad(`adam_params.${wire}`, wrong, v);
    out[key] = v;
  }
  return out;
}

/** Stop strings or token ids a request may give, and the longest stop string. */
const MAX_STOPS = 64;
const MAX_STOP_CHARS = 1024;

/**
 * Tinker's SamplingParams as ours. max_tokens is required and at most the context window; as the
 * local engine (and `serve`) do, a sequence stops at the window, so the prompt plus max_tokens may
 * pass it (a sequence scored with prompt_logprobs fills the window and asks for one token).
 */
export function samplingParams(raw: unknown, shape: ModelShape): SamplingParams & { maxTokens: number } {
  const p = obj(raw, "sampling_params");
  const field = "sampling_params";
  const maxTokens = p.max_tokens;
  if (!Number.isSafeInteger(maxTokens) || (maxTokens as number) < 1 || (maxTokens as number) > shape.window)
    throw bad(`${field}.max_tokens`, `an integer in [1, ${shape.window}] (this model's context window)`, maxTokens);
  const out: SamplingParams & { maxTokens: number } = { maxTokens: maxTokens as number };
  const t = optNumber(p, "temperature", field);
  if (t !== undefined && t < 0) throw bad(`${field}.temperature`, "a number >= 0", t);
  if (t !== undefined) out.temperature = t;
  const topP = optNumber(p, "top_p", field);
  if (topP !== undefined && !(topP > 0 && topP <= 1)) throw bad(`${field}.top_p`, "a number in (0, 1]", topP);
  if (topP !== undefined) out.topP = topP;
  const k = optNumber(p, "top_k", field);
  if (k !== undefined && !(Number.isInteger(k) && k >= -1)) throw bad(`${field}.top_k`, "an integer >= -1", k);
  if (k !== undefined) out.topK = k < 0 ? 0 : k;
  const seed = optNumber(p, "seed", field);
  if (seed !== undefined && !Number.isSafeInteger(seed)) throw bad(`${field}.seed`, "an integer", seed);
  if (seed !== undefined) out.seed = seed;
  const stop = stops(p.stop, shape.vocab);
  if (stop) out.stop = stop;
  return out;
}

/** `stop`: a string, a list of strings, or a list of token ids. */
function stops(raw: unknown, vocab: number): (string | number)[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  const list = typeof raw === "string" ? [raw] : raw;
  const want = `a string, or a list of at most ${MAX_STOPS} strings (of at most ${MAX_STOP_CHARS} characters) or token ids`;
  if (!Array.isArray(list) || list.length > MAX_STOPS) throw bad("sampling_params.stop", want, raw);
  if (list.every((s) => typeof s === "string" && s.length <= MAX_STOP_CHARS)) return list as string[];
  if (list.every((s) => typeof s === "number")) {
    checkTokenIds(list, vocab, "sampling_params.stop");
    return list as number[];
  }
  throw bad("sampling_params.stop", want, raw);
}

/** A model directory's vocabulary and context window (config.json), as a 400 when it cannot be read. */
export function shapeOf(dir: string, what: string): ModelShape & { config: ModelConfig } {
  try {
    const c = readModelConfig(dir);
    return { vocab: c.vocabSize, window: c.maxPositionEmbeddings, config: c };
  } catch (e) {
    if (e instanceof AgentR1Error) throw new TinkerError(`${what}: ${e.message}`);
    throw e;
  }
}

/** An optional boolean field (false when left out). */
export function flag(x: unknown, field: string): boolean {
  if (x === undefined || x === null) return false;
  if (typeof x !== "boolean") throw bad(field, "true or false", x);
  return x;
}
