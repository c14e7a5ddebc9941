/**
 * Rollout samplers on inference servers, token ids in and out:
 *  - vLLM: POST /v1/completions with a token-id prompt, `return_token_ids`, `logprobs: 0` and
 *    `stop_token_ids`; reads `choices[i].token_ids` and `logprobs.token_logprobs`. New weights are
 *    LoRA adapters only: POST /v1/load_lora_adapter {lora_name, lora_path} (answered with a line
 *    of text), then requests name the adapter as their `model`; /v1/unload_lora_adapter drops one.
 *  - SGLang: POST /generate with `input_ids` and `return_logprob`; reads `output_ids` and
 *    `meta_info.output_token_logprobs`. New weights: POST /update_weights_from_disk {model_path},
 *    or LoRA adapters: POST /load_lora_adapter, /unload_lora_adapter ({success, error_message}),
 *    and requests name the adapter in `lora_path`.
 * `agent-r1 serve` speaks both (src/serve/completions.ts, src/serve/sglang.ts, src/serve/lora-routes.ts),
 * which is how these clients are tested.
 *
 * The vLLM client also scores token sequences (a distillation teacher, src/engine/teacher.ts):
 * POST /v1/completions with the sequences as token-id prompts, `echo`, `logprobs: 0` and
 * `max_tokens: 1` (vLLM samples at least one token; it is dropped), reading the prompt part of
 * `logprobs.token_logprobs`. The SGLang client cannot: it reads no input logprobs, and
 * `promptScorer` refuses it in one line.
 *
 * Nothing a server answers is trusted: an answer is read within `maxResponseBytes` (default 256 MiB,
 * decompressed) and cut off past it; a redirect is an error naming where it points, never followed
 * (the API key would go along; both in ./sampler-http.ts); and the sequences are checked as answer-checks.ts says (as many as
 * asked, at most max_tokens token ids inside the vocabulary, logprobs finite and not above 0, a stop
 * reason of "stop" or "length"). Each failure is one TinkerError naming the server, the request and
 * the field ("http://host: completions: sequences[0].logprobs[2] is 0.5: above 0, ...").
 */
import type { SampleResult, SamplingParams, SampledSequence } from "../types.js";
import { InputError } from "../../util/errors.js";
import { TinkerError } from "./tinker-error.js";
import { checkSampledSequences, checkScoredLogprobs, type SampleBounds } from "./answer-checks.js";
import { postJson } from "./sampler-http.js";

export { DEFAULT_SAMPLER_RESPONSE_BYTES } from "./sampler-http.js";

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
  /** The recipe key naming the URL, for messages. Default engine.sampler.url. */
  urlField?: string;
}

export interface RolloutSampler {
  readonly kind: SamplerKind;
  /**
   * Samples `prompt`, on the LoRA adapter named `adapter` when given; the token ids that come back
   * must be below `vocabSize` when it is given.
   */
  sample(
    prompt: number[],
    params: SamplingParams,
    defaultStop: number[],
    vocabSize?: number,
    adapter?: string,
  ): Promise<SampleResult>;
  /** Points the server at new full weights written as a model directory (SGLang only). */
  reload(dir: string, version: number): Promise<void>;
  /** Has the server load the PEFT adapter in `dir` (a path the server can read) as `name`. */
  loadAdapter(name: string, dir: string): Promise<void>;
  /** Has the server drop the adapter `name`. */
  unloadAdapter(name: string): Promise<void>;
  describe(): string;
}

/** An unload waits at most 30 s (the end of a run waits for it). */
const unloadOptions = (o: SamplerOptions): SamplerOptions => ({
  ...o,
  timeoutMs: Math.min(o.timeoutMs ?? 30_000, 30_000),
});

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

/** A server that scores sequences as `Engine.computeLogprobs` does. */
export interface PromptScorer {
  /** Per sequence, entry 0 is null and entry i is log p(seq[i] | seq[<i]) at temperature 1. */
  computeLogprobs(sequences: number[][]): Promise<(number | null)[][]>;
  describe(): string;
}

/** Sequences per scoring request, and scoring requests in flight at most. */
const SCORE_BATCH = 16;
const SCORE_CONCURRENCY = 4;

class VllmSampler implements RolloutSampler, PromptScorer {
  readonly kind = "vllm";
  constructor(private readonly o: SamplerOptions) {}

  async sample(
    prompt: number[],
    params: SamplingParams,
    defaultStop: number[],
    vocabSize?: number,
    adapter?: string,
  ): Promise<SampleResult> {
    const n = params.n ?? 1;
    const model = adapter ?? this.o.model;
    const body = {
      ...(model ? { model } : {}),
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

  async reload(dir: string): Promise<void> {
    throw new InputError(
      `${this.o.url}: vLLM takes new weights over HTTP only as LoRA adapters, not the model directory ${dir}`,
      "train LoRA adapters (engine.lora), or use an SGLang server",
    );
  }

  async loadAdapter(name: string, dir: string): Promise<void> {
    const body = { lora_name: name, lora_path: dir };
    const what = `load_lora_adapter '${name}' (${dir})`;
    await postJson(`${this.o.url}/v1/load_lora_adapter`, body, this.o, what, undefined, true);
  }

  async unloadAdapter(name: string): Promise<void> {
    const what = `unload_lora_adapter '${name}'`;
    const o = unloadOptions(this.o);
    await postJson(`${this.o.url}/v1/unload_lora_adapter`, { lora_name: name }, o, what, undefined, true);
  }

  describe(): string {
    return `vllm at ${this.o.url}`;
  }

  async computeLogprobs(sequences: number[][]): Promise<(number | null)[][]> {
    const chunks: number[][][] = [];
    for (let i = 0; i < sequences.length; i += SCORE_BATCH) chunks.push(sequences.slice(i, i + SCORE_BATCH));
    const out: (number | null)[][][] = new Array(chunks.length);
    let next = 0;
    const worker = async () => {
      while (next < chunks.length) {
        const k = next++;
        out[k] = await this.scoreChunk(chunks[k], k * SCORE_BATCH);
      }
    };
    await Promise.all(Array.from({ length: Math.min(SCORE_CONCURRENCY, chunks.length) }, worker));
    return out.flat(1);
  }

  /** One request scoring `seqs` (sequences `first`, `first` + 1, ... of the call, for messages). */
  private async scoreChunk(seqs: number[][], first: number): Promise<(number | null)[][]> {
    const body = {
      ...(this.o.model ? { model: this.o.model } : {}),
      prompt: seqs,
      max_tokens: 1,
      temperature: 1,
      echo: true,
      logprobs: 0,
    };
    const what = "completions (echo, scoring)";
    const r = (await postJson(`${this.o.url}/v1/completions`, body, this.o, what)) as null | {
      choices?: { index?: number; logprobs?: { token_logprobs?: unknown }; prompt_token_ids?: unknown }[];
    };
    if (!Array.isArray(r?.choices) || r.choices.length !== seqs.length)
      throw new TinkerError(
        `${this.o.url}: ${what} answered ${r?.choices?.length ?? "no"} choices for ${seqs.length} prompts`,
      );
    const choices = [...r.choices].sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0));
    return choices.map((c, j) => {
      const seq = seqs[j];
      const where = `${this.o.url}: ${what} (sequence ${first + j})`;
      const ids = c?.prompt_token_ids;
      if (ids !== undefined && ids !== null && JSON.stringify(ids) !== JSON.stringify(seq))
        throw new TinkerError(`${where} echoed other prompt token ids than it was sent`);
      const lps = c?.logprobs?.token_logprobs;
      const prompt = Array.isArray(lps) ? lps.slice(0, seq.length) : lps;
      return [
        null,
        ...checkScoredLogprobs(
          prompt,
          seq.length,
          "prompt logprobs",
          (field, problem) => new TinkerError(`${where}: ${field} ${problem}`),
        ),
      ];
    });
  }
}

class SglangSampler implements RolloutSampler {
  readonly kind = "sglang";
  constructor(private readonly o: SamplerOptions) {}

  async sample(
    prompt: number[],
    params: SamplingParams,
    defaultStop: number[],
    vocabSize?: number,
    adapter?: string,
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
      ...(adapter !== undefined ? { lora_path: adapter } : {}),
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

  loadAdapter(name: string, dir: string): Promise<void> {
    return this.loraCall("load_lora_adapter", { lora_name: name, lora_path: dir }, `'${name}' (${dir})`);
  }

  unloadAdapter(name: string): Promise<void> {
    return this.loraCall("unload_lora_adapter", { lora_name: name }, `'${name}'`, unloadOptions(this.o));
  }

  /** One of SGLang's LoRA routes: `{success, error_message}` says how it went. */
  private async loraCall(route: string, body: object, which: string, o = this.o): Promise<void> {
    const what = `${route} ${which}`;
    const r = (await postJson(`${this.o.url}/${route}`, body, o, what)) as null | {
      success?: boolean;
      error_message?: string;
    };
    if (r?.success !== true)
      throw new TinkerError(`${this.o.url}: ${what} failed: ${r?.error_message ?? "no reason given"}`);
  }

  describe(): string {
    return `sglang at ${this.o.url}`;
  }
}

/** A server's scorer for sequences: vLLM's; SGLang's client cannot score (one line saying so). */
export function promptScorer(o: SamplerOptions): PromptScorer {
  if (o.kind !== "vllm")
    throw new InputError(
      `${o.kind} cannot score prompts here (the SGLang client reads no input logprobs); use vllm or tinker`,
    );
  return rolloutSampler(o) as VllmSampler;
}

export function rolloutSampler(o: SamplerOptions): RolloutSampler {
  try {
    new URL(o.url);
  } catch {
    throw new InputError(`${o.urlField ?? "engine.sampler.url"}: '${o.url}' is not a URL`);
  }
  const url = o.url.replace(/\/+$/, "");
  return o.kind === "vllm" ? new VllmSampler({ ...o, url }) : new SglangSampler({ ...o, url });
}
