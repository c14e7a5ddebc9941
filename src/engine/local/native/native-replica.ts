/**
 * The native engine's models and compute, behind the same replica interface as the TF.js
 * engine's (../tfjs/replica.ts), so LocalEngine, the critic and every command run on it
 * unchanged. One replica per process: the weights exist once, and the matrix products and
 * element-wise kernels use every core through the addon's threads.
 */
import { join } from "node:path";
import { availableParallelism } from "node:os";
import { openModelDirRaw } from "../../../model/model-dir.js";
import type { ModelConfig } from "../../../model/config.js";
import { checkMemoryPlan, memoryBudget, planMemory, type MemoryNeeds } from "./memory-plan.js";
import type { Tokenizer } from "../../../model/tokenizer.js";
import { Scheduler } from "../scheduler.js";
import type { ReplicaApi, ReplicaOptions, ReplicaStats, Role } from "../replica-api.js";
import { hasOptimizerState, loadTrainableState, saveTrainable } from "../trainable-io.js";
import { isLoraDir, loraBaseDir, readLoraDir, saveLoraTrainable } from "./lora-checkpoint.js";
import {
  describeTargets,
  initAdapters,
  loraModules,
  readPeftSpec,
  type LoraAdapters,
  type LoraSpec,
} from "../../../model/peft.js";
import { InputError } from "../../../util/errors.js";
import { applyBf16Products, requireNative, resolveBlas } from "../addon.js";
import { settings } from "../../../util/settings.js";
import type { ResolvedLoss } from "../../../rl/policy-loss.js";
import type { AdamParams, Datum, OptimStepResult, SampleResult, SamplingParams, ValueDatum } from "../../types.js";
import type { MicroBatchPlanner } from "../../micro-batches.js";
import { checkAdamParams } from "../../optim-params.js";
import { NativeDecoder } from "./decoder.js";
import { NativeTrainable } from "./native-trainable.js";
import { NativeDecodeCompute, type NativeKv } from "./native-decode.js";
import {
  nativeCriticPass,
  nativeCriticValues,
  nativeLogprobs,
  nativePolicyPass,
  tokenPlanner,
} from "./native-train.js";

/** Bytes of activations a training micro-batch may hold by default. */
export const DEFAULT_NATIVE_ACTIVATION_BUDGET = 2 ** 30;

/** Bytes per token of a training pass: what the forward keeps, and the backward's scratch. */
export function nativeBytesPerToken(model: NativeDecoder): number {
  const c = model.config,
    qd = c.numHeads * c.headDim,
    kvd = c.numKvHeads * c.headDim;
  const scratch = 4 * (2 * c.hiddenSize + 2 * qd + 2 * kvd + 2 * c.intermediateSize);
  return model.passBytes(1024, 1, true) / 1024 + scratch;
}

/** Threads for the native engine: every core unless AGENT_R1_BLAS_THREADS says otherwise. */
function engineThreads(opts: ReplicaOptions): number {
  return opts.blasThreads ?? settings().blasThreads ?? availableParallelism();
}

/**
 * The model of a directory: full weights, or (a LoRA directory) the base it names plus its
 * adapters; with `opts.lora` and full weights, new adapters on them (or a PEFT adapter's).
 */
function openModel(
  dir: string,
  head: "lm" | "value",
  opts: ReplicaOptions,
): { model: NativeDecoder; baseDir: string; tokenizer: Tokenizer } {
  const lora = isLoraDir(dir);
  const baseDir = lora ? loraBaseDir(dir) : dir;
  const opened = openModelDirRaw(baseDir);
  const spec = lora ? readPeftSpec(dir, opened.config) : opts.lora?.spec;
  // What loading takes: weights as stored, and the adapters' training state (full training is
  // checked when it starts, see NativeReplica.ensureTrainable).
  checkMemoryPlan(
    planMemory(memoryNeeds(opened.config, spec ? "lora" : "none", opts, spec)),
    memoryBudget(opts.memoryGb),
    { model: baseDir, doing: spec ? "training LoRA adapters" : "loading", hint: LOAD_HINT },
  );
  const m = opened.load();
  let adapters: { spec: LoraSpec; adapters: LoraAdapters } | undefined;
  if (lora) {
    adapters = readLoraDir(dir, m.config);
    if (opts.lora) checkSameSpec(opts.lora.spec, adapters.spec, dir);
  } else if (opts.lora) {
    if (opts.lora.adapter) {
      adapters = readLoraDir(opts.lora.adapter, m.config);
      checkSameSpec(opts.lora.spec, adapters.spec, opts.lora.adapter);
    } else adapters = { spec: opts.lora.spec, adapters: initAdapters(m.config, opts.lora.spec, opts.lora.seed ?? 0) };
  }
  const model = NativeDecoder.fromWeights(m.config, m.weights, join(baseDir, "model.safetensors"), {
    head,
    lora: adapters,
  });
  m.weights.clear(); // the decoder holds what it needs; drop the loader's arrays it did not keep
  return { model, baseDir, tokenizer: m.tokenizer };
}

const LOAD_HINT =
  "use a smaller model, a smaller engine.prefixCacheMb or engine.microBatchMb, or raise engine.memoryGb";
const TRAIN_HINT =
  "train LoRA adapters instead (engine.lora), use a smaller engine.microBatchMb, or raise engine.memoryGb";

/** The memory plan of `model` on this engine, training what `train` says (default: what it trains now). */
export function planFor(model: NativeDecoder, opts: ReplicaOptions, train?: "full", critic = false) {
  const mode = train ?? (model.mode === "full" && !model.trainingReady ? "none" : model.mode);
  return planMemory(memoryNeeds(model.config, mode, opts, model.lora?.spec, critic));
}

/** Bytes per element of the weight matrices as config.json says they are stored (float32 when it does not say). */
function matrixBytes(config: ModelConfig): number {
  const dtype = config.raw.torch_dtype ?? config.raw.dtype;
  return dtype === "bfloat16" || dtype === "float16" ? 2 : 4;
}

/** The memory-plan inputs of a model on this engine. */
export function memoryNeeds(
  config: ModelConfig,
  train: MemoryNeeds["train"],
  opts: ReplicaOptions,
  spec?: LoraSpec,
  critic = false,
): MemoryNeeds {
  const kvPerToken = 4 * config.numLayers * 2 * config.numKvHeads * config.headDim;
  return {
    config,
    matrixBytes: matrixBytes(config),
    train,
    loraFloats: spec ? loraModules(config, spec.targets).reduce((n, m) => n + spec.rank * (m.in + m.out), 0) : 0,
    activationBytes: opts.microBatchBytes ?? DEFAULT_NATIVE_ACTIVATION_BUDGET,
    prefixCacheBytes: opts.prefixCacheBytes ?? 256 * 2 ** 20,
    contextBytes: kvPerToken * config.maxPositionEmbeddings,
    critic,
  };
}

/** The recipe's engine.lora must describe the adapters a directory holds. */
function checkSameSpec(want: LoraSpec, have: LoraSpec, dir: string): void {
  const show = (s: LoraSpec) =>
    `rank ${s.rank}, alpha ${s.alpha}, ${describeTargets(s.targets)}${s.rslora ? ", rsLoRA" : ""}`;
  const same =
    want.rank === have.rank &&
    want.alpha === have.alpha &&
    want.rslora === have.rslora &&
    want.targets.join() === have.targets.join();
  if (!same)
    throw new InputError(
      `${dir}: its LoRA adapters (${show(have)}) differ from engine.lora (${show(want)})`,
      "make engine.lora match the adapters, or start from the base model",
    );
}

export class NativeReplica implements ReplicaApi {
  private critic?: NativeTrainable;

  private constructor(
    private policy: NativeTrainable,
    private scheduler: Scheduler<NativeKv>,
    readonly tokenizer: Tokenizer,
    private readonly plan: MicroBatchPlanner,
    /** The directory of the base weights (a LoRA run saves adapters that point there). */
    private baseDir: string,
    private readonly opts: ReplicaOptions,
  ) {}

  static async load(dir: string, opts: ReplicaOptions = {}): Promise<NativeReplica> {
    const addon = requireNative();
    const threads = Math.max(1, Math.min(64, engineThreads(opts)));
    addon.setBlas(resolveBlas(addon, opts.blas));
    applyBf16Products(addon, opts.bf16Products);
    addon.setThreads(threads);
    addon.setFusedThreads(Math.min(16, threads));
    const { model, baseDir, tokenizer } = openModel(dir, "lm", opts);
    const policy = new NativeTrainable(model);
    const budget = opts.microBatchBytes ?? DEFAULT_NATIVE_ACTIVATION_BUDGET;
    const maxTokens = Math.min(opts.microBatchTokens ?? Infinity, Math.floor(budget / nativeBytesPerToken(model)));
    const plan = tokenPlanner(Math.max(1, maxTokens));
    // Sampling gets what the plan leaves of the budget for its rows' keys and values.
    const kvBudgetBytes = Math.max(0, memoryBudget(opts.memoryGb).bytes - planFor(model, opts).total);
    const scheduler = new Scheduler(new NativeDecodeCompute(model), tokenizer, { ...opts, kvBudgetBytes });
    const replica = new NativeReplica(policy, scheduler, tokenizer, plan, baseDir, opts);
    replica.loadState(policy, dir);
    return replica;
  }

  /**
   * A directory's optimizer state, for the tensors it trained: new adapters on full weights start
   * fresh. Full weights with saved moments are about to train, so the training plan is checked first.
   */
  private loadState(t: NativeTrainable, dir: string): void {
    if (t.model.lora && !isLoraDir(dir)) return;
    if (hasOptimizerState(dir)) this.ensureTrainable(t);
    loadTrainableState(t, dir);
  }

  /** Before the full weights first train (float32 copies, gradients, moments): the plan must fit. */
  private ensureTrainable(t: NativeTrainable): void {
    if (t.model.trainingReady) return;
    const critic = t === this.critic;
    // The policy as it will train, and a critic (trained in full) beside it when there is one.
    const plan = planFor(this.policy.model, this.opts, critic ? undefined : "full", critic || !!this.critic);
    checkMemoryPlan(plan, memoryBudget(this.opts.memoryGb), {
      model: this.baseDir,
      doing: critic ? "training the critic beside the policy" : "training the full weights",
      hint: TRAIN_HINT,
    });
    t.model.prepareTraining();
  }

  /** The in-process policy (tests). */
  get trainable(): NativeTrainable {
    return this.policy;
  }

  private role(role: Role): NativeTrainable {
    const t = role === "policy" ? this.policy : this.critic;
    if (!t) throw new Error("the critic has not been created (call createCritic first)");
    return t;
  }

  async sample(prompt: number[], params: SamplingParams, firstStream: number): Promise<SampleResult> {
    return this.scheduler.submit(prompt, params, { first: firstStream });
  }

  async computeLogprobs(sequences: number[][], temperature: number) {
    return nativeLogprobs(this.policy.model, sequences, temperature, this.plan);
  }

  async forwardBackward(datums: Datum[], loss: ResolvedLoss, coef: number[][]) {
    this.ensureTrainable(this.policy);
    return nativePolicyPass(this.policy, datums, loss, this.plan, coef);
  }

  async createCritic(): Promise<void> {
    const model = NativeDecoder.fromWeights(
      this.policy.model.config,
      this.policy.model.toHostWeights(),
      "(policy weights)",
      {
        head: "value",
      },
    );
    this.critic = new NativeTrainable(model);
  }

  async disposeCritic(): Promise<void> {
    this.critic = undefined;
  }

  async criticValues(sequences: number[][]) {
    return nativeCriticValues(this.role("critic").model, sequences, this.plan);
  }

  async criticForwardBackward(datums: ValueDatum[], clip: number, total: number) {
    this.ensureTrainable(this.role("critic"));
    return nativeCriticPass(this.role("critic"), datums, clip, total, this.plan);
  }

  async optimStep(role: Role, params: AdamParams): Promise<OptimStepResult> {
    const res = this.role(role).optimStep(params);
    // Cached keys/values were computed with the old weights: drop them once the weights move.
    if (role === "policy" && !res.skipped) this.scheduler.prefix.clear();
    return res;
  }

  async exportGradients(role: Role, target: Float32Array): Promise<boolean> {
    let o = 0;
    const t = this.role(role);
    for (const { grad } of t.model.trainedTensors()) {
      target.set(grad, o);
      o += grad.length;
    }
    return t.hasGradients();
  }

  async optimStepWithSum(role: Role, sources: Float32Array[], params: AdamParams): Promise<OptimStepResult> {
    checkAdamParams(params); // before the gradients are overwritten with the sum
    const t = this.role(role);
    let o = 0;
    for (const { grad } of t.model.trainedTensors()) {
      grad.fill(0);
      for (const s of sources) for (let i = 0; i < grad.length; i++) grad[i] += s[o + i];
      o += grad.length;
    }
    t.accumulated = true;
    return this.optimStep(role, params);
  }

  async gradientSize(role: Role): Promise<number> {
    return this.role(role).size;
  }

  async save(role: Role, dir: string, tokenizerFrom: string): Promise<void> {
    const t = this.role(role);
    if (t.model.lora) saveLoraTrainable(t, dir, this.baseDir, tokenizerFrom);
    else saveTrainable(t, dir, tokenizerFrom);
  }

  async load(role: Role, dir: string): Promise<void> {
    const { model, baseDir } = openModel(dir, role === "policy" ? "lm" : "value", this.opts);
    const next = new NativeTrainable(model);
    if (role === "critic") this.critic = next;
    this.loadState(next, dir);
    if (role === "policy") {
      this.scheduler.setCompute(new NativeDecodeCompute(model));
      this.policy = next;
      this.baseDir = baseDir;
    }
  }

  async zeroGrad(role: Role): Promise<void> {
    this.role(role).zeroGrad();
  }

  async weightsChecksum(role: Role): Promise<number> {
    return this.role(role).weightsChecksum();
  }

  async clearPrefixCache(): Promise<void> {
    this.scheduler.prefix.clear();
  }

  async stats(): Promise<ReplicaStats> {
    const cacheTensors = this.scheduler.prefix.tensorCount() + this.scheduler.tensorCount();
    return {
      backend: "native",
      // No tensors outside the caches: every pass frees its buffers before it returns.
      liveTensors: cacheTensors,
      cacheTensors,
      prefixCache: this.scheduler.prefix.stats(),
      scheduler: this.scheduler.stats(),
    };
  }

  async dispose(): Promise<void> {
    this.scheduler.prefix.clear();
    this.critic = undefined;
  }
}
