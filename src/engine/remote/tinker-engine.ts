/**
 * An Engine on a Tinker-protocol server (the hosted service, SkyRL's server, miles, Spindle, TuFT,
 * or `agent-r1 serve --tinker`). One session per engine with a heartbeat every 10 s; one training
 * model (a LoRA of `baseModel`, or the server's full weights); sampling through a sampling session
 * on the latest weights, made after each optimizer step (`save_weights_for_sampler` with a session
 * number: the SDK's save_weights_and_get_sampling_client). Training requests carry `seq_id` 1, 2,
 * ... in the order they are sent; large batches go in chunks of at most 1024 datums / 5 MB (or what
 * the server's client config says). The tokenizer and chat template come from a local directory.
 *
 * A checkpoint of this engine is a directory with `remote.json` (the server, base model, LoRA
 * config and the `tinker://` path of the saved state) beside the tokenizer files; `load` continues
 * from it, and so does a new engine opened on it (after a server restart, as long as the server
 * kept its checkpoints).
 */
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { PolicyEngine } from "../factory.js";
import type {
  AdamParams,
  Datum,
  ForwardBackwardResult,
  LossSpec,
  OptimStepResult,
  SampleResult,
  SamplingParams,
} from "../types.js";
import { Tokenizer } from "../../model/tokenizer.js";
import { readJsonFile } from "../../model/model-dir.js";
import { InputError } from "../../util/errors.js";
import { resolvedLoss } from "../../rl/policy-loss.js";
import { summarizeForwardBackward } from "../../rl/loss-metrics.js";
import { validateDatums } from "../validate-datums.js";
import { assertTokens } from "../validate.js";
import { TinkerError } from "./tinker-error.js";
import { TinkerHttp, type ProtoResult } from "./tinker-http.js";
import {
  checkSampledSequences,
  checkScoredLogprobs,
  checkTrainingLogprobs,
  decodeForwardBackwardOutputProto,
  decodeSampleResponseProto,
  encodeForwardBackwardProto,
  forwardBackwardOutputFromJson,
  forwardBackwardToJson,
  sampleResponseFromJson,
  type ForwardBackwardOutput,
  type SampleResponse,
  type WireDatum,
} from "./tinker-codec.js";
import { chunkDatums, tinkerLoss } from "./tinker-loss.js";

export interface LoraSettings {
  rank: number;
  seed?: number;
  trainAttn: boolean;
  trainMlp: boolean;
  trainUnembed: boolean;
}

export interface TinkerEngineOptions {
  url: string;
  apiKey?: string;
  /** The server's name of the base model (e.g. Qwen/Qwen3-4B-Instruct-2507). */
  baseModel: string;
  /** LoRA settings; omitted = full weights, where the server has them. */
  lora?: LoraSettings;
  /** The SDK version to report and speak. */
  sdkVersion: string;
  /** A local directory with tokenizer.json and tokenizer_config.json (and, optionally, config.json). */
  tokenizerDir: string;
  /** A checkpoint directory this engine wrote (its remote.json): continue from that state. */
  resumeFrom?: string;
  /** Only sample and score (a reference policy): no training model is created. */
  samplerOnly?: boolean;
  requestTimeoutMs?: number;
  futureTimeoutMs?: number;
  /** Times a failed request (or a lost connection) is retried before the call fails. Default 6. */
  maxRetries?: number;
  /** The largest answer read, in bytes (decompressed). Default 256 MiB (tinker-http.ts). */
  maxResponseBytes?: number;
  log?: (line: string) => void;
}

/** remote.json: where a checkpoint of this engine lives on the server. */
export const remoteStateSchema = z.strictObject({
  kind: z.literal("tinker"),
  url: z.string(),
  baseModel: z.string(),
  lora: z
    .strictObject({
      rank: z.number().int().positive(),
      seed: z.number().int().optional(),
      trainAttn: z.boolean(),
      trainMlp: z.boolean(),
      trainUnembed: z.boolean(),
    })
    .optional(),
  /** The saved state (weights and optimizer), `tinker://...`. */
  path: z.string().startsWith("tinker://"),
  step: z.number().int().nonnegative(),
  /** The SDK version the run spoke. */
  sdkVersion: z.string().optional(),
});
export type RemoteState = z.infer<typeof remoteStateSchema>;

export const REMOTE_FILE = "remote.json";

/** The remote.json of a directory; an InputError naming the file when it is malformed. */
export function readRemoteState(dir: string): RemoteState {
  const file = join(dir, REMOTE_FILE);
  const res = remoteStateSchema.safeParse(readJsonFile(file));
  if (!res.success) {
    const issue = res.error.issues[0];
    throw new InputError(`${file}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return res.data;
}

const TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"];

export class TinkerEngine implements PolicyEngine {
  readonly tokenizer: Tokenizer;
  readonly config: { maxPositionEmbeddings: number; vocabSize: number };
  private sessionId = "";
  private modelId?: string;
  private trainSeq = 0;
  private modelSeq = 0;
  private samplingSessionSeq = 0;
  private sampleSeq = 0;
  private samplingSession?: Promise<string>;
  private step = 0;
  private heartbeat?: NodeJS.Timeout;
  private maxChunkLen = 1024;
  private maxChunkBytes = 5_000_000;

  private constructor(
    private readonly http: TinkerHttp,
    private readonly o: TinkerEngineOptions,
  ) {
    this.tokenizer = Tokenizer.fromDir(o.tokenizerDir);
    this.config = contextOf(o.tokenizerDir, this.tokenizer);
  }

  /** Connects: client config, a session, and (unless sampler-only) the training model, restored when resuming. */
  static async open(o: TinkerEngineOptions): Promise<TinkerEngine> {
    const http = new TinkerHttp({
      url: o.url,
      apiKey: o.apiKey,
      sdkVersion: o.sdkVersion,
      requestTimeoutMs: o.requestTimeoutMs,
      futureTimeoutMs: o.futureTimeoutMs,
      maxRetries: o.maxRetries,
      maxResponseBytes: o.maxResponseBytes,
      log: o.log,
    });
    const e = new TinkerEngine(http, o);
    await e.connect();
    return e;
  }

  private async connect(): Promise<void> {
    const flags = await this.http.json("/api/v1/client/config", { sdk_version: this.o.sdkVersion }, "client/config");
    this.http.compress = flags.proto_compress_fwdbwd === true;
    if (typeof flags.fwdbwd_max_chunk_len === "number" && flags.fwdbwd_max_chunk_len > 0)
      this.maxChunkLen = flags.fwdbwd_max_chunk_len;
    if (typeof flags.fwdbwd_max_chunk_bytes_count === "number" && flags.fwdbwd_max_chunk_bytes_count > 0)
      this.maxChunkBytes = flags.fwdbwd_max_chunk_bytes_count;
    const session = await this.http.json(
      "/api/v1/create_session",
      { tags: ["agent-r1"], user_metadata: {}, sdk_version: this.o.sdkVersion, type: "create_session" },
      "create_session",
    );
    if (typeof session.session_id !== "string")
      throw new TinkerError(`${this.http.url}: create_session answered no session_id`);
    this.sessionId = session.session_id;
    this.heartbeat = setInterval(() => {
      this.http
        .json("/api/v1/session_heartbeat", { session_id: this.sessionId, type: "session_heartbeat" }, "heartbeat")
        .catch(() => undefined);
    }, 10_000);
    this.heartbeat.unref();
    if (this.o.samplerOnly) return;
    const lora = this.o.lora;
    const created = await this.submit(
      "/api/v1/create_model",
      {
        session_id: this.sessionId,
        model_seq_id: this.modelSeq++,
        base_model: this.o.baseModel,
        ...(lora
          ? {
              lora_config: {
                rank: lora.rank,
                ...(lora.seed !== undefined ? { seed: lora.seed } : {}),
                train_attn: lora.trainAttn,
                train_mlp: lora.trainMlp,
                train_unembed: lora.trainUnembed,
              },
            }
          : {}),
        type: "create_model",
      },
      `create_model of '${this.o.baseModel}'`,
    );
    if (typeof created.model_id !== "string")
      throw new TinkerError(`${this.http.url}: create_model of '${this.o.baseModel}' gave no model_id`);
    this.modelId = created.model_id;
    if (this.o.resumeFrom) await this.load(this.o.resumeFrom);
  }

  /** POSTs a request that answers a future, and waits for its JSON result. */
  private async submit(path: string, body: unknown, what: string): Promise<Record<string, unknown>> {
    const ack = await this.http.json(path, body, what);
    const res = await this.http.future(requestIdOf(ack, this.http.url, what), what);
    if (!("json" in res)) throw new TinkerError(`${this.http.url}: ${what} answered protobuf where JSON was expected`);
    return res.json;
  }

  private requireModel(what: string): string {
    if (!this.modelId)
      throw new InputError(`${what}: this tinker engine only samples (a reference policy); it has no training model`);
    return this.modelId;
  }

  // ---- sampling ----

  /** The sampling session of the current weights (made once per optimizer step). */
  private sampler(): Promise<string> {
    if (this.samplingSession) return this.samplingSession;
    const p = this.modelId
      ? this.submit(
          "/api/v1/save_weights_for_sampler",
          {
            model_id: this.modelId,
            seq_id: ++this.trainSeq,
            sampling_session_seq_id: this.samplingSessionSeq++,
            type: "save_weights_for_sampler",
          },
          "save_weights_for_sampler",
        ).then((r) => {
          if (typeof r.sampling_session_id !== "string")
            throw new TinkerError(`${this.http.url}: save_weights_for_sampler gave no sampling_session_id`);
          return r.sampling_session_id;
        })
      : this.http
          .json(
            "/api/v1/create_sampling_session",
            {
              session_id: this.sessionId,
              sampling_session_seq_id: this.samplingSessionSeq++,
              base_model: this.o.baseModel,
              type: "create_sampling_session",
            },
            "create_sampling_session",
          )
          .then((r) => {
            if (typeof r.sampling_session_id !== "string")
              throw new TinkerError(`${this.http.url}: create_sampling_session gave no sampling_session_id`);
            return r.sampling_session_id;
          });
    this.samplingSession = p;
    p.catch(() => {
      if (this.samplingSession === p) this.samplingSession = undefined; // try again next time
    });
    return p;
  }

  /** One asample request and its decoded result, with the request id that names it in errors. */
  private async asample(
    prompt: number[],
    params: Record<string, unknown>,
    n: number,
    promptLogprobs: boolean,
    signal?: AbortSignal,
  ): Promise<{ res: SampleResponse; requestId: string }> {
    const what = "asample";
    const body = {
      prompt: { chunks: [{ type: "encoded_text", tokens: prompt }] },
      num_samples: n,
      sampling_params: params,
      sampling_session_id: await this.sampler(),
      seq_id: this.sampleSeq++,
      prompt_logprobs: promptLogprobs,
      topk_prompt_logprobs: 0,
      type: "sample",
    };
    const ack = await this.http.json("/api/v1/asample", body, what, signal);
    const requestId = requestIdOf(ack, this.http.url, what);
    const res = await this.http.future(requestId, what, "sample" as ProtoResult, signal);
    const decoded = this.decoded(`asample (request ${requestId})`, () =>
      "bytes" in res ? decodeSampleResponseProto(res.bytes) : sampleResponseFromJson(res.json),
    );
    return { res: decoded, requestId };
  }

  /** A result decoded, or an error naming the server and request when it does not decode. */
  private decoded<T>(what: string, decode: () => T): T {
    try {
      return decode();
    } catch (e) {
      throw new TinkerError(
        `${this.http.url}: ${what} answered a result that does not decode: ${(e as Error).message}`,
      );
    }
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    if ((params.topLogprobs ?? 0) > 0)
      throw new InputError("sample: the tinker engine cannot report top logprobs (topLogprobs must be 0)");
    const n = params.n ?? 1;
    const wire = this.samplingParams(params);
    const { res: out, requestId } = await this.asample(prompt, wire, n, false, params.signal);
    const bounds = { n, maxTokens: wire.max_tokens as number, vocabSize: this.config.vocabSize };
    const checked = checkSampledSequences(
      `${this.http.url}: asample`,
      out.sequences,
      bounds,
      ` (request ${requestId})`,
    );
    const sequences = checked.map((s, i) => ({ ...s, stopReason: out.sequences[i].stopReason }));
    // No streaming over this protocol: the tokens are reported once the result is in, in order.
    if (params.onToken)
      sequences.forEach((s, index) =>
        s.tokens.forEach((token, t) => params.onToken!({ index, token, logprob: s.logprobs[t] })),
      );
    return { sequences };
  }

  private samplingParams(p: SamplingParams): Record<string, unknown> {
    const stop = p.stop ?? (this.tokenizer.eosTokenId !== undefined ? [this.tokenizer.eosTokenId] : []);
    const ids = stop.filter((s): s is number => typeof s === "number");
    const strings = stop.filter((s): s is string => typeof s === "string");
    // The wire takes token ids or strings, not both: a string that is one token becomes its id.
    let wireStop: number[] | string[] = ids.length > 0 || strings.length === 0 ? ids : strings;
    if (ids.length > 0 && strings.length > 0) {
      for (const s of strings) {
        const enc = this.tokenizer.encode(s);
        if (enc.length !== 1)
          throw new InputError(
            `sample: the tinker engine cannot stop on both token ids and the string ${JSON.stringify(s)} (it is not one token)`,
          );
        ids.push(enc[0]);
      }
      wireStop = ids;
    }
    return {
      max_tokens: p.maxTokens ?? 256,
      ...(p.seed !== undefined ? { seed: p.seed } : {}),
      stop: wireStop,
      temperature: p.temperature ?? 1,
      top_k: p.topK && p.topK > 0 ? p.topK : -1,
      top_p: p.topP ?? 1,
    };
  }

  async computeLogprobs(sequences: number[][], opts: { temperature?: number } = {}): Promise<(number | null)[][]> {
    if ((opts.temperature ?? 1) !== 1)
      throw new InputError(
        `computeLogprobs: the tinker engine scores at temperature 1, not ${opts.temperature}`,
        "sample at temperature 1 (rollout.temperature=1)",
      );
    return Promise.all(
      sequences.map(async (seq, i) => {
        assertTokens(seq, this.config.vocabSize, `computeLogprobs: sequence ${i}`);
        const { res, requestId } = await this.asample(
          seq,
          { max_tokens: 1, temperature: 1, top_k: -1, top_p: 1 },
          1,
          true,
        );
        const where = `${this.http.url}: asample with prompt_logprobs (sequence ${i})`;
        return [null, ...checkScoredLogprobs(where, res.promptLogprobs, seq.length, ` (request ${requestId})`)];
      }),
    );
  }

  // ---- training ----

  async forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    const modelId = this.requireModel("forwardBackward");
    const resolved = resolvedLoss(loss);
    validateDatums(datums, resolved);
    datums.forEach((d, i) => assertTokens([...d.tokens, ...d.targetTokens], this.config.vocabSize, `datum ${i}`));
    const { lossFn, lossFnConfig, data } = tinkerLoss(datums, loss);
    const chunks = chunkDatums(data, this.maxChunkLen, this.maxChunkBytes);
    // Sent one after another, so seq_ids reach the server in order; then all awaited together.
    const pending: Promise<ForwardBackwardOutput>[] = [];
    for (const chunk of chunks)
      pending.push((await this.sendForwardBackward(modelId, chunk, lossFn, lossFnConfig)).result);
    const outs = await Promise.all(pending);
    const logprobs: number[][] = [];
    let lossSum = 0;
    for (const o of outs) {
      for (const rec of o.outputs) logprobs.push(rec.logprobs ?? []);
      lossSum += o.metrics["loss:sum"] ?? NaN;
    }
    if (logprobs.length !== datums.length)
      throw new TinkerError(
        `${this.http.url}: forward_backward returned ${logprobs.length} outputs for ${datums.length} datums`,
      );
    logprobs.forEach((lp, i) => {
      if (lp.length !== datums[i].targetTokens.length)
        throw new TinkerError(
          `${this.http.url}: forward_backward returned ${lp.length} logprobs for datum ${i} of ${datums[i].targetTokens.length} targets`,
        );
    });
    checkTrainingLogprobs(`${this.http.url}: forward_backward`, logprobs);
    const res = summarizeForwardBackward(datums, resolved, logprobs, lossSum, NaN);
    delete res.metrics.entropy; // Tinker does not report it
    return res;
  }

  /** Submits one chunk; returns, once it is submitted, the promise of its result (boxed: a returned promise would be awaited). */
  private async sendForwardBackward(
    modelId: string,
    chunk: WireDatum[],
    lossFn: string,
    lossFnConfig: Record<string, number> | undefined,
  ): Promise<{ result: Promise<ForwardBackwardOutput> }> {
    const req = { modelId, seqId: ++this.trainSeq, data: chunk, lossFn, lossFnConfig };
    const what = `forward_backward (seq_id ${req.seqId}, ${chunk.length} datums)`;
    const ack = this.http.proto
      ? await this.http.protobuf("/api/v1/forward_backward", encodeForwardBackwardProto(req), what)
      : await this.http.json("/api/v1/forward_backward", forwardBackwardToJson(req), what);
    const id = requestIdOf(ack, this.http.url, what);
    const result = this.http
      .future(id, what, "forward_backward")
      .then((r) =>
        this.decoded(`${what} (request ${id})`, () =>
          "bytes" in r ? decodeForwardBackwardOutputProto(r.bytes) : forwardBackwardOutputFromJson(r.json),
        ),
      );
    result.catch(() => undefined); // awaited with the others; not an unhandled rejection meanwhile
    return { result };
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const modelId = this.requireModel("optimStep");
    if (!(params.lr > 0)) throw new InputError(`optimStep: lr must be positive, got ${params.lr}`);
    const res = await this.submit(
      "/api/v1/optim_step",
      {
        adam_params: {
          learning_rate: params.lr,
          beta1: params.beta1 ?? 0.9,
          beta2: params.beta2 ?? 0.999,
          eps: params.eps ?? 1e-8,
          weight_decay: params.weightDecay ?? 0,
          grad_clip_norm: params.gradClipNorm ?? 0,
        },
        model_id: modelId,
        seq_id: ++this.trainSeq,
        type: "optim_step",
      },
      "optim_step",
    );
    const m = (res.metrics ?? {}) as Record<string, number>;
    if (typeof m.step === "number" && !(Number.isSafeInteger(m.step) && m.step >= 0))
      throw new TinkerError(`${this.http.url}: optim_step returned metrics.step ${String(m.step)}, not a step count`);
    const skipped = m.skipped === 1;
    if (!skipped) this.step = typeof m.step === "number" ? m.step : this.step + 1;
    this.samplingSession = undefined; // new weights: the next sample gets a session on them
    return { gradNorm: typeof m.grad_norm === "number" ? m.grad_norm : NaN, skipped, step: this.step };
  }

  /** Saves the state (weights and optimizer) on the server and writes `dir` (remote.json and the tokenizer). */
  async save(dir: string): Promise<void> {
    const modelId = this.requireModel("save");
    const name = `step-${this.step}-${Date.now().toString(36)}`;
    const res = await this.submit(
      "/api/v1/save_weights",
      { model_id: modelId, path: name, seq_id: ++this.trainSeq, type: "save_weights" },
      "save_weights",
    );
    if (typeof res.path !== "string" || !res.path.startsWith("tinker://"))
      throw new TinkerError(`${this.http.url}: save_weights gave no tinker:// path`);
    mkdirSync(dir, { recursive: true });
    for (const f of TOKENIZER_FILES)
      if (existsSync(join(this.o.tokenizerDir, f))) copyFileSync(join(this.o.tokenizerDir, f), join(dir, f));
    const state: RemoteState = {
      kind: "tinker",
      url: this.http.url,
      baseModel: this.o.baseModel,
      ...(this.o.lora ? { lora: this.o.lora } : {}),
      path: res.path,
      step: this.step,
      sdkVersion: this.o.sdkVersion,
    };
    writeFileSync(join(dir, REMOTE_FILE), JSON.stringify(state, null, 2) + "\n");
  }

  /** Restores the state a `save` wrote into `dir` (weights and optimizer). */
  async load(dir: string): Promise<void> {
    const modelId = this.requireModel("load");
    const state = readRemoteState(dir);
    if (state.baseModel !== this.o.baseModel)
      throw new InputError(
        `${join(dir, REMOTE_FILE)}: the checkpoint is of '${state.baseModel}', this engine trains '${this.o.baseModel}'`,
      );
    await this.submit(
      "/api/v1/load_weights",
      { model_id: modelId, path: state.path, optimizer: true, seq_id: ++this.trainSeq, type: "load_weights" },
      `load_weights of ${state.path}`,
    );
    this.step = state.step;
    this.samplingSession = undefined;
  }

  describe(): string {
    const lora = this.o.lora ? `LoRA rank ${this.o.lora.rank}` : "full weights";
    return `tinker at ${this.http.url}, ${this.o.baseModel} (${lora}), SDK ${this.o.sdkVersion} (${this.http.proto ? "protobuf" : "JSON"})`;
  }

  async dispose(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }
}

function requestIdOf(ack: Record<string, unknown>, url: string, what: string): string {
  if (typeof ack.request_id !== "string") throw new TinkerError(`${url}: ${what} answered no request_id`);
  return ack.request_id;
}

/** The context window and vocabulary: from config.json beside the tokenizer, else the tokenizer's size and 32k. */
function contextOf(dir: string, tokenizer: Tokenizer): { maxPositionEmbeddings: number; vocabSize: number } {
  const file = join(dir, "config.json");
  const raw = existsSync(file) ? (readJsonFile(file) as Record<string, unknown>) : {};
  const num = (k: string) => (typeof raw[k] === "number" && (raw[k] as number) > 0 ? (raw[k] as number) : undefined);
  return {
    maxPositionEmbeddings: num("max_position_embeddings") ?? 32_768,
    vocabSize: num("vocab_size") ?? tokenizer.vocabSize,
  };
}
