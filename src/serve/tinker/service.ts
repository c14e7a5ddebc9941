/**
 * What `agent-r1 serve --tinker` does behind its HTTP routes: sessions, training models (one
 * LocalEngine each, from a base model directory the server was started with), sampling sessions,
 * checkpoints under a state directory, and the futures the compute requests answer with.
 *
 * Weights: a model's weights change with optim_step and load_weights (its `version`). A sampling
 * session made by save_weights_for_sampler without a name samples the model's live weights of that
 * version; once they change it is stale and refused (this server keeps no copies: make a new one,
 * as the SDK does after each step). A named save writes the weights to disk; a session on a base
 * model samples its shared engine, on a saved LoRA checkpoint its adapters over that engine, and on
 * saved full weights a separate engine loaded from disk.
 *
 * LoRA (./tenants.ts): a model with a lora_config of rank r > 0 trains LoRA adapters of rank r
 * over one shared copy of its base model, with its own optimizer state; no lora_config (or rank 0)
 * trains full weights of its own. A model that the memory plan (./memory-ledger.ts) cannot fit
 * beside what the server holds is refused with a 429 naming it and the budget.
 *
 * Resources: the server holds at most `maxModels` engines (training models plus models loaded for
 * sampling; another is a 429 naming the limit), and a session that neither heartbeats nor sends a
 * request for `sessionTtlMs` is closed, its models and sampling sessions unloaded, so clients that
 * end without unload_model (as the SDK does) do not pile engines up. Requests are bounded as
 * limits.ts says, and checked (wire-input.ts) before anything runs.
 *
 * SDK generations (sdk-support.ts): a session remembers the version it reported; its samples'
 * acknowledgements carry per-sequence ids from 0.25 (sample-fields.ts, which also refuses the
 * sampling fields this server does not compute); settled samples go to their sampling session's
 * completion log for `retrieve_futures` (session-futures.ts); `cancel_future` aborts a running
 * sample; `client/dynamic_config` says cancelling is on.
 */
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { randomUUID } from "node:crypto";
import type {
  ForwardBackwardOutput,
  ForwardBackwardRequest,
  SampleResponse,
  WireDatum,
} from "../../engine/remote/tinker-codec.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { makeDir } from "../../util/make-dir.js";
import { shown } from "../../util/shown.js";
import { Futures, type ResultKind, type Settled } from "./futures.js";
import { readPollRequest, SessionCompletions } from "./session-futures.js";
import { refuseUnsupportedSampling, sampleAck } from "./sample-fields.js";
import { pollsSessions, reportedSdk, sessionMessages, supportFields } from "./sdk-support.js";
import { SeqQueue } from "./seq-queue.js";
import { forwardLogprobs, planTokens, scorePlan } from "./forward-only.js";
import { CheckpointPaths } from "./checkpoint-paths.js";
import { elementwiseLosses, SUPPORTED_LOSSES, wireDatums, wireLossSpec } from "./wire-loss.js";
import { Tenants, type Lease, type SamplingEngine, type TrainingEngine } from "./tenants.js";
import { MAX_SESSIONS, positive, type TinkerServiceOptions } from "./service-options.js";
import { describeTraining, trainingOf, type Training } from "./lora-request.js";
import { chunkConfig, checkRequestTokens, checkSamples, tinkerLimits, type TinkerLimits } from "./limits.js";
import {
  adamParams,
  flag,
  shapeOf,
  checkDatums,
  int,
  jsonDatums,
  modelInput,
  obj,
  samplingParams,
  str,
  type ModelShape,
} from "./wire-input.js";

export type { TinkerServiceOptions } from "./service-options.js";

interface Model {
  id: string;
  session: string;
  base: string;
  training: Training;
  engine: Promise<TrainingEngine>;
  /** Disposes the engine and lets its memory (and its use of a shared base) go. */
  release(): Promise<void>;
  version: number;
  queue: SeqQueue;
  /** The vocabulary and context window of the weights it holds (load_weights may change them). */
  shape: ModelShape;
}

interface SamplingSession {
  session: string;
  /** A live model at a version, or a separate engine (a base model or a saved path). */
  model?: Model;
  version?: number;
  engine?: Promise<SamplingEngine>;
  shape: ModelShape;
}

export class TinkerService {
  readonly futures = new Futures();
  /** Settled samples per sampling session, for retrieve_futures. */
  readonly completions = new SessionCompletions();
  /** Session id -> the SDK version it reported (undefined: none, or not a version). */
  private readonly sessionSdk = new Map<string, string | undefined>();
  readonly limits: TinkerLimits;
  /** Session id -> when it was last heard from (ms). */
  private readonly sessions = new Map<string, number>();
  private readonly maxModels: number;
  private readonly sessionTtlMs: number;
  private readonly sweeper: NodeJS.Timeout;
  private readonly models = new Map<string, Model>();
  private readonly samplers = new Map<string, SamplingSession>();
  /** Engines loaded from disk for sampling, by directory (loaded once). */
  private readonly diskEngines = new Map<string, Lease<SamplingEngine>>();
  /** The engines: shared bases, LoRA and full models, samplers; and the memory plan over them. */
  private readonly tenants: Tenants;
  /** The state directory, links resolved: every checkpoint resolves inside it. */
  private readonly checkpoints: CheckpointPaths;
  private readonly baseShapes = new Map<string, ModelShape>();

  constructor(private readonly o: TinkerServiceOptions) {
    this.limits = tinkerLimits(o);
    makeDir(resolve(o.stateDir), "serve --tinker: --state-dir");
    this.checkpoints = new CheckpointPaths(realpathSync(resolve(o.stateDir)));
    this.tenants = new Tenants(o.baseModels, o.engineOptions);
    for (const [name, dir] of o.baseModels) this.baseShapes.set(name, shapeOf(dir, `base model '${name}'`));
    this.maxModels = positive(o.maxModels ?? 8, "maxModels");
    this.sessionTtlMs = positive(o.sessionTtlMs ?? 5 * 60_000, "sessionTtlMs");
    this.sweeper = setInterval(() => this.closeIdleSessions(), Math.max(50, this.sessionTtlMs / 4));
    this.sweeper.unref();
  }

  /** What the server holds now (sessions, training models, sampling sessions, engines loaded for sampling). */
  stats(): { sessions: number; models: number; samplers: number; diskEngines: number } {
    return {
      sessions: this.sessions.size,
      models: this.models.size,
      samplers: this.samplers.size,
      diskEngines: this.diskEngines.size,
    };
  }

  /** Base models held once for the LoRA models and samplers over them, with how many use each. */
  sharedBases(): Record<string, number> {
    return this.tenants.sharedBases();
  }

  /** The client config; `jwt`: the server issues JWTs (auth/token). */
  clientConfig(jwt = false): Record<string, unknown> {
    return {
      pjwt_auth_enabled: jwt,
      proto_write_fwdbwd: true,
      proto_compress_fwdbwd: this.o.compress ?? false,
      ...chunkConfig(this.limits),
      parallel_fwdbwd_chunks: false,
      use_pyqwest_transport: false,
      create_model_via_load_weights: false,
      sample_use_retrieve_futures: true,
      ...supportFields({ compress: this.o.compress ?? false, jwt }),
    };
  }

  dynamicConfig(): Record<string, unknown> {
    const d = this.o.dynamicConfig ?? {};
    return {
      refresh_interval_sec: d.refreshIntervalS ?? 300,
      sample_cancel_enabled: d.cancelEnabled ?? true,
      sample_cancel_max_batch_size: d.cancelBatch ?? 64,
    };
  }

  capabilities(): Record<string, unknown> {
    return {
      supported_models: [...this.o.baseModels.keys()].map((model_name) => ({ model_name })),
      supported_loss_fns: SUPPORTED_LOSSES,
    };
  }

  createSession(body: Record<string, unknown> = {}): Record<string, unknown> {
    if (this.sessions.size >= MAX_SESSIONS)
      throw new TinkerError(
        `this server holds ${MAX_SESSIONS} sessions; an idle one closes after ${this.sessionTtlMs / 1000} s`,
        undefined,
        429,
      );
    const id = `session-${randomUUID()}`;
    const sdk = reportedSdk(body.sdk_version);
    this.sessions.set(id, Date.now());
    this.sessionSdk.set(id, sdk);
    return { session_id: id, type: "create_session", ...sessionMessages(sdk) };
  }

  heartbeat(body: Record<string, unknown>): Record<string, unknown> {
    this.session(body.session_id);
    return { type: "session_heartbeat" };
  }

  private session(id: unknown): string {
    const s = str(id, "session_id");
    if (!this.sessions.has(s))
      throw new TinkerError(
        `no session ${shown(s)} on this server (was it restarted, or the session idle for ${this.sessionTtlMs / 1000} s?)`,
        undefined,
        404,
      );
    this.sessions.set(s, Date.now());
    return s;
  }

  /** Notes that a session is in use (a request for one of its models or sampling sessions). */
  private touch(session: string): void {
    if (this.sessions.has(session)) this.sessions.set(session, Date.now());
  }

  /** Closes every session idle past sessionTtlMs, with what it holds. */
  private closeIdleSessions(): void {
    const now = Date.now();
    for (const [id, seen] of this.sessions) if (now - seen > this.sessionTtlMs) this.closeSession(id);
  }

  private closeSession(id: string): void {
    this.sessions.delete(id);
    this.sessionSdk.delete(id);
    let unloaded = 0;
    for (const m of [...this.models.values()].filter((x) => x.session === id)) {
      this.models.delete(m.id);
      unloaded++;
      void m.queue
        .settled()
        .then(() => m.release())
        .catch(() => undefined);
    }
    for (const [sid, s] of this.samplers)
      if (s.session === id) {
        this.samplers.delete(sid);
        this.completions.drop(sid);
      }
    const used = new Set([...this.samplers.values()].map((s) => s.engine));
    for (const [dir, lease] of this.diskEngines) {
      if (used.has(lease.engine)) continue;
      this.diskEngines.delete(dir);
      unloaded++;
      void lease.release();
    }
    this.o.log?.(
      `tinker: session ${id} was idle for ${this.sessionTtlMs / 1000} s: closed, ${unloaded} engines unloaded`,
    );
  }

  /** A 429 when loading one more engine would pass maxModels. */
  private roomForEngine(): void {
    if (this.models.size + this.diskEngines.size < this.maxModels) return;
    throw new TinkerError(
      `this server holds ${this.maxModels} models (maxModels), for training and sampling; unload one (unload_model), or wait for an idle session to close (${this.sessionTtlMs / 1000} s)`,
      undefined,
      429,
    );
  }

  private baseDir(name: string): string {
    const dir = this.o.baseModels.get(name);
    if (!dir)
      throw new TinkerError(
        `base_model '${shown(name)}' is not served here; this server has: ${[...this.o.baseModels.keys()].join(", ")}`,
        undefined,
        404,
      );
    return dir;
  }

  createModel(body: Record<string, unknown>): string {
    const session = this.session(body.session_id);
    const base = str(body.base_model, "base_model");
    const training = trainingOf(body.lora_config, shapeOf(this.baseDir(base), `base model '${base}'`).config);
    this.roomForEngine();
    const id = `model-${randomUUID().slice(0, 8)}`;
    const { engine, release } = this.tenants.trainer(id, base, training);
    engine.catch(() => this.models.delete(id));
    const model: Model = {
      id,
      session,
      base,
      training,
      engine,
      release,
      version: 0,
      queue: new SeqQueue(id, this.o.seqWaitMs),
      shape: this.baseShapes.get(base)!,
    };
    this.models.set(id, model);
    this.o.log?.(`tinker: model ${id} of ${base}: ${describeTraining(training)}`);
    return this.futures.start("json", async () => {
      await engine;
      return { model_id: id, type: "create_model" };
    });
  }

  private model(id: unknown): Model {
    const m = this.models.get(str(id, "model_id"));
    if (!m)
      throw new TinkerError(
        `no model ${shown(String(id))} on this server (was it restarted, unloaded, or its session idle for ${this.sessionTtlMs / 1000} s?)`,
        undefined,
        404,
      );
    this.touch(m.session);
    return m;
  }

  getInfo(body: Record<string, unknown>): Record<string, unknown> {
    const m = this.model(body.model_id);
    return {
      model_id: m.id,
      model_data: { arch: "qwen2", model_name: m.base },
      model_name: m.base,
      is_lora: m.training.kind === "lora",
      ...(m.training.kind === "lora" ? { lora_rank: m.training.spec.rank } : {}),
      type: "get_info",
    };
  }

  unloadModel(body: Record<string, unknown>): string {
    const m = this.model(body.model_id);
    this.models.delete(m.id);
    return this.futures.start("json", async () => {
      await m.queue.settled();
      await m.release();
      return { model_id: m.id, type: "unload_model" };
    });
  }

  /**
   * A training request of a model, run in seq_id order; `raw` is its body (to tell a retry from a
   * clash). `prepare` checks the request and returns its work; a request it refuses leaves its
   * seq_id free (and not waited for in vain), so the queue goes on.
   */
  private ordered<T>(
    m: Model,
    seqRaw: unknown,
    raw: string | Uint8Array,
    kind: ResultKind,
    prepare: () => () => Promise<T>,
  ): string {
    const seq = int(seqRaw, "seq_id", 1);
    let work: () => Promise<T>;
    try {
      work = prepare();
    } catch (e) {
      m.queue.refused(seq);
      throw e;
    }
    return m.queue.submit(seq, raw, work, (run) => this.futures.start(kind, run));
  }

  forwardBackward(req: ForwardBackwardRequest, raw: string | Uint8Array, field = "data"): string {
    const m = this.model(req.modelId);
    return this.ordered(m, req.seqId, raw, "forward_backward", () => {
      const spec = wireLossSpec(req.lossFn, req.lossFnConfig);
      checkDatums(req.data, field, m.shape, this.limits);
      const datums = wireDatums(req.data, req.lossFn);
      const plan = req.forwardOnly ? scorePlan(datums) : undefined;
      if (plan)
        checkRequestTokens(
          this.limits,
          planTokens(plan),
          field,
          `${plan.sequences.length} sequences scored for the targets of ${datums.length} datums`,
        );
      return async (): Promise<ForwardBackwardOutput> => {
        const engine = await m.engine;
        const logprobs = plan
          ? await forwardLogprobs(engine, plan)
          : (await engine.forwardBackward(datums, spec)).logprobs;
        const elementwise = elementwiseLosses(datums, spec, logprobs);
        const total = elementwise.flat().reduce((s, x) => s + x, 0);
        return {
          outputs: logprobs.map((lp, i) => ({ logprobs: lp, elementwise_loss: elementwise[i] })),
          metrics: { "loss:sum": total },
        };
      };
    });
  }

  /** The JSON forward_backward / forward body. */
  forwardBackwardJson(body: Record<string, unknown>, raw: string, forwardOnly: boolean): string {
    const m = this.model(body.model_id);
    const key = forwardOnly ? "forward_input" : "forward_backward_input";
    const field = body[key] === undefined && body.forward_backward_input !== undefined ? "forward_backward_input" : key;
    const seq = int(body.seq_id, "seq_id", 1);
    let input: Record<string, unknown>, data: WireDatum[], lossFn: string;
    try {
      input = obj(body[field], field);
      lossFn = str(input.loss_fn, `${field}.loss_fn`);
      wireLossSpec(lossFn, input.loss_fn_config);
      data = jsonDatums(input.data, `${field}.data`, m.shape, this.limits);
    } catch (e) {
      m.queue.refused(seq);
      throw e;
    }
    return this.forwardBackward(
      {
        modelId: m.id,
        seqId: seq,
        data,
        lossFn,
        ...(input.loss_fn_config != null ? { lossFnConfig: input.loss_fn_config as Record<string, number> } : {}),
        forwardOnly,
      },
      raw,
      `${field}.data`,
    );
  }

  optimStep(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    return this.ordered(m, body.seq_id, raw, "json", () => {
      const params = adamParams(body.adam_params);
      return async () => {
        const r = await (await m.engine).optimStep(params);
        if (!r.skipped) m.version++;
        return { metrics: { grad_norm: r.gradNorm, step: r.step, skipped: r.skipped ? 1 : 0 }, type: "optim_step" };
      };
    });
  }

  saveWeights(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    return this.ordered(m, body.seq_id, raw, "json", () => {
      const name = str(body.path, "path");
      const where = `path '${shown(name, 200)}'`;
      const dir = this.checkpoints.dir(m.id, "weights", name, where);
      return async () => {
        this.checkpoints.checkInside(dir, where);
        await (await m.engine).save(dir);
        return { path: `tinker://${m.id}/weights/${name}`, type: "save_weights" };
      };
    });
  }

  loadWeights(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    return this.ordered(m, body.seq_id, raw, "json", () => {
      const path = str(body.path, "path");
      const dir = this.checkpoints.fromPath(path, "path");
      const shape = shapeOf(dir, path);
      this.tenants.checkLoadable(m.training, dir, path, m.id);
      return async () => {
        this.checkpoints.checkInside(dir, `path '${path}'`);
        await (await m.engine).load(dir);
        m.version++;
        m.shape = shape;
        return { path, type: "load_weights" };
      };
    });
  }

  saveWeightsForSampler(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    if (body.path !== undefined && body.path !== null && body.path !== "") {
      return this.ordered(m, body.seq_id, raw, "json", () => {
        const name = str(body.path, "path");
        const where = `path '${shown(name, 200)}'`;
        const dir = this.checkpoints.dir(m.id, "sampler_weights", name, where);
        return async () => {
          this.checkpoints.checkInside(dir, where);
          await (await m.engine).save(dir);
          return {
            path: `tinker://${m.id}/sampler_weights/${name}`,
            sampling_session_id: null,
            type: "save_weights_for_sampler",
          };
        };
      });
    }
    return this.ordered(m, body.seq_id, raw, "json", () => {
      int(body.sampling_session_seq_id, "sampling_session_seq_id");
      return async () => {
        const id = `sampler-${randomUUID()}`;
        this.samplers.set(id, { session: m.session, model: m, version: m.version, shape: m.shape });
        return { path: null, sampling_session_id: id, type: "save_weights_for_sampler" };
      };
    });
  }

  createSamplingSession(body: Record<string, unknown>): Record<string, unknown> {
    const session = this.session(body.session_id);
    const hasBase = body.base_model !== undefined && body.base_model !== null,
      hasPath = body.model_path !== undefined && body.model_path !== null;
    if (hasBase === hasPath) throw new TinkerError("give exactly one of base_model and model_path");
    let dir: string, shape: ModelShape;
    if (hasBase) {
      const base = str(body.base_model, "base_model");
      dir = this.baseDir(base);
      shape = this.baseShapes.get(base)!;
    } else {
      const path = str(body.model_path, "model_path");
      dir = this.checkpoints.fromPath(path, "model_path");
      shape = shapeOf(dir, path);
    }
    let lease = this.diskEngines.get(dir);
    if (!lease) {
      this.roomForEngine();
      lease = this.tenants.sampler(dir, hasBase ? "create_sampling_session" : `model_path '${body.model_path}'`);
      lease.engine.catch(() => this.diskEngines.delete(dir));
      this.diskEngines.set(dir, lease);
    }
    const id = `sampler-${randomUUID()}`;
    this.samplers.set(id, { session, engine: lease.engine, shape });
    return { sampling_session_id: id, type: "create_sampling_session" };
  }

  private sampler(sid: string): SamplingSession {
    const s = this.samplers.get(sid);
    if (!s)
      throw new TinkerError(
        `no sampling session ${shown(sid)} on this server (was it restarted, or its session idle for ${this.sessionTtlMs / 1000} s?)`,
        undefined,
        404,
      );
    this.touch(s.session);
    return s;
  }

  /** An asample: its acknowledgement (the request id, and per-sequence ids for the versions that have them). */
  asample(body: Record<string, unknown>): Record<string, unknown> {
    const sid = str(body.sampling_session_id, "sampling_session_id");
    const s = this.sampler(sid);
    const prompt = modelInput(body.prompt, "prompt", s.shape.vocab);
    if (prompt.length === 0) throw new TinkerError("prompt.chunks hold no tokens; a prompt needs at least one");
    if (prompt.length > s.shape.window)
      throw new TinkerError(
        `prompt is ${prompt.length} tokens; this model's context window is ${s.shape.window} tokens`,
      );
    const n = body.num_samples === undefined || body.num_samples === null ? 1 : int(body.num_samples, "num_samples", 1);
    checkSamples(this.limits, n);
    const params = samplingParams(body.sampling_params, s.shape);
    const withPromptLogprobs = flag(body.prompt_logprobs, "prompt_logprobs");
    refuseUnsupportedSampling(body);
    const seq = body.seq_id === undefined || body.seq_id === null ? 0 : int(body.seq_id, "seq_id");
    // Each sequence stops at the context window, so that is all it can cost.
    const perSequence = Math.min(params.maxTokens, Math.max(0, s.shape.window - prompt.length));
    const scored = withPromptLogprobs ? prompt.length : 0;
    checkRequestTokens(
      this.limits,
      prompt.length + scored + n * perSequence,
      "num_samples",
      `${prompt.length} prompt${scored ? ` + ${scored} scored` : ""} + ${n} samples × ${perSequence} new`,
    );
    const work = async (signal: AbortSignal): Promise<SampleResponse> => {
      if (s.model && s.model.version !== s.version)
        throw new TinkerError(
          `sampling session ${sid} is of weights that have since changed (this server keeps only the latest); make a new one with save_weights_for_sampler`,
          undefined,
          409,
        );
      const engine = await (s.model ? s.model.engine : s.engine!);
      const [res, promptLp] = await Promise.all([
        engine.sample(prompt, { ...params, n, signal }),
        withPromptLogprobs ? engine.computeLogprobs([prompt]) : Promise.resolve(undefined),
      ]);
      return {
        sequences: res.sequences.map((q) => ({ tokens: q.tokens, logprobs: q.logprobs, stopReason: q.stopReason })),
        promptLogprobs: promptLp ? promptLp[0] : null,
      };
    };
    // A client's own samples are cloned sampler 0; a clone's seq_ids are blocks of 10⁹ (the SDK's).
    const cloned = Math.floor(seq / 1_000_000_000);
    const sdk = this.sessionSdk.get(s.session);
    const id = this.futures.start("sample", work, (ok) => {
      if (pollsSessions(sdk) && this.samplers.has(sid)) this.completions.record(sid, cloned, id, ok);
    });
    return sampleAck(id, n, sdk);
  }

  retrieve(id: unknown, waitMs: number): Promise<Settled | undefined> {
    return this.futures.retrieve(str(id, "request_id"), waitMs);
  }

  /** retrieve_futures: the samples of a sampling session that settled since the client's cursor, waiting up to `pollMs`. */
  retrieveFutures(body: Record<string, unknown>, pollMs: number): ReturnType<SessionCompletions["poll"]> {
    const r = readPollRequest(body);
    this.sampler(r.samplingSessionId);
    return this.completions.poll(r, Math.min(r.waitMs ?? pollMs, pollMs));
  }

  /** cancel_future: aborts a running sample (only samples are cancelled). */
  cancelFuture(body: Record<string, unknown>): Record<string, unknown> {
    const id = str(body.request_id, "request_id");
    const kind = this.futures.kindOf(id);
    if (kind !== undefined && kind !== "sample")
      throw new TinkerError(`request ${shown(id)} is not a sample; only samples are cancelled`);
    return { type: "cancel_future", request_id: id, cancelled: this.futures.cancel(id) };
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.futures.drain();
    const leases = [...this.models.values(), ...this.diskEngines.values()];
    this.models.clear();
    this.diskEngines.clear();
    await Promise.all(leases.map((l) => l.release()));
  }
}
