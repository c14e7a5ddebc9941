/** From the request fields both endpoints share to the engine's SamplingParams and stop conditions. */
import type { SamplingParams } from "../engine/types.js";
import type { ServeContext } from "./context.js";
import { badRequest } from "./errors.js";

export interface SharedFields {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  /** vLLM's extension: more token ids that end a sequence (kept in token_ids, dropped from the text). */
  stop_token_ids?: number[] | null;
  seed?: number | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  logit_bias?: Record<string, number> | null;
}

export interface Stops {
  /** Token ids that end a sequence (dropped from the returned text). */
  ids: Set<number>;
  /** The request's stop strings (the returned text ends before the first one). */
  strings: string[];
}

/** Options we accept in the schema but cannot honour: refused by name rather than silently ignored. */
export function rejectUnsupported(req: SharedFields): void {
  if (req.frequency_penalty)
    throw badRequest("frequency_penalty is not supported by this server (use 0)", "frequency_penalty");
  if (req.presence_penalty)
    throw badRequest("presence_penalty is not supported by this server (use 0)", "presence_penalty");
  if (req.logit_bias && Object.keys(req.logit_bias).length > 0)
    throw badRequest("logit_bias is not supported by this server", "logit_bias");
}

/** Stop ids (the end-of-text / end-of-turn tokens and the request's stop_token_ids) plus the request's stop strings. */
export function resolveStops(req: SharedFields, ids: (number | undefined)[]): Stops {
  const strings = (typeof req.stop === "string" ? [req.stop] : (req.stop ?? [])).filter((s) => s.length > 0);
  const all = [...ids, ...(req.stop_token_ids ?? [])];
  return { ids: new Set(all.filter((x): x is number => x !== undefined)), strings };
}

export function samplingParams(
  req: SharedFields,
  stops: Stops,
  maxTokens: number,
  topLogprobs: number,
): SamplingParams {
  return {
    n: req.n ?? 1,
    maxTokens,
    temperature: req.temperature ?? 1,
    topP: req.top_p ?? 1,
    topK: req.top_k && req.top_k > 0 ? req.top_k : 0,
    seed: req.seed ?? undefined,
    stop: [...stops.ids, ...stops.strings],
    topLogprobs,
  };
}

/** The prompt must leave room for at least one new token; returns the room left. */
export function roomAfter(ctx: ServeContext, promptLength: number, param: string): number {
  const window = ctx.engine.config.maxPositionEmbeddings;
  if (promptLength >= window) {
    throw badRequest(
      `the prompt is ${promptLength} tokens; this model's context window is ${window} tokens`,
      param,
      "context_length_exceeded",
    );
  }
  return window - promptLength;
}
