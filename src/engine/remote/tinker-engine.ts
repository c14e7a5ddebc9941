/**
 * An Engine on a Tinker-protocol server (the hosted service, SkyRL's server, miles, Spindle, TuFT,
 * or `agent-r1 serve --tinker`). One session per engine with a heartbeat every 10 s; one training
 * model (a LoRA of `baseModel`, or the server's full weights); sampling through a sampling session
 * on the latest weights, made after each optimizer step (`save_weights_for_sampler` with a session
 * number: the SDK's save_weights_and_get_sampling_client). Training requests carry `seq_id` 1, 2,
 * ... in the order they are sent; large batches go in chunks of at most 1024 datums / 5 MB (or what
 * the server's client config says). Samples carry `seq_id` 0, 1, ... in each sampling session. The
 * tokenizer and chat template come from a local directory.
 *
 * What the SDK version adds (tinker-versions.ts): per-sequence sample ids read from each asample
 * acknowledgement and matched to the result (tinker-sample-ids.ts); completions polled per sampling
 * session (tinker-session-poller.ts) where the server turns it on; abandoned samples cancelled
 * where its dynamic config says so (tinker-cancel.ts). The handshake (client config, the session's
 * messages) is tinker-handshake.ts, the credential tinker-auth.ts.
 *
 * Nothing the server answers is trusted: every field read is checked (tinker-answer.ts,
 * tinker-results.ts) and a violation fails the call with a TinkerAnswerError naming the server, the
 * request and the field. The client waits as the SDK does (tinker-waits.ts, tinker-future.ts).
 *
 * A checkpoint of this engine is a directory with `remote.json` (the server, base model, LoRA
 * config and the `tinker://` path of the saved state) beside the tokenizer files; `load` continues
 * from it, and so does a new engine opened on it (after a server restart, as long as the server
 * kept its checkpoints).
 */
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { contextOf, readRemoteState, REMOTE_FILE, type RemoteState } from "./tinker-remote-state.js";
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
import { InputError } from "../../util/errors.js";
import { resolvedLoss } from "../../rl/policy-loss.js";
import { summarizeForwardBackward } from "../../rl/loss-metrics.js";
import { validateDatums } from "../validate-datums.js";
import { assertTokens } from "../validate.js";
import { TinkerHttp } from "./tinker-http.js";
import { Answer } from "./tinker-answer.js";
import { call, FutureDeadline, type CallSpec } from "./tinker-future.js";
import { readClientFlags, readSession } from "./tinker-handshake.js";
import { SessionPoller } from "./tinker-session-poller.js";
import { SampleCanceller } from "./tinker-cancel.js";
import { matchSequences, readSampleIds } from "./tinker-sample-ids.js";
import type { Clock } from "./tinker-waits.js";
import { checkSampledSequences, checkScoredLogprobs } from "./answer-checks.js";
import {
  encodeForwardBackwardProto,
  forwardBackwardToJson,
  type SampleResponse,
  type WireDatum,
} from "./tinker-codec.js";
import {
  checkChunkResult,
  readForwardBackwardJson,
  readForwardBackwardProto,
  readSampleJson,
  readSampleProto,
} from "./tinker-results.js";
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
  /** A shell command that prints the credential to send (instead of apiKey; tinker-auth.ts). */
  credentialCommand?: string;
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
  /** The longest pause while the server refuses for billing (HTTP 402). Default 1 h. */
  billingMaxPauseMs?: number;
  /** Time and waits (tinker-waits.ts); tests give one that counts waits instead of spending them. */
  clock?: Clock;
  log?: (line: string) => void;
}

/** A sampling session, the seq_id its next sample gets (they start at 0 in each session), and its completion poller. */
interface SamplingSession {
  id: string;
  nextSeq: number;
  poller?: SessionPoller;
}

export { readRemoteState, REMOTE_FILE, remoteStateSchema, type RemoteState } from "./tinker-remote-state.js";

const TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"];

export class TinkerEngine implements PolicyEngine {
  readonly tokenizer: Tokenizer;
  readonly config: { maxPositionEmbeddings: number; vocabSize: number };
  private sessionId = "";
  private modelId?: string;
  private trainSeq = 0;
  private modelSeq = 0;
  private samplingSessionSeq = 0;
  private samplingSession?: Promise<SamplingSession>;
  private step = 0;
  private heartbeat?: NodeJS.Timeout;
  private maxChunkLen = 1024;
  private maxChunkBytes = 5_000_000;
  /** Sample completions polled per sampling session (the server's flag, and SDK 0.31). */
  private polling = false;
  private readonly canceller: SampleCanceller;

  private constructor(
    private readonly http: TinkerHttp,
    private readonly o: TinkerEngineOptions,
  ) {
    this.tokenizer = Tokenizer.fromDir(o.tokenizerDir);
    this.config = contextOf(o.tokenizerDir, this.tokenizer);
    this.canceller = new SampleCanceller(http, o.sdkVersion);
  }

  /** Connects: client config, a session, and (unless sampler-only) the training model, restored when resuming. */
  static async open(o: TinkerEngineOptions): Promise<TinkerEngine> {
    const http = new TinkerHttp({
      url: o.url,
      apiKey: o.apiKey,
      credentialCommand: o.credentialCommand,
      sdkVersion: o.sdkVersion,
      requestTimeoutMs: o.requestTimeoutMs,
      futureTimeoutMs: o.futureTimeoutMs,
      maxRetries: o.maxRetries,
      maxResponseBytes: o.maxResponseBytes,
      billingMaxPauseMs: o.billingMaxPauseMs,
      clock: o.clock,
      log: o.log,
    });
    const e = new TinkerEngine(http, o);
    await e.connect();
    return e;
  }

  private async connect(): Promise<void> {
    const raw = await this.http.json("/api/v1/client/config", { sdk_version: this.o.sdkVersion }, "client/config");
    const flags = readClientFlags(raw, this.o.sdkVersion, this.http.url);
    this.http.compress = flags.compress;
    this.maxChunkLen = flags.maxChunkLen ?? this.maxChunkLen;
    this.maxChunkBytes = flags.maxChunkBytes ?? this.maxChunkBytes;
    if (flags.jwt) this.http.enableJwt();
    this.polling = flags.retrieveFutures && this.http.features.sessionPolling;
    if (this.http.features.cancel) await this.canceller.refresh();
    const session = await this.http.json(
      "/api/v1/create_session",
      { tags: ["agent-r1"], user_metadata: {}, sdk_version: this.o.sdkVersion, type: "create_session" },
      "create_session",
    );
    this.sessionId = readSession(session, this.http.url, this.o.log);
    this.startHeartbeat();
    if (this.o.samplerOnly) return;
    const lora = this.o.lora;
    const created = await this.submit(
      "CreateModel",
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
    this.modelId = created.answer.string(created.json, "model_id");
    if (this.o.resumeFrom) await this.load(this.o.resumeFrom);
  }

  /** A heartbeat every 10 s, one at a time (one may wait out a billing pause); the dynamic config is asked again with it when due. */
  private startHeartbeat(): void {
    let beating = false;
    this.heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      const dynamic = this.http.features.cancel ? this.canceller.refreshIfStale() : Promise.resolve();
      Promise.all([
        this.http.json(
          "/api/v1/session_heartbeat",
          { session_id: this.sessionId, type: "session_heartbeat" },
          "heartbeat",
        ),
        dynamic,
      ])
        .catch(() => undefined)
        .finally(() => (beating = false));
    }, 10_000);
    this.heartbeat.unref();
  }

  /**
   * POSTs a request that answers a future (of SDK result type `type`), and waits for its JSON
   * result, returned with the answer that names the server and the request in faults.
   */
  private async submit(
    type: string,
    path: string,
    body: unknown,
    what: string,
  ): Promise<{ json: Record<string, unknown>; answer: Answer }> {
    const { result, answer } = await call(this.http, { what, type, submit: () => this.http.json(path, body, what) });
    if (!("json" in result)) throw answer.fault("the result", "is protobuf where JSON was expected");
    return { json: result.json, answer };
  }

  private requireModel(what: string): string {
    if (!this.modelId)
      throw new InputError(`${what}: this tinker engine only samples (a reference policy); it has no training model`);
    return this.modelId;
  }

  // ---- sampling ----

  /** The sampling session of the current weights (made once per optimizer step); its samples number from 0. */
  private sampler(): Promise<SamplingSession> {
    if (this.samplingSession) return this.samplingSession;
    const p = (this.modelId ? this.samplerOfModel(this.modelId) : this.samplerOfBase()).then((id) => ({
      id,
      nextSeq: 0,
      ...(this.polling ? { poller: new SessionPoller(this.http, id) } : {}),
    }));
    this.samplingSession = p;
    p.catch(() => {
      if (this.samplingSession === p) this.samplingSession = undefined; // try again next time
    });
    return p;
  }

  /** The SDK's save_weights_and_get_sampling_client: a session on the training model's weights now. */
  private async samplerOfModel(modelId: string): Promise<string> {
    const what = "save_weights_for_sampler";
    const body = {
      model_id: modelId,
      seq_id: ++this.trainSeq,
      sampling_session_seq_id: this.samplingSessionSeq++,
      type: "save_weights_for_sampler",
    };
    const r = await this.submit("SaveWeightsForSampler", "/api/v1/save_weights_for_sampler", body, what);
    return r.answer.string(r.json, "sampling_session_id");
  }

  /** A sampling session on the base model (a sampler-only engine). */
  private async samplerOfBase(): Promise<string> {
    const body = {
      session_id: this.sessionId,
      sampling_session_seq_id: this.samplingSessionSeq++,
      base_model: this.o.baseModel,
      type: "create_sampling_session",
    };
    const r = await this.http.json("/api/v1/create_sampling_session", body, "create_sampling_session");
    return new Answer(this.http.url, "create_sampling_session").string(r, "sampling_session_id");
  }

  /**
   * One asample request and its result, read (not yet checked against what was asked) with the
   * sequences' ids matched, and the answer that names the server and the request. A push-back
   * (429) waits and sends the same sample again; a result that expired (410) is asked for again
   * with the session's next seq_id. A sample given up (its signal, or the call's deadline) is
   * cancelled on the server where it cancels samples.
   */
  private async asample(
    prompt: number[],
    params: Record<string, unknown>,
    n: number,
    promptLogprobs: boolean,
    signal?: AbortSignal,
  ): Promise<{ res: SampleResponse; answer: Answer }> {
    const session = await this.sampler();
    const what = "asample";
    // The last acknowledgement and its sequence ids (checked as it comes): its result is the one that comes back.
    let ack: Record<string, unknown> | undefined, ids: string[] | undefined;
    const poller = session.poller;
    const spec: CallSpec = {
      what,
      type: "Sample",
      proto: "sample",
      signal,
      ...(poller
        ? { ready: (id: string, named: string, deadline: number) => poller.waitFor(id, named, deadline, signal) }
        : {}),
      submit: async (deadline) => {
        const body = {
          prompt: { chunks: [{ type: "encoded_text", tokens: prompt }] },
          num_samples: n,
          sampling_params: params,
          sampling_session_id: session.id,
          seq_id: session.nextSeq++,
          prompt_logprobs: promptLogprobs,
          topk_prompt_logprobs: 0,
          type: "sample",
        };
        const opts = { signal, deadline, backpressure: true };
        ack = await this.http.json("/api/v1/asample", body, what, opts, { "X-Tinker-Sampling-Backpressure": "1" });
        const id = ack.request_id; // a malformed one is call()'s to refuse
        if (typeof id === "string" && id !== "")
          ids = readSampleIds(
            ack,
            n,
            this.http.features.sampleIds,
            new Answer(this.http.url, `${what} (request ${id})`),
          );
        return ack;
      },
    };
    let called: Awaited<ReturnType<typeof call>>;
    try {
      called = await call(this.http, spec);
    } catch (e) {
      this.abandoned(ack, e, signal);
      throw e;
    }
    const { result, answer } = called;
    const res = "bytes" in result ? readSampleProto(result.bytes, answer) : readSampleJson(result.json, answer);
    return { res: ids ? matchSequences(res, ids, answer) : res, answer };
  }

  /** A sample the caller gave up on (its signal aborted, or the call's deadline came): cancelled where the server takes that. */
  private abandoned(ack: Record<string, unknown> | undefined, e: unknown, signal?: AbortSignal): void {
    const id = ack?.request_id;
    if (!this.http.features.cancel || typeof id !== "string" || id === "") return;
    if (signal?.aborted || e instanceof FutureDeadline) this.canceller.abandon(id);
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    if ((params.topLogprobs ?? 0) > 0)
      throw new InputError("sample: the tinker engine cannot report top logprobs (topLogprobs must be 0)");
    const n = params.n ?? 1;
    const wire = this.samplingParams(params);
    const { res: out, answer } = await this.asample(prompt, wire, n, false, params.signal);
    const bounds = { n, maxTokens: wire.max_tokens as number, vocabSize: this.config.vocabSize };
    const checked = checkSampledSequences(out.sequences, bounds, answer.faults);
    const sequences = checked.map((s, i) => {
      const id = out.sequences[i].sequenceId;
      return { ...s, stopReason: out.sequences[i].stopReason, ...(id !== undefined ? { sequenceId: id } : {}) };
    });
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
        const { res, answer } = await this.asample(
          seq,
          { max_tokens: 1, temperature: 1, top_k: -1, top_p: 1 },
          1,
          true,
        );
        return [null, ...checkScoredLogprobs(res.promptLogprobs, seq.length, "prompt_logprobs", answer.faults)];
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
    const pending: Promise<{ logprobs: number[][]; lossSum: number }>[] = [];
    for (const chunk of chunks)
      pending.push((await this.sendForwardBackward(modelId, chunk, lossFn, lossFnConfig)).result);
    const outs = await Promise.all(pending);
    const logprobs = outs.flatMap((o) => o.logprobs);
    const lossSum = outs.reduce((sum, o) => sum + o.lossSum, 0);
    const res = summarizeForwardBackward(datums, resolved, logprobs, lossSum, NaN);
    delete res.metrics.entropy; // Tinker does not report it
    return res;
  }

  /**
   * Submits one chunk; returns, once it is submitted, the promise of its checked result (boxed: a
   * returned promise would be awaited). A result that expired is asked for by sending the chunk
   * again, with the same seq_id (the server takes it as a retry).
   */
  private async sendForwardBackward(
    modelId: string,
    chunk: WireDatum[],
    lossFn: string,
    lossFnConfig: Record<string, number> | undefined,
  ): Promise<{ result: Promise<{ logprobs: number[][]; lossSum: number }> }> {
    const req = { modelId, seqId: ++this.trainSeq, data: chunk, lossFn, lossFnConfig };
    const what = `forward_backward (seq_id ${req.seqId}, ${chunk.length} datums)`;
    const send = () =>
      this.http.proto
        ? this.http.protobuf("/api/v1/forward_backward", encodeForwardBackwardProto(req), what)
        : this.http.json("/api/v1/forward_backward", forwardBackwardToJson(req), what);
    // The first submission is made here, in order; a later one (after a 410) is the same request.
    let first: Promise<Record<string, unknown>> | undefined = send();
    await first;
    const submit = () => {
      const ack = first ?? send();
      first = undefined;
      return ack;
    };
    const targets = chunk.map((d) => d.inputs.target_tokens.data);
    const result = call(this.http, { what, type: "ForwardBackward", proto: "forward_backward", submit }).then(
      ({ result: r, answer }) => {
        const out =
          "bytes" in r
            ? readForwardBackwardProto(r.bytes, chunk.length, answer)
            : readForwardBackwardJson(r.json, answer);
        return checkChunkResult(out, targets, answer);
      },
    );
    result.catch(() => undefined); // awaited with the others; not an unhandled rejection meanwhile
    return { result };
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const modelId = this.requireModel("optimStep");
    if (!(params.lr > 0)) throw new InputError(`optimStep: lr must be positive, got ${params.lr}`);
    const { json: res, answer } = await this.submit(
      "OptimStep",
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
    const m = answer.optionalNumbers(res, "metrics") ?? {};
    const step = answer.optionalInteger(m, "step", 0, "metrics.step");
    const skipped = answer.optionalInteger(m, "skipped", 0, "metrics.skipped");
    if (skipped !== undefined && skipped > 1) throw answer.fault("metrics.skipped", `is ${skipped}, not 0 or 1`);
    if (skipped !== 1) this.step = step ?? this.step + 1;
    this.samplingSession = undefined; // new weights: the next sample gets a session on them
    return { gradNorm: m.grad_norm ?? NaN, skipped: skipped === 1, step: this.step };
  }

  /** Saves the state (weights and optimizer) on the server and writes `dir` (remote.json and the tokenizer). */
  async save(dir: string): Promise<void> {
    const modelId = this.requireModel("save");
    const name = `step-${this.step}-${Date.now().toString(36)}`;
    const saved = await this.submit(
      "SaveWeights",
      "/api/v1/save_weights",
      { model_id: modelId, path: name, seq_id: ++this.trainSeq, type: "save_weights" },
      "save_weights",
    );
    const path = saved.answer.string(saved.json, "path");
    if (!path.startsWith("tinker://")) throw saved.answer.fault("path", `is '${path}', not a tinker:// path`);
    mkdirSync(dir, { recursive: true });
    for (const f of TOKENIZER_FILES)
      if (existsSync(join(this.o.tokenizerDir, f))) copyFileSync(join(this.o.tokenizerDir, f), join(dir, f));
    const state: RemoteState = {
      kind: "tinker",
      url: this.http.url,
      baseModel: this.o.baseModel,
      ...(this.o.lora ? { lora: this.o.lora } : {}),
      path,
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
      "LoadWeights",
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
    await this.canceller.idle(); // the cancels of abandoned samples go out before the client does
  }
}
