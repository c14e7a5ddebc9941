/**
 * The native engine's models and compute, behind the same replica interface as the TF.js
 * engine's (../local/replica.ts), so LocalEngine, the critic and every command run on it
 * unchanged. One replica per process: the weights exist once, and the matrix products and
 * element-wise kernels use every core through the addon's threads.
 */
import { join } from "node:path";
import { availableParallelism } from "node:os";
import { loadModelDir } from "../../model/model-dir.js";
import type { Tokenizer } from "../../model/tokenizer.js";
import { Scheduler } from "../local/scheduler.js";
import type { ReplicaApi, ReplicaOptions, ReplicaStats, Role } from "../local/replica.js";
import { loadTrainableState, saveTrainable } from "../local/trainable-io.js";
import { isLoraDir, loraBaseDir, readLoraDir, saveLoraTrainable } from "./lora-checkpoint.js";
import { describeTargets, initAdapters, type LoraAdapters, type LoraSpec } from "../../model/peft.js";
import { InputError } from "../../util/errors.js";
import { loadNative, resolveBlas } from "../local/native.js";
import { settings } from "../../util/settings.js";
import type { ResolvedLoss } from "../../rl/policy-loss.js";
import type { AdamParams, Datum, OptimStepResult, SampleResult, SamplingParams, ValueDatum } from "../types.js";
import type { MicroBatchPlanner } from "../micro-batches.js";
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
  const m = loadModelDir(baseDir);
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
  return { model, baseDir, tokenizer: m.tokenizer };
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
    const st = loadNative();
    if (!st.ok) throw new Error(`internal: the native addon is unavailable: ${st.reason}`);
    const threads = Math.max(1, Math.min(64, engineThreads(opts)));
    st.addon.setBlas(resolveBlas(st.addon, opts.blas));
    st.addon.setThreads(threads);
    st.addon.setFusedThreads(Math.min(16, threads));
    const { model, baseDir, tokenizer } = openModel(dir, "lm", opts);
    const policy = new NativeTrainable(model);
    // New adapters on full weights start fresh; a directory's own state is for its own tensors.
    if (!model.lora || isLoraDir(dir)) loadTrainableState(policy, dir);
    const budget = opts.microBatchBytes ?? DEFAULT_NATIVE_ACTIVATION_BUDGET;
    const maxTokens = Math.min(opts.microBatchTokens ?? Infinity, Math.floor(budget / nativeBytesPerToken(model)));
    const plan = tokenPlanner(Math.max(1, maxTokens));
    const scheduler = new Scheduler(new NativeDecodeCompute(model), tokenizer, opts);
    return new NativeReplica(policy, scheduler, tokenizer, plan, baseDir, opts);
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
    if (!model.lora || isLoraDir(dir)) loadTrainableState(next, dir);
    if (role === "policy") {
      this.scheduler.setCompute(new NativeDecodeCompute(model));
      this.policy = next;
      this.baseDir = baseDir;
    } else this.critic = next;
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
