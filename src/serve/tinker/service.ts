/**
 * What `agent-r1 serve --tinker` does behind its HTTP routes: sessions, training models (one
 * LocalEngine each, from a base model directory the server was started with), sampling sessions,
 * checkpoints under a state directory, and the futures the compute requests answer with.
 *
 * Weights: a model's weights change with optim_step and load_weights (its `version`). A sampling
 * session made by save_weights_for_sampler without a name samples the model's live weights of that
 * version; once they change it is stale and refused (this server keeps no copies: make a new one,
 * as the SDK does after each step). A named save writes the weights to disk, and a session on that
 * path (or on a base model) samples a separate engine loaded from disk.
 *
 * LoRA: the local engine trains full weights, so a LoRA config is accepted and recorded, and the
 * full weights are trained (get_info says is_lora: false).
 */
import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { randomUUID } from "node:crypto";
import type { LocalEngine, LocalEngineOptions } from "../../engine/local/local-engine.js";
import type { SamplingParams } from "../../engine/types.js";
import type {
  ForwardBackwardOutput,
  ForwardBackwardRequest,
  SampleResponse,
} from "../../engine/remote/tinker-codec.js";
import { datumFromJson } from "../../engine/remote/tinker-codec.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { Futures, type ResultKind, type Settled } from "./futures.js";
import { SeqQueue } from "./seq-queue.js";
import { elementwiseLosses, SUPPORTED_LOSSES, wireDatums, wireLossSpec } from "./wire-loss.js";

export interface TinkerServiceOptions {
  /** Base models by name: the name clients use (base_model) -> a model directory. */
  baseModels: Map<string, string>;
  /** Checkpoints go under <stateDir>/<model_id>/{weights,sampler_weights}/<name>. */
  stateDir: string;
  engineOptions?: LocalEngineOptions;
  /** How long a seq_id may wait for the ones before it. Default 120 s. */
  seqWaitMs?: number;
  /** Compress protobuf request bodies with zstd (client config `proto_compress_fwdbwd`). */
  compress?: boolean;
  log?: (line: string) => void;
}

interface Model {
  id: string;
  base: string;
  lora: unknown;
  engine: Promise<LocalEngine>;
  version: number;
  queue: SeqQueue;
}

interface SamplingSession {
  /** A live model at a version, or a separate engine (a base model or a saved path). */
  model?: Model;
  version?: number;
  engine?: Promise<LocalEngine>;
}

const str = (x: unknown, what: string): string => {
  if (typeof x !== "string" || x === "") throw new TinkerError(`${what} must be a non-empty string`, undefined, 400);
  return x;
};
const int = (x: unknown, what: string): number => {
  if (!Number.isSafeInteger(x)) throw new TinkerError(`${what} must be an integer`, undefined, 400);
  return x as number;
};

export class TinkerService {
  readonly futures = new Futures();
  private readonly sessions = new Set<string>();
  private readonly models = new Map<string, Model>();
  private readonly samplers = new Map<string, SamplingSession>();
  /** Engines loaded from disk for sampling, by directory (loaded once). */
  private readonly diskEngines = new Map<string, Promise<LocalEngine>>();
  private readonly stateDir: string;

  constructor(private readonly o: TinkerServiceOptions) {
    this.stateDir = resolve(o.stateDir);
    mkdirSync(this.stateDir, { recursive: true });
  }

  clientConfig(): Record<string, unknown> {
    return {
      pjwt_auth_enabled: false,
      proto_write_fwdbwd: true,
      proto_compress_fwdbwd: this.o.compress ?? false,
      fwdbwd_max_chunk_len: 1024,
      fwdbwd_max_chunk_bytes_count: 5_000_000,
      parallel_fwdbwd_chunks: false,
      use_pyqwest_transport: false,
      create_model_via_load_weights: false,
      sample_use_retrieve_futures: false,
    };
  }

  capabilities(): Record<string, unknown> {
    return {
      supported_models: [...this.o.baseModels.keys()].map((model_name) => ({ model_name })),
      supported_loss_fns: SUPPORTED_LOSSES,
    };
  }

  createSession(): Record<string, unknown> {
    const id = `session-${randomUUID()}`;
    this.sessions.add(id);
    return { session_id: id, type: "create_session" };
  }

  heartbeat(body: Record<string, unknown>): Record<string, unknown> {
    this.session(body.session_id);
    return { type: "session_heartbeat" };
  }

  private session(id: unknown): string {
    const s = str(id, "session_id");
    if (!this.sessions.has(s))
      throw new TinkerError(`no session ${s} on this server (was it restarted?)`, undefined, 404);
    return s;
  }

  private baseDir(name: string): string {
    const dir = this.o.baseModels.get(name);
    if (!dir)
      throw new TinkerError(
        `base_model '${name}' is not served here; this server has: ${[...this.o.baseModels.keys()].join(", ")}`,
        undefined,
        404,
      );
    return dir;
  }

  private async loadEngine(dir: string): Promise<LocalEngine> {
    const { LocalEngine } = await import("../../engine/local/local-engine.js");
    return LocalEngine.load(dir, this.o.engineOptions);
  }

  createModel(body: Record<string, unknown>): string {
    this.session(body.session_id);
    const base = str(body.base_model, "base_model");
    const dir = this.baseDir(base);
    const id = `model-${randomUUID().slice(0, 8)}`;
    const engine = this.loadEngine(dir);
    engine.catch(() => this.models.delete(id));
    const model: Model = {
      id,
      base,
      lora: body.lora_config ?? null,
      engine,
      version: 0,
      queue: new SeqQueue(id, this.o.seqWaitMs),
    };
    this.models.set(id, model);
    this.o.log?.(`tinker: model ${id} of ${base}${body.lora_config ? " (LoRA requested; full weights trained)" : ""}`);
    return this.futures.start("json", async () => {
      await engine;
      return { model_id: id, type: "create_model" };
    });
  }

  private model(id: unknown): Model {
    const m = this.models.get(str(id, "model_id"));
    if (!m) throw new TinkerError(`no model ${String(id)} on this server (was it restarted?)`, undefined, 404);
    return m;
  }

  getInfo(body: Record<string, unknown>): Record<string, unknown> {
    const m = this.model(body.model_id);
    return {
      model_id: m.id,
      model_data: { arch: "qwen2", model_name: m.base },
      model_name: m.base,
      is_lora: false,
      type: "get_info",
    };
  }

  unloadModel(body: Record<string, unknown>): string {
    const m = this.model(body.model_id);
    this.models.delete(m.id);
    return this.futures.start("json", async () => {
      await (await m.engine).dispose();
      return { model_id: m.id, type: "unload_model" };
    });
  }

  /** A training request of a model, run in seq_id order; `raw` is its body (to tell a retry from a clash). */
  private ordered<T>(
    m: Model,
    seq: unknown,
    raw: string | Uint8Array,
    kind: ResultKind,
    work: () => Promise<T>,
  ): string {
    return m.queue.submit(int(seq, "seq_id"), raw, work, (run) => this.futures.start(kind, run));
  }

  forwardBackward(req: ForwardBackwardRequest, raw: string | Uint8Array): string {
    const m = this.model(req.modelId);
    const spec = wireLossSpec(req.lossFn, req.lossFnConfig);
    const datums = wireDatums(req.data, req.lossFn);
    return this.ordered(m, req.seqId, raw, "forward_backward", async (): Promise<ForwardBackwardOutput> => {
      const engine = await m.engine;
      let logprobs: number[][];
      if (req.forwardOnly) {
        datums.forEach((d, i) => {
          if (d.tokens.slice(1).some((t, j) => t !== d.targetTokens[j]))
            throw new TinkerError(
              `data[${i}]: a forward-only pass here needs target_tokens to be model_input shifted by one`,
              undefined,
              400,
            );
        });
        const lp = await engine.computeLogprobs(
          datums.map((d) => [...d.tokens, d.targetTokens[d.targetTokens.length - 1]]),
        );
        logprobs = lp.map((r) => r.slice(1) as number[]);
      } else {
        logprobs = (await engine.forwardBackward(datums, spec)).logprobs;
      }
      const elementwise = elementwiseLosses(datums, spec, logprobs);
      const total = elementwise.flat().reduce((s, x) => s + x, 0);
      return {
        outputs: logprobs.map((lp, i) => ({ logprobs: lp, elementwise_loss: elementwise[i] })),
        metrics: { "loss:sum": total },
      };
    });
  }

  /** The JSON forward_backward / forward body. */
  forwardBackwardJson(body: Record<string, unknown>, raw: string, forwardOnly: boolean): string {
    const input = (body[forwardOnly ? "forward_input" : "forward_backward_input"] ?? body.forward_backward_input) as
      Record<string, unknown> | undefined;
    if (!input || !Array.isArray(input.data))
      throw new TinkerError(
        `${forwardOnly ? "forward_input" : "forward_backward_input"}.data must be a list of datums`,
        undefined,
        400,
      );
    const config = input.loss_fn_config as Record<string, number> | undefined;
    return this.forwardBackward(
      {
        modelId: str(body.model_id, "model_id"),
        seqId: int(body.seq_id, "seq_id"),
        data: input.data.map((d, i) => datumFromJson(d, `data[${i}]`)),
        lossFn: str(input.loss_fn, "loss_fn"),
        ...(config ? { lossFnConfig: config } : {}),
        forwardOnly,
      },
      raw,
    );
  }

  optimStep(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    const a = (body.adam_params ?? {}) as Record<string, unknown>;
    const num = (k: string, d: number) => {
      const v = a[k] ?? d;
      if (typeof v !== "number" || !Number.isFinite(v))
        throw new TinkerError(`adam_params.${k} must be a number`, undefined, 400);
      return v;
    };
    const params = {
      lr: num("learning_rate", 1e-4),
      beta1: num("beta1", 0.9),
      beta2: num("beta2", 0.95),
      eps: num("eps", 1e-12),
      weightDecay: num("weight_decay", 0),
      gradClipNorm: num("grad_clip_norm", 0),
    };
    if (!(params.lr > 0)) throw new TinkerError("adam_params.learning_rate must be positive", undefined, 400);
    return this.ordered(m, body.seq_id, raw, "json", async () => {
      const r = await (await m.engine).optimStep(params);
      if (!r.skipped) m.version++;
      return { metrics: { grad_norm: r.gradNorm, step: r.step, skipped: r.skipped ? 1 : 0 }, type: "optim_step" };
    });
  }

  private checkpointDir(modelId: string, kind: "weights" | "sampler_weights", name: string): string {
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(name) || name === "." || name === "..")
      throw new TinkerError(
        `path '${name}' must be a checkpoint name of letters, digits, '.', '_' and '-'`,
        undefined,
        400,
      );
    return join(this.stateDir, modelId, kind, name);
  }

  /** A tinker:// path of this server, as a directory under the state directory. */
  private pathDir(path: string, kinds: ("weights" | "sampler_weights")[]): string {
    const m = /^tinker:\/\/([A-Za-z0-9._-]+)\/(weights|sampler_weights)\/([A-Za-z0-9._-]+)$/.exec(path);
    if (!m || !kinds.includes(m[2] as "weights"))
      throw new TinkerError(`path '${path}' is not tinker://<model_id>/${kinds.join("|")}/<name>`, undefined, 400);
    const dir = this.checkpointDir(m[1], m[2] as "weights", m[3]);
    if (!existsSync(join(dir, "config.json")))
      throw new TinkerError(`no checkpoint at ${path} on this server`, undefined, 404);
    return dir;
  }

  saveWeights(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    const name = str(body.path, "path");
    const dir = this.checkpointDir(m.id, "weights", name);
    return this.ordered(m, body.seq_id, raw, "json", async () => {
      await (await m.engine).save(dir);
      return { path: `tinker://${m.id}/weights/${name}`, type: "save_weights" };
    });
  }

  loadWeights(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    const path = str(body.path, "path");
    const dir = this.pathDir(path, ["weights", "sampler_weights"]);
    return this.ordered(m, body.seq_id, raw, "json", async () => {
      await (await m.engine).load(dir);
      m.version++;
      return { path, type: "load_weights" };
    });
  }

  saveWeightsForSampler(body: Record<string, unknown>, raw: string): string {
    const m = this.model(body.model_id);
    if (typeof body.path === "string" && body.path !== "") {
      const name = body.path;
      const dir = this.checkpointDir(m.id, "sampler_weights", name);
      return this.ordered(m, body.seq_id, raw, "json", async () => {
        await (await m.engine).save(dir);
        return {
          path: `tinker://${m.id}/sampler_weights/${name}`,
          sampling_session_id: null,
          type: "save_weights_for_sampler",
        };
      });
    }
    int(body.sampling_session_seq_id, "sampling_session_seq_id");
    return this.ordered(m, body.seq_id, raw, "json", async () => {
      const id = `sampler-${randomUUID()}`;
      this.samplers.set(id, { model: m, version: m.version });
      return { path: null, sampling_session_id: id, type: "save_weights_for_sampler" };
    });
  }

  createSamplingSession(body: Record<string, unknown>): Record<string, unknown> {
    this.session(body.session_id);
    const hasBase = typeof body.base_model === "string" && body.base_model !== "",
      hasPath = typeof body.model_path === "string" && body.model_path !== "";
    if (hasBase === hasPath) throw new TinkerError("give exactly one of base_model and model_path", undefined, 400);
    const dir = hasBase
      ? this.baseDir(body.base_model as string)
      : this.pathDir(body.model_path as string, ["weights", "sampler_weights"]);
    let engine = this.diskEngines.get(dir);
    if (!engine) {
      engine = this.loadEngine(dir);
      engine.catch(() => this.diskEngines.delete(dir));
      this.diskEngines.set(dir, engine);
    }
    const id = `sampler-${randomUUID()}`;
    this.samplers.set(id, { engine });
    return { sampling_session_id: id, type: "create_sampling_session" };
  }

  asample(body: Record<string, unknown>): string {
    const sid = str(body.sampling_session_id, "sampling_session_id");
    const s = this.samplers.get(sid);
    if (!s) throw new TinkerError(`no sampling session ${sid} on this server (was it restarted?)`, undefined, 404);
    const prompt = datumFromJson({ model_input: body.prompt, loss_fn_inputs: {} }, "prompt").tokens;
    const n = body.num_samples === undefined ? 1 : int(body.num_samples, "num_samples");
    if (n < 1) throw new TinkerError("num_samples must be at least 1", undefined, 400);
    const params = samplingParams(body.sampling_params);
    const withPromptLogprobs = body.prompt_logprobs === true;
    return this.futures.start("sample", async (): Promise<SampleResponse> => {
      if (s.model && s.model.version !== s.version)
        throw new TinkerError(
          `sampling session ${sid} is of weights that have since changed (this server keeps only the latest); make a new one with save_weights_for_sampler`,
          undefined,
          409,
        );
      const engine = await (s.model ? s.model.engine : s.engine!);
      const [res, promptLp] = await Promise.all([
        engine.sample(prompt, { ...params, n }),
        withPromptLogprobs ? engine.computeLogprobs([prompt]) : Promise.resolve(undefined),
      ]);
      return {
        sequences: res.sequences.map((q) => ({ tokens: q.tokens, logprobs: q.logprobs, stopReason: q.stopReason })),
        promptLogprobs: promptLp ? promptLp[0] : null,
      };
    });
  }

  retrieve(id: unknown, waitMs: number): Promise<Settled | undefined> {
    return this.futures.retrieve(str(id, "request_id"), waitMs);
  }

  async close(): Promise<void> {
    await this.futures.drain();
    const engines = [...[...this.models.values()].map((m) => m.engine), ...this.diskEngines.values()];
    this.models.clear();
    this.diskEngines.clear();
    await Promise.all(engines.map((e) => e.then((x) => x.dispose()).catch(() => undefined)));
  }
}

/** Tinker's SamplingParams JSON as ours. */
function samplingParams(raw: unknown): SamplingParams {
  const p = (raw ?? {}) as Record<string, unknown>;
  const out: SamplingParams = {};
  const num = (k: string): number | undefined => {
    const v = p[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v))
      throw new TinkerError(`sampling_params.${k} must be a number`, undefined, 400);
    return v;
  };
  const maxTokens = num("max_tokens");
  if (maxTokens === undefined) throw new TinkerError("sampling_params.max_tokens is required", undefined, 400);
  out.maxTokens = maxTokens;
  const t = num("temperature"),
    k = num("top_k"),
    topP = num("top_p"),
    seed = num("seed");
  if (t !== undefined) out.temperature = t;
  if (k !== undefined) out.topK = k < 0 ? 0 : k;
  if (topP !== undefined) out.topP = topP;
  if (seed !== undefined) out.seed = seed;
  const stop = p.stop;
  if (typeof stop === "string") out.stop = [stop];
  else if (Array.isArray(stop)) {
    if (!(stop.every((s) => typeof s === "string") || stop.every((s) => Number.isInteger(s))))
      throw new TinkerError(
        "sampling_params.stop must be a string, a list of strings or a list of token ids",
        undefined,
        400,
      );
    out.stop = stop as (string | number)[];
  }
  return out;
}
