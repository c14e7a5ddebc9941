/**
 * Rollout samplers on inference servers, token ids in and out:
 *  - vLLM: POST /v1/completions with a token-id prompt, `return_token_ids`, `logprobs: 0` and
 *    `stop_token_ids`; reads `choices[i].token_ids` and `logprobs.token_logprobs`. New weights are
 *    LoRA adapters (POST /v1/load_lora_adapter, then requests name the adapter).
 *  - SGLang: POST /generate with `input_ids` and `return_logprob`; reads `output_ids` and
 *    `meta_info.output_token_logprobs`. New weights: POST /update_weights_from_disk {model_path}.
 * `agent-r1 serve` speaks both (src/serve/completions.ts, src/serve/sglang.ts), which is how these
 * clients are tested. A reply with fewer tokens or logprobs than it says, or none, is an error
 * naming the server.
 */
import type { SampleResult, SamplingParams, SampledSequence } from "../types.js";
import { InputError } from "../../util/errors.js";
import { TinkerError } from "./tinker-error.js";

export type SamplerKind = "vllm" | "sglang";

export interface SamplerOptions {
  kind: SamplerKind;
  url: string;
  /** The model name the server serves (vLLM's `model`); default: the server's own. */
  model?: string;
  /** Sent as `Authorization: Bearer` when set. */
  apiKey?: string;
  timeoutMs?: number;
}

export interface RolloutSampler {
  sample(prompt: number[], params: SamplingParams, defaultStop: number[]): Promise<SampleResult>;
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
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(o.apiKey ? { Authorization: `Bearer ${o.apiKey}` } : {}) },
      body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    const cause = (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
    throw new TinkerError(
      `${o.url}: ${what} failed: ${cause}`,
      `is the ${o.kind} server running? check engine.sampler.url`,
    );
  }
  const text = await res.text();
  if (!res.ok) {
    let detail = text.slice(0, 300);
    try {
      const j = JSON.parse(text) as { error?: { message?: string } | string; detail?: string; message?: string };
      detail = (typeof j.error === "object" ? j.error?.message : j.error) ?? j.detail ?? j.message ?? detail;
    } catch {
      // not JSON
    }
    throw new TinkerError(`${o.url}: ${what} failed: HTTP ${res.status}: ${detail}`);
  }
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

function checked(url: string, i: number, tokens: unknown, logprobs: unknown, reason: unknown): SampledSequence {
  if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t)))
    throw new TinkerError(
      `${url}: sequence ${i} came back without token ids`,
      "is the server new enough to return token ids?",
    );
  if (!Array.isArray(logprobs) || logprobs.length !== tokens.length || !logprobs.every((x) => typeof x === "number"))
    throw new TinkerError(
      `${url}: sequence ${i} came back with ${Array.isArray(logprobs) ? logprobs.length : 0} logprobs for ${tokens.length} tokens`,
    );
  return {
    tokens: tokens as number[],
    logprobs: logprobs as number[],
    stopReason: reason === "length" ? "length" : "stop",
  };
}

class VllmSampler implements RolloutSampler {
  private adapter?: string;
  constructor(private readonly o: SamplerOptions) {}

  async sample(prompt: number[], params: SamplingParams, defaultStop: number[]): Promise<SampleResult> {
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
    const r = (await postJson(`${this.o.url}/v1/completions`, body, this.o, "completions", params.signal)) as {
      choices?: {
        index?: number;
        token_ids?: unknown;
        logprobs?: { token_logprobs?: unknown };
        finish_reason?: unknown;
      }[];
    };
    const choices = [...(r.choices ?? [])].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    if (choices.length !== n)
      throw new TinkerError(`${this.o.url}: completions returned ${choices.length} choices, ${n} were asked for`);
    return {
      sequences: choices.map((c, i) =>
        checked(this.o.url, i, c.token_ids, c.logprobs?.token_logprobs, c.finish_reason),
      ),
    };
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

  async sample(prompt: number[], params: SamplingParams, defaultStop: number[]): Promise<SampleResult> {
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
    const outs = (Array.isArray(r) ? r : [r]) as {
      output_ids?: unknown;
      meta_info?: { finish_reason?: { type?: unknown }; output_token_logprobs?: unknown[][] };
    }[];
    if (outs.length !== n)
      throw new TinkerError(`${this.o.url}: generate returned ${outs.length} outputs, ${n} were asked for`);
    return {
      sequences: outs.map((o, i) =>
        checked(
          this.o.url,
          i,
          o.output_ids,
          o.meta_info?.output_token_logprobs?.map((e) => (Array.isArray(e) ? e[0] : undefined)),
          o.meta_info?.finish_reason?.type,
        ),
      ),
    };
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
