/**
 * Rollout samplers on inference servers, token ids in and out:
 *  - vLLM: POST /v1/completions with a token-id prompt, `return_token_ids`, `logprobs: 0` and
 *    `stop_token_ids`; reads `choices[i].token_ids` and `logprobs.token_logprobs`. New weights are
 *    LoRA adapters (POST /v1/load_lora_adapter, then requests name the adapter).
 *  - SGLang: POST /generate with `input_ids` and `return_logprob`; reads `output_ids` and
 *    `meta_info.output_token_logprobs`. New weights: POST /update_weights_from_disk {model_path}.
 * `agent-r1 serve` speaks both (src/serve/completions.ts, src/serve/sglang.ts), which is how these
 * clients are tested.
 *
 * Nothing a server answers is trusted: an answer is read within `maxResponseBytes` (default 256 MiB,
 * decompressed) and cut off past it; a redirect is an error naming where it points, never followed
 * (the API key would go along); and the sequences are checked as answer-checks.ts says (as many as
 * asked, at most max_tokens token ids inside the vocabulary, logprobs finite and not above 0, a stop
 * reason of "stop" or "length"). Each failure is one TinkerError naming the server, the request and
 * the field ("http://host: completions: sequences[0].logprobs[2] is 0.5: above 0, ...").
 */
import type { SampleResult, SamplingParams, SampledSequence } from "../types.js";
import { InputError } from "../../util/errors.js";
import { formatBytes, readLimitedText, readPrefix, redirectTarget } from "../../util/read-limited.js";
import { TinkerError } from "./tinker-error.js";
import { checkSampledSequences, type SampleBounds } from "./answer-checks.js";

/** The default limit on an answer's (decoded) size. */
export const DEFAULT_SAMPLER_RESPONSE_BYTES = 256 * 1024 * 1024;

export type SamplerKind = "vllm" | "sglang";

export interface SamplerOptions {
  kind: SamplerKind;
  url: string;
  /** The model name the server serves (vLLM's `model`); default: the server's own. */
  model?: string;
  /** Sent as `Authorization: Bearer` when set. */
  apiKey?: string;
  timeoutMs?: number;
  /** The largest answer read, in bytes after decompression. Default 256 MiB. */
  maxResponseBytes?: number;
}

export interface RolloutSampler {
  /** Samples `prompt`; the token ids that come back must be below `vocabSize` when it is given. */
  sample(prompt: number[], params: SamplingParams, defaultStop: number[], vocabSize?: number): Promise<SampleResult>;
  /** Points the server at new weights written as a model directory (SGLang) or LoRA adapter (vLLM). */
  reload(dir: string, version: number): Promise<void>;
  describe(): string;
}

async function postJson(
  url: string,
  body: unknown,
  o: SamplerOptions,
  what: string,
  signal?: AbortSignal,
): Promise<unknown> {
  const timeout = AbortSignal.timeout(o.timeoutMs ?? 600_000);
  const lost = (e: unknown): Error => {
    if (signal?.aborted) return signal.reason as Error;
    if (e instanceof TinkerError) return e;
    const cause = timeout.aborted
      ? `no answer within ${(o.timeoutMs ?? 600_000) / 1000} s`
      : ((e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message);
    return new TinkerError(
      `${o.url}: ${what} failed: ${cause}`,
      `is the ${o.kind} server running? check engine.sampler.url`,
    );
  };
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(o.apiKey ? { Authorization: `Bearer ${o.apiKey}` } : {}) },
      body: JSON.stringify(body),
      redirect: "manual",
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (e) {
    throw lost(e);
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => undefined);
    throw new TinkerError(
      `${o.url}: ${what}: the server answered a redirect (HTTP ${res.status}) to ${redirectTarget(res)}; not followed (the API key would go along)`,
      "point engine.sampler.url at the final address",
    );
  }
  if (!res.ok) {
    const text = new TextDecoder().decode(await readPrefix(res, 64 * 1024).catch((e) => Promise.reject(lost(e))));
    let detail = text.slice(0, 300);
    try {
      const j = JSON.parse(text) as { error?: { message?: string } | string; detail?: string; message?: string };
      detail = (typeof j.error === "object" ? j.error?.message : j.error) ?? j.detail ?? j.message ?? detail;
    } catch {
      // not JSON
    }
    throw new TinkerError(`${o.url}: ${what} failed: HTTP ${res.status}: ${String(detail).slice(0, 300)}`);
  }
  const limit = o.maxResponseBytes ?? DEFAULT_SAMPLER_RESPONSE_BYTES;
  const text = await readLimitedText(res, limit, (over) => {
    const limitText = `the ${formatBytes(limit)} limit on answers (maxResponseBytes)`;
    return new TinkerError(
      `${o.url}: ${what}: ${over.declared ? `the answer declares ${formatBytes(over.bytes)}, over ${limitText}` : `the answer ran past ${limitText} and was cut off`}`,
      `an answer holds n × max_tokens token ids and logprobs; is engine.sampler.url a ${o.kind} server?`,
    );
  }).catch((e) => Promise.reject(lost(e)));
  try {
    return JSON.parse(text);
  } catch {
    throw new TinkerError(`${o.url}: ${what} answered something that is not JSON`);
  }
}

function stops(params: SamplingParams, defaultStop: number[]): number[] {
  const stop = params.stop ?? defaultStop;
  if (stop.some((s) => typeof s !== "number"))
    throw new InputError(
      "sample: a remote sampler stops on token ids only (engine.sampler); give stop ids, not strings",
    );
  return stop as number[];
}

/** The sequences of an answer, checked (tinker-codec.ts) against what was asked, with their finish reasons. */
function checked(
  where: string,
  raw: { tokens: unknown; logprobs: unknown; reason: unknown }[],
  bounds: SampleBounds,
): SampledSequence[] {
  const seqs = checkSampledSequences(raw, bounds, (field, problem) => new TinkerError(`${where}: ${field} ${problem}`));
  return seqs.map((s, i) => {
    const reason = raw[i].reason;
    if (reason !== "stop" && reason !== "length")
      throw new TinkerError(
        `${where} returned sequence ${i} with finish reason ${JSON.stringify(reason) ?? "undefined"}, neither "stop" nor "length"`,
        reason === "abort" ? "the server aborted the request; look at its log" : undefined,
      );
    return { ...s, stopReason: reason };
  });
}

class VllmSampler implements RolloutSampler {
  private adapter?: string;
  constructor(private readonly o: SamplerOptions) {}

  async sample(
    prompt: number[],
    params: SamplingParams,
    defaultStop: number[],
    vocabSize?: number,
  ): Promise<SampleResult> {
    const n = params.n ?? 1;
    const body = {
      ...((this.adapter ?? this.o.model) ? { model: this.adapter ?? this.o.model } : {}),
      prompt,
      n,
      max_tokens: params.maxTokens ?? 256,
      temperature: params.temperature ?? 1,
      top_p: params.topP ?? 1,
      top_k: params.topK && params.topK > 0 ? params.topK : -1,
      ...(params.seed !== undefined ? { seed: params.seed } : {}),
      stop_token_ids: stops(params, defaultStop),
      logprobs: 0,
      return_token_ids: true,
    };
    const r = (await postJson(`${this.o.url}/v1/completions`, body, this.o, "completions", params.signal)) as null | {
      choices?: {
        index?: number;
        token_ids?: unknown;
        logprobs?: { token_logprobs?: unknown };
        finish_reason?: unknown;
      }[];
    };
    if (!Array.isArray(r?.choices)) throw new TinkerError(`${this.o.url}: completions answered no choices list`);
    const choices = [...r.choices].sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0));
    const raw = choices.map((c) => ({
      tokens: c?.token_ids,
      logprobs: c?.logprobs?.token_logprobs,
      reason: c?.finish_reason,
    }));
    return { sequences: checked(`${this.o.url}: completions`, raw, { n, maxTokens: body.max_tokens, vocabSize }) };
  }

  async reload(dir: string, version: number): Promise<void> {
    const name = `agent-r1-v${version}`;
    await postJson(
      `${this.o.url}/v1/load_lora_adapter`,
      { lora_name: name, lora_path: dir },
      this.o,
      `load_lora_adapter ${dir}`,
    );
    this.adapter = name;
  }

  describe(): string {
    return `vllm at ${this.o.url}`;
  }
}

class SglangSampler implements RolloutSampler {
  constructor(private readonly o: SamplerOptions) {}

  async sample(
    prompt: number[],
    params: SamplingParams,
    defaultStop: number[],
    vocabSize?: number,
  ): Promise<SampleResult> {
    const n = params.n ?? 1;
    const body = {
      input_ids: prompt,
      sampling_params: {
        max_new_tokens: params.maxTokens ?? 256,
        temperature: params.temperature ?? 1,
        top_p: params.topP ?? 1,
        top_k: params.topK && params.topK > 0 ? params.topK : -1,
        stop_token_ids: stops(params, defaultStop),
        n,
        ...(params.seed !== undefined ? { sampling_seed: params.seed } : {}),
      },
      return_logprob: true,
    };
    const r = await postJson(`${this.o.url}/generate`, body, this.o, "generate", params.signal);
    const outs = (Array.isArray(r) ? r : [r]) as ({
      output_ids?: unknown;
      meta_info?: { finish_reason?: { type?: unknown }; output_token_logprobs?: unknown };
    } | null)[];
    const raw = outs.map((o) => {
      const lps = o?.meta_info?.output_token_logprobs;
      return {
        tokens: o?.output_ids,
        logprobs: Array.isArray(lps) ? lps.map((e: unknown) => (Array.isArray(e) ? e[0] : undefined)) : undefined,
        reason: o?.meta_info?.finish_reason?.type,
      };
    });
    const bounds = { n, maxTokens: body.sampling_params.max_new_tokens, vocabSize };
    return { sequences: checked(`${this.o.url}: generate`, raw, bounds) };
  }

  async reload(dir: string): Promise<void> {
    const r = (await postJson(
      `${this.o.url}/update_weights_from_disk`,
      { model_path: dir },
      this.o,
      `update_weights_from_disk ${dir}`,
    )) as {
      success?: boolean;
      message?: string;
    };
    if (r.success !== true)
      throw new TinkerError(
        `${this.o.url}: update_weights_from_disk ${dir} failed: ${r.message ?? "no reason given"}`,
        "the server must be able to read that directory (with agent-r1 serve: --weights-from)",
      );
  }

  describe(): string {
    return `sglang at ${this.o.url}`;
  }
}

export function rolloutSampler(o: SamplerOptions): RolloutSampler {
  try {
    new URL(o.url);
  } catch {
    throw new InputError(`engine.sampler.url: '${o.url}' is not a URL`);
  }
  const url = o.url.replace(/\/+$/, "");
  return o.kind === "vllm" ? new VllmSampler({ ...o, url }) : new SglangSampler({ ...o, url });
}
