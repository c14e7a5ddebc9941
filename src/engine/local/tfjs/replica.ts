/**
 * One copy of the engine's models and their compute: the policy (with its
 * sampling scheduler and prefix cache) and, once created, the critic. The local
 * engine runs one replica in-process or one per worker thread; every method is
 * async so the two are interchangeable behind `ReplicaApi`.
 */
import { join } from "node:path";
import { claimBackend, initBackend, tf } from "./tf-backend.js";
import { defaultBlasThreads, resolveTfjsKernels, type BackendName } from "../addon.js";
import { Trainable } from "./trainable.js";
import { Scheduler } from "../scheduler.js";
import { TfDecodeCompute } from "./tf-decode.js";
import { computeLogprobs, policyPass } from "./policy-train.js";
import { criticPass, criticValues } from "./critic-train.js";
import { loadTrainableState, saveTrainable } from "../trainable-io.js";
import { checkTrainingHeap, largestMicroBatch } from "./heap-plan.js";
import { Transformer, type KVCache } from "./transformer.js";
import { loadModelDir } from "../../../model/model-dir.js";
import type { Tokenizer } from "../../../model/tokenizer.js";
import { memoryPlanner, DEFAULT_ACTIVATION_BUDGET, type MicroBatchPlanner } from "../../micro-batches.js";
import type { ResolvedLoss } from "../../../rl/policy-loss.js";
import type { AdamParams, Datum, OptimStepResult, SampleResult, SamplingParams, ValueDatum } from "../../types.js";
import type { ReplicaApi, ReplicaOptions, ReplicaStats, Role } from "../replica-api.js";

export class Replica implements ReplicaApi {
  private critic?: Trainable;
  private constructor(
    private policy: Trainable,
    private scheduler: Scheduler<KVCache>,
    readonly tokenizer: Tokenizer,
    private readonly plan: MicroBatchPlanner,
    /** The TF.js kernels in use: the addon's ("native") or wasm only ("tfjs"). */
    readonly kernels: BackendName,
    private readonly releaseBackend: () => void,
  ) {}

  static async load(dir: string, opts: ReplicaOptions = {}): Promise<Replica> {
    await initBackend();
    const kernels = resolveTfjsKernels(opts.tfjsKernels);
    const release = claimBackend(kernels, opts.blasThreads ?? defaultBlasThreads(1), opts.blas);
    try {
      return Replica.open(dir, opts, kernels, release);
    } catch (e) {
      release();
      throw e;
    }
  }

  private static open(dir: string, opts: ReplicaOptions, kernels: BackendName, release: () => void): Replica {
    const m = loadModelDir(dir);
    const model = Transformer.fromHostWeights(m.config, m.weights, join(dir, "model.safetensors"));
    const policy = new Trainable(model);
    loadTrainableState(policy, dir);
    const c = m.config;
    const plan = memoryPlanner(
      {
        vocabSize: c.vocabSize,
        hiddenSize: c.hiddenSize,
        intermediateSize: c.intermediateSize,
        numLayers: c.numLayers,
        numHeads: c.numHeads,
      },
      opts.microBatchBytes ?? DEFAULT_ACTIVATION_BUDGET,
      opts.microBatchTokens ?? Infinity,
    );
    return new Replica(
      policy,
      new Scheduler(new TfDecodeCompute(model), m.tokenizer, opts),
      m.tokenizer,
      plan,
      kernels,
      release,
    );
  }

  /** The in-process policy (tests and single-replica engines only). */
  get trainable(): Trainable {
    return this.policy;
  }

  private role(role: Role): Trainable {
    const t = role === "policy" ? this.policy : this.critic;
    if (!t) throw new Error("the critic has not been created (call createCritic first)");
    return t;
  }

  async sample(prompt: number[], params: SamplingParams, firstStream: number): Promise<SampleResult> {
    return this.scheduler.submit(prompt, params, { first: firstStream });
  }

  async computeLogprobs(sequences: number[][], temperature: number) {
    return computeLogprobs(this.policy.model, sequences, temperature, this.plan);
  }

  async forwardBackward(datums: Datum[], loss: ResolvedLoss, coef: number[][]) {
    this.checkHeap(datums.map((d) => d.tokens.length));
    return policyPass(this.policy, datums, loss, this.plan, coef);
  }

  async createCritic(): Promise<void> {
    this.critic?.dispose();
    const model = Transformer.fromHostWeights(
      this.policy.model.config,
      this.policy.model.toHostWeights(),
      "(policy weights)",
      "value",
    );
    this.critic = new Trainable(model);
  }

  async disposeCritic(): Promise<void> {
    this.critic?.dispose();
    this.critic = undefined;
  }

  async criticValues(sequences: number[][]) {
    return criticValues(this.role("critic").model, sequences, this.plan);
  }

  async criticForwardBackward(datums: ValueDatum[], clip: number, total: number) {
    this.checkHeap(datums.map((d) => d.tokens.length));
    return criticPass(this.role("critic"), datums, clip, total, this.plan);
  }

  async optimStep(role: Role, params: AdamParams) {
    this.checkHeap();
    return this.afterStep(role, this.role(role).optimStep(params));
  }

  /** Training must fit the wasm heap (heap-plan.ts): refused before any tensor work, instead of aborting the process. */
  private checkHeap(lengths?: number[]): void {
    const c = this.policy.model.config;
    const shape = {
      vocabSize: c.vocabSize,
      hiddenSize: c.hiddenSize,
      intermediateSize: c.intermediateSize,
      numLayers: c.numLayers,
      numHeads: c.numHeads,
    };
    const parameters = [this.policy, this.critic].flatMap((t) => (t ? [t.size] : []));
    const microBatch = lengths && largestMicroBatch(shape, this.plan, lengths);
    checkTrainingHeap({
      backend: this.kernels,
      parameters,
      prefixCacheBytes: this.scheduler.prefix.maxBytes,
      microBatch,
    });
  }

  /** Cached keys/values were computed with the old policy weights: drop them once the weights move. */
  private afterStep(role: Role, res: OptimStepResult): OptimStepResult {
    if (role === "policy" && !res.skipped) this.scheduler.prefix.clear();
    return res;
  }

  async exportGradients(role: Role, target: Float32Array) {
    return this.role(role).exportGradients(target);
  }

  async optimStepWithSum(role: Role, sources: Float32Array[], params: AdamParams) {
    this.checkHeap();
    const t = this.role(role);
    t.setGradientsFromSum(sources);
    return this.afterStep(role, t.optimStep(params));
  }

  async gradientSize(role: Role) {
    return this.role(role).size;
  }

  async save(role: Role, dir: string, tokenizerFrom: string) {
    saveTrainable(this.role(role), dir, tokenizerFrom);
  }

  async load(role: Role, dir: string) {
    const m = loadModelDir(dir);
    const model = Transformer.fromHostWeights(
      m.config,
      m.weights,
      join(dir, "model.safetensors"),
      role === "policy" ? "lm" : "value",
    );
    const next = new Trainable(model);
    loadTrainableState(next, dir);
    if (role === "policy") {
      this.scheduler.setCompute(new TfDecodeCompute(model));
      this.policy.dispose();
      this.policy = next;
    } else {
      this.critic?.dispose();
      this.critic = next;
    }
  }

  async zeroGrad(role: Role) {
    this.role(role).zeroGrad();
  }

  async weightsChecksum(role: Role) {
    return this.role(role).weightsChecksum();
  }

  async clearPrefixCache() {
    this.scheduler.prefix.clear();
  }

  async stats(): Promise<ReplicaStats> {
    return {
      backend: "tfjs",
      liveTensors: tf.memory().numTensors,
      cacheTensors: this.scheduler.prefix.tensorCount() + this.scheduler.tensorCount(),
      prefixCache: this.scheduler.prefix.stats(),
      scheduler: this.scheduler.stats(),
    };
  }

  async dispose() {
    this.scheduler.prefix.clear();
    this.policy.dispose();
    this.critic?.dispose();
    this.releaseBackend();
  }
}
