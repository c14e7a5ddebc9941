/**
 * The in-process engine, over one of two backends: the C engine (./native/, the default where the
 * addon loads: one replica in this thread, whose kernels use every core) or TensorFlow.js wasm
 * (./tfjs/: one replica per worker thread, each with its own wasm instance, or a single one in
 * this thread). Replicas are called through one interface (./replica-api.ts), and every call is
 * split across them:
 *  - sample: n sequences split across replicas (sequence i keeps random stream
 *    i wherever it runs); a single sequence goes to the replica whose prefix
 *    cache already holds the longest part of its prompt, else the least loaded;
 *  - computeLogprobs / forwardBackward: datums split by token count, with the
 *    loss aggregation computed over the whole call so the split changes nothing;
 *  - optimStep: each replica writes its gradients to shared memory, then every
 *    replica applies the same sum, in the same order: the weights stay identical.
 * Sampling and training share the replicas, so they take turns (a RwGate): sample calls run
 * together, while a training pass (policy or critic), an optimizer step or a load runs alone,
 * after the sample calls in flight have finished and before the ones that came later start. A
 * sampled sequence therefore comes from one set of weights, and a training pass never meets a
 * running decode batch's keys and values (which TF.js's heap plan does not count). Scoring
 * (computeLogprobs, critic values) changes nothing and is not gated.
 */
import { availableParallelism } from "node:os";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Replica } from "./replica.js";
import type { ReplicaApi, ReplicaOptions, ReplicaStats, Role } from "./replica-api.js";
import { WorkerReplica } from "./worker-replica.js";
import { isLoraDir } from "./native/lora-checkpoint.js";
import type { NativeTrainable } from "./native/native-trainable.js";
import { LocalCritic } from "./critic.js";
import type { AdapterEngine } from "./adapter-engine.js";
import type { AdapterTrainer } from "./adapter-trainer.js";
import type { LoraStart } from "./backend.js";
import { readModelConfig } from "../../model/model-dir.js";
import { checkModelFits } from "../../model/model-limits.js";
import { Tokenizer } from "../../model/tokenizer.js";
import type { ModelConfig } from "../../model/config.js";
import type { Transformer } from "./tfjs/transformer.js";
import type { Trainable } from "./tfjs/trainable.js";
import { aggregationCoefficients } from "../../rl/aggregation.js";
import { summarizeForwardBackward } from "../../rl/loss-metrics.js";
import { resolvedLoss, type ResolvedLoss } from "../../rl/policy-loss.js";
import { validateDatums } from "../validate-datums.js";
import type {
  AdamParams,
  Datum,
  Engine,
  ForwardBackwardResult,
  LossSpec,
  OptimStepResult,
  SampleResult,
  SamplingParams,
} from "../types.js";
import { InputError, ModelFormatError } from "../../util/errors.js";
import { settings } from "../../util/settings.js";
import { assertScoringTemperature, assertTokens } from "../validate.js";
import { checkRequestOptions } from "./sampling-params.js";
import { randomSeed } from "../../util/rng.js";
import { AffinityRouter, fanOut, splitCount } from "./routing.js";
import { readTrainerStep } from "./trainable-io.js";
import { backendLabel, defaultBlasThreads, resolveBackend, type BackendName } from "./addon.js";
import { checkAdamParams } from "../optim-params.js";
import { RwGate } from "../../util/rw-gate.js";

export interface LocalEngineOptions extends ReplicaOptions {
  /** Worker threads, one model replica each; 0 runs a single replica in this thread. Default: 2 when the machine has 2+ cores (env AGENT_R1_WORKERS overrides). */
  workers?: number;
}

export interface EngineStats extends ReplicaStats {
  replicas: number;
  /** Why `auto` fell back to tfjs (the native addon did not load); unset otherwise. */
  backendFallback?: string;
  /** Share of looked-up prompt tokens served from the prefix cache. */
  prefixHitRate: number;
}

export function defaultWorkers(): number {
  return settings().workers ?? (availableParallelism() >= 2 ? 2 : 0);
}

export class LocalEngine implements Engine {
  private gradBuffers = new Map<Role, Float32Array[]>();
  private router: AffinityRouter;
  private policyStep: number;
  /** Sample calls share it; training passes, optimizer steps and loads hold it alone. */
  private readonly gate = new RwGate();

  private constructor(
    private replicas: ReplicaApi[],
    public tokenizer: Tokenizer,
    public config: ModelConfig,
    private sourceDir: string,
    /** The compute backend every replica runs on. */
    readonly backend: BackendName,
    /** Why `auto` fell back to tfjs; unset when it did not. */
    readonly backendFallback?: string,
  ) {
    this.router = new AffinityRouter(replicas.length);
    this.policyStep = readTrainerStep(sourceDir);
  }

  /**
   * Loads a Hugging Face model directory (optimizer state too, when the directory holds one).
   * `opts.backend` (else env AGENT_R1_BACKEND, else auto) picks the compute backend; `native`
   * without a loadable addon is an InputError naming the reason, `auto` then falls back to
   * tfjs and records why in `backendFallback`.
   */
  static async load(dir: string, options: LocalEngineOptions = {}): Promise<LocalEngine> {
    // LoRA runs only on the native engine: `auto` means it when adapters are asked for.
    const wantsLora = options.lora !== undefined || isLoraDir(dir);
    const { backend, fallback } = resolveBackend(
      wantsLora && (options.backend ?? "auto") === "auto" ? "native" : options.backend,
    );
    const workers = options.workers ?? defaultWorkers();
    if (options.blasThreads !== undefined && !(Number.isInteger(options.blasThreads) && options.blasThreads >= 1)) {
      throw new InputError(`blasThreads must be a positive integer, got ${options.blasThreads}`);
    }
    if (backend === "native") {
      // One replica: the weights exist once, and the addon's threads use every core.
      const r = await Replica.load(dir, { ...options, backend });
      return new LocalEngine([r], r.tokenizer, r.trainable.model.config, dir, backend, fallback);
    }
    if (options.lora)
      throw new InputError(
        "engine.lora needs the native engine: the TF.js engine trains full weights only",
        "set engine.backend: native (or --backend native)",
      );
    if (isLoraDir(dir))
      throw new InputError(
        `${dir} holds LoRA adapters, which only the native engine runs`,
        "use --backend native (engine.backend: native), or merge them into full weights with 'agent-r1 export --merge'",
      );
    const opts = { ...options, backend, blasThreads: options.blasThreads ?? defaultBlasThreads(Math.max(1, workers)) };
    if (workers === 0) {
      const r = await Replica.load(dir, opts);
      return new LocalEngine([r], r.tokenizer, r.trainable.model.config, dir, backend, fallback);
    }
    const config = readModelConfig(dir);
    checkModelFits(config, join(dir, "config.json")); // here, not seconds later in every worker
    if (!existsSync(join(dir, "tokenizer.json")))
      throw new ModelFormatError(join(dir, "tokenizer.json"), undefined, "file not found");
    const tokenizer = Tokenizer.fromDir(dir);
    const started = await Promise.allSettled(Array.from({ length: workers }, () => WorkerReplica.start(dir, opts)));
    const ok = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    const failed = started.find((s) => s.status === "rejected") as PromiseRejectedResult | undefined;
    if (failed) {
      await Promise.all(ok.map((r) => r.dispose()));
      throw failed.reason;
    }
    return new LocalEngine(ok, tokenizer, config, dir, backend, fallback);
  }

  get workers(): number {
    return this.replicas[0] instanceof WorkerReplica ? this.replicas.length : 0;
  }

  describe(): string {
    const n = this.replicas.length;
    return `local, ${backendLabel(this.backend)}, ${n} replica${n === 1 ? "" : "s"}`;
  }

  /** @internal The in-process replica's policy (single-replica TF.js engines only; tests). */
  get trainable(): Trainable {
    const r = this.replicas[0];
    if (!(r instanceof Replica))
      throw new Error("the model lives in worker threads; load with { workers: 0 } to reach it");
    if (r.backend.name !== "tfjs")
      throw new Error("internal: a native engine has no TF.js model (see nativeTrainable)");
    return r.trainable as Trainable;
  }

  /** @internal The native engine's policy (tests). */
  get nativeTrainable(): NativeTrainable {
    const r = this.replicas[0];
    if (!(r instanceof Replica) || r.backend.name !== "native") throw new Error("internal: not a native engine");
    return r.trainable as NativeTrainable;
  }

  /** @internal The native engine's critic, once created (tests). */
  get nativeCriticTrainable(): NativeTrainable | undefined {
    const r = this.replicas[0];
    if (!(r instanceof Replica) || r.backend.name !== "native") throw new Error("internal: not a native engine");
    return r.criticTrainable as NativeTrainable | undefined;
  }

  /** @internal The in-process policy model (single-replica engines only). */
  get model(): Transformer {
    return this.trainable.model;
  }

  /** Optimizer steps taken by the policy (restored by load). */
  get step(): number {
    return this.policyStep;
  }

  get sourceDirectory(): string {
    return this.sourceDir;
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    checkRequestOptions(params);
    if (params.signal?.aborted) throw params.signal.reason;
    return this.gate.shared(() => this.sampleOnReplicas(prompt, params));
  }

  private async sampleOnReplicas(prompt: number[], params: SamplingParams): Promise<SampleResult> {
    const n = params.n ?? 1;
    if (this.replicas.length === 1) return this.replicas[0].sample(prompt, params, 0);
    if (n === 1) {
      const i = this.router.pick(prompt);
      this.router.started(i, 1);
      try {
        const res = await this.replicas[i].sample(prompt, params, 0);
        this.router.remember(i, [...prompt, ...res.sequences[0].tokens]);
        return res;
      } finally {
        this.router.finished(i, 1);
      }
    }
    // Every part gets the same seed and the caller's signal: aborting it cancels all of them.
    const seed = params.seed ?? randomSeed();
    const counts = splitCount(n, this.replicas.length);
    let first = 0;
    const parts = counts.map((count, i) => {
      const start = first;
      first += count;
      if (count === 0) return Promise.resolve({ sequences: [] });
      // Each replica numbers its sequences from 0: shift the indices it reports by where its share starts.
      const onToken = params.onToken;
      const part: SamplingParams = onToken
        ? { ...params, n: count, seed, onToken: (e) => onToken({ ...e, index: e.index + start }) }
        : { ...params, n: count, seed };
      return this.replicas[i].sample(prompt, part, start);
    });
    return { sequences: (await Promise.all(parts)).flatMap((p) => p.sequences) };
  }

  async computeLogprobs(sequences: number[][], opts: { temperature?: number } = {}): Promise<(number | null)[][]> {
    sequences.forEach((s, i) => assertTokens(s, this.config.vocabSize, `sequence ${i}`));
    if (opts.temperature !== undefined) assertScoringTemperature(opts.temperature, "computeLogprobs: temperature");
    const shares = await fanOut(
      sequences,
      sequences.map((s) => s.length),
      this.replicas.length,
      (share, r) => this.replicas[r].computeLogprobs(share, opts.temperature ?? 1),
    );
    return shares.gather((rows) => rows);
  }

  async forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    const spec = resolvedLoss(loss);
    validateDatums(datums, spec);
    assertScoringTemperature(spec.temperature, "forwardBackward: loss.temperature");
    datums.forEach((d, i) => {
      assertTokens(d.tokens, this.config.vocabSize, `datum ${i} tokens`);
      assertTokens(d.targetTokens, this.config.vocabSize, `datum ${i} targetTokens`);
    });
    const coef = aggregationCoefficients(datums, spec.aggregation, spec.normalizer);
    return this.exclusively(() => this.policyPass(datums, spec, coef));
  }

  private async policyPass(datums: Datum[], spec: ResolvedLoss, coef: number[][]): Promise<ForwardBackwardResult> {
    const shares = await fanOut(
      datums,
      datums.map((d) => d.tokens.length),
      this.replicas.length,
      (share, r, idx) =>
        this.replicas[r].forwardBackward(
          share,
          spec,
          idx.map((i) => coef[i]),
        ),
    );
    const logprobs = shares.gather((x) => x.logprobs);
    const lossSum = shares.sum((x) => x.lossSum);
    const entropySum = shares.sum((x) => x.entropySum);
    return summarizeForwardBackward(datums, spec, logprobs, lossSum, entropySum);
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const res = await this.stepRole("policy", params);
    this.policyStep = res.step;
    return res;
  }

  /** @internal Runs `fn` with no sample call in flight (the critic's training pass). */
  exclusively<T>(fn: () => Promise<T>): Promise<T> {
    return this.gate.exclusive(fn);
  }

  /** @internal Shared by the policy and the critic. */
  async stepRole(role: Role, params: AdamParams): Promise<OptimStepResult> {
    checkAdamParams(params);
    return this.exclusively(() => this.stepReplicas(role, params));
  }

  private async stepReplicas(role: Role, params: AdamParams): Promise<OptimStepResult> {
    if (this.replicas.length === 1) return this.replicas[0].optimStep(role, params);
    let buffers = this.gradBuffers.get(role);
    if (!buffers) {
      const size = await this.replicas[0].gradientSize(role);
      buffers = this.replicas.map(() => new Float32Array(new SharedArrayBuffer(size * 4)));
      this.gradBuffers.set(role, buffers);
    }
    const had = await Promise.all(this.replicas.map((r, i) => r.exportGradients(role, buffers![i])));
    // No replica has gradients: a single-replica step with nothing accumulated is a no-op that reports the step.
    if (!had.some(Boolean)) return this.replicas[0].optimStep(role, params);
    const results = await Promise.all(this.replicas.map((r) => r.optimStepWithSum(role, buffers!, params)));
    return results[0];
  }

  /** A value model of the same architecture, initialized from the policy's current weights. */
  async createCritic(): Promise<LocalCritic> {
    await Promise.all(this.replicas.map((r) => r.createCritic()));
    return new LocalCritic(this, this.replicas);
  }

  async save(dir: string): Promise<void> {
    await this.replicas[0].save("policy", dir, this.sourceDir);
  }

  /** Writes the policy's LoRA adapters alone, in PEFT's layout (adapter_config.json + adapter_model.safetensors). */
  async saveAdapter(dir: string): Promise<void> {
    this.inThread("writing LoRA adapters").saveAdapter(dir);
  }

  /**
   * The PEFT adapter in `dir` served over this engine's current weights (shared, not copied): an
   * engine of its own for sampling and scoring, as `serve` holds each adapter it loads. The native
   * engine only.
   */
  async openAdapter(dir: string): Promise<AdapterEngine> {
    return this.inThread("serving LoRA adapters").openAdapter(dir, this.config);
  }

  /**
   * LoRA adapters that train over this engine's weights (shared, not copied, and never changed by
   * them): new ones of `start.spec` drawn from `start.seed`, or `start.adapter`'s. An engine of its
   * own for training, sampling and scoring, one of any number over the same base. The native engine
   * only; this engine's own weights must not train while the sets are in use.
   */
  async trainAdapters(start: LoraStart): Promise<AdapterTrainer> {
    return this.inThread("training LoRA adapters over a shared base").trainAdapters(start, this.config, this.sourceDir);
  }

  /** The one replica of an engine that runs in this thread (the native engine always does). */
  private inThread(doing: string): Replica {
    const r = this.replicas[0];
    if (this.replicas.length !== 1 || !(r instanceof Replica))
      throw new InputError(`${doing} needs the native engine`, "use --backend native (engine.backend: native)");
    return r;
  }

  async load(dir: string): Promise<void> {
    const config = readModelConfig(dir);
    await this.exclusively(() => Promise.all(this.replicas.map((r) => r.load("policy", dir))));
    this.config = config;
    this.tokenizer = Tokenizer.fromDir(dir);
    this.sourceDir = dir;
    this.router = new AffinityRouter(this.replicas.length);
    this.policyStep = readTrainerStep(dir);
  }

  /** Fingerprints of every replica's weights: all equal while replicas are in sync. */
  async weightChecksums(role: Role = "policy"): Promise<number[]> {
    return Promise.all(this.replicas.map((r) => r.weightsChecksum(role)));
  }

  async stats(): Promise<EngineStats> {
    const all = await Promise.all(this.replicas.map((r) => r.stats()));
    const sum = <T extends object>(pick: (s: ReplicaStats) => T): T => {
      const out = { ...pick(all[0]) } as Record<string, number>;
      for (const s of all.slice(1)) for (const [k, v] of Object.entries(pick(s))) out[k] += v as number;
      return out as T;
    };
    const prefixCache = sum((s) => s.prefixCache);
    return {
      backend: this.backend,
      ...(this.backendFallback !== undefined ? { backendFallback: this.backendFallback } : {}),
      replicas: all.length,
      liveTensors: all.reduce((a, s) => a + s.liveTensors, 0),
      cacheTensors: all.reduce((a, s) => a + s.cacheTensors, 0),
      prefixCache,
      scheduler: sum((s) => s.scheduler),
      prefixHitRate: prefixCache.promptTokens ? prefixCache.reusedTokens / prefixCache.promptTokens : 0,
    };
  }

  /** Share of looked-up prompt tokens served from the prefix cache so far. */
  async prefixHitRate(): Promise<number> {
    return (await this.stats()).prefixHitRate;
  }

  /** Live tensors over all replicas, for leak checks. */
  async liveTensors(): Promise<number> {
    return (await this.stats()).liveTensors;
  }

  async clearPrefixCache(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.clearPrefixCache()));
  }

  async dispose(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.dispose()));
  }
}
