/**
 * One copy of the engine's models and their compute, on either backend (./backend.ts): the policy
 * with its sampling scheduler and prefix cache, and, once created, the critic. The local engine
 * runs one replica in this thread or one per worker thread; every method is async so the two are
 * interchangeable behind `ReplicaApi`.
 */
import type { Tokenizer } from "../../model/tokenizer.js";
import type { ResolvedLoss } from "../../rl/policy-loss.js";
import { checkAdamParams } from "../optim-params.js";
import type { AdamParams, Datum, OptimStepResult, SampleResult, SamplingParams, ValueDatum } from "../types.js";
import type { BackendName } from "./addon.js";
import { BACKENDS, type Backend, type LoraStart, type Models, type TrainableModel } from "./backend.js";
import type { ReplicaApi, ReplicaOptions, ReplicaStats, Role } from "./replica-api.js";
import { Scheduler } from "./scheduler.js";
import { AdapterEngine } from "./adapter-engine.js";
import { AdapterTrainer } from "./adapter-trainer.js";
import { InputError } from "../../util/errors.js";
import type { ModelConfig } from "../../model/config.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export class Replica<M = any, T extends TrainableModel<M> = TrainableModel<M>, KV = any> implements ReplicaApi {
  private critic?: T;
  private readonly scheduler: Scheduler<KV>;

  private constructor(
    readonly backend: Backend<M, T, KV>,
    private policy: T,
    readonly tokenizer: Tokenizer,
    private readonly opts: ReplicaOptions,
  ) {
    this.scheduler = new Scheduler(backend.decodeCompute(policy.model), tokenizer, {
      ...opts,
      ...backend.schedulerOptions(policy),
    });
  }

  /** The model directory on the backend `opts.backend` names (default tfjs). */
  static async load(dir: string, opts: ReplicaOptions = {}): Promise<Replica> {
    const name: BackendName = opts.backend === "native" ? "native" : "tfjs";
    const { backend, policy, tokenizer } = await (await BACKENDS[name]()).openBackend(dir, opts);
    try {
      return new Replica(backend, policy, tokenizer, opts);
    } catch (e) {
      policy.dispose();
      backend.dispose();
      throw e;
    }
  }

  /** The in-process policy (tests and single-replica engines). */
  get trainable(): T {
    return this.policy;
  }

  /** @internal The critic, once created (tests). */
  get criticTrainable(): T | undefined {
    return this.critic;
  }

  private get models(): Models<T> {
    return { policy: this.policy, critic: this.critic };
  }

  private role(role: Role): T {
    const t = role === "policy" ? this.policy : this.critic;
    if (!t) throw new Error("the critic has not been created (call createCritic first)");
    return t;
  }

  async sample(prompt: number[], params: SamplingParams, firstStream: number): Promise<SampleResult> {
    return this.scheduler.submit(prompt, params, { first: firstStream });
  }

  async computeLogprobs(sequences: number[][], temperature: number) {
    return this.backend.logprobs(this.policy.model, sequences, temperature);
  }

  async forwardBackward(datums: Datum[], loss: ResolvedLoss, coef: number[][]) {
    this.backend.beforeTraining(
      this.policy,
      "policy",
      this.models,
      datums.map((d) => d.tokens.length),
    );
    return this.backend.policyPass(this.policy, datums, loss, coef);
  }

  async createCritic(): Promise<void> {
    this.critic?.dispose();
    this.critic = undefined;
    this.critic = this.backend.critic(this.policy);
  }

  async disposeCritic(): Promise<void> {
    this.critic?.dispose();
    this.critic = undefined;
  }

  async criticValues(sequences: number[][]) {
    return this.backend.criticValues(this.role("critic").model, sequences);
  }

  async criticForwardBackward(datums: ValueDatum[], clip: number, total: number) {
    const critic = this.role("critic");
    this.backend.beforeTraining(
      critic,
      "critic",
      this.models,
      datums.map((d) => d.tokens.length),
    );
    return this.backend.criticPass(critic, datums, clip, total);
  }

  async optimStep(role: Role, params: AdamParams): Promise<OptimStepResult> {
    const t = this.role(role);
    this.backend.beforeTraining(t, role, this.models);
    return this.afterStep(role, t.optimStep(params));
  }

  /** Cached keys/values were computed with the old policy weights: drop them once the weights move. */
  private afterStep(role: Role, res: OptimStepResult): OptimStepResult {
    if (role === "policy" && !res.skipped) this.scheduler.prefix.clear();
    return res;
  }

  async exportGradients(role: Role, target: Float32Array) {
    return this.role(role).exportGradients(target);
  }

  async optimStepWithSum(role: Role, sources: Float32Array[], params: AdamParams): Promise<OptimStepResult> {
    checkAdamParams(params); // before the gradients are overwritten with the sum
    const t = this.role(role);
    this.backend.beforeTraining(t, role, this.models);
    t.setGradientsFromSum(sources);
    return this.afterStep(role, t.optimStep(params));
  }

  async gradientSize(role: Role) {
    return this.role(role).size;
  }

  async save(role: Role, dir: string, tokenizerFrom: string) {
    this.backend.save(this.role(role), dir, tokenizerFrom);
  }

  async load(role: Role, dir: string) {
    const models = role === "policy" ? { critic: this.critic } : { policy: this.policy };
    const next = this.backend.open(dir, role, models);
    if (role === "policy") {
      this.scheduler.setCompute(this.backend.decodeCompute(next.model));
      this.policy.dispose();
      this.policy = next;
    } else {
      this.critic?.dispose();
      this.critic = next;
    }
  }

  /** The policy's LoRA adapters alone, in PEFT's layout (the C engine). */
  saveAdapter(dir: string): void {
    if (!this.backend.saveAdapter) throw new InputError(`the ${this.backend.name} engine trains no LoRA adapters`);
    this.backend.saveAdapter(this.policy, dir);
  }

  /** The PEFT adapter in `dir` served over the policy's base weights (the C engine). */
  openAdapter(dir: string, config: ModelConfig): AdapterEngine<M> {
    if (!this.backend.adapterModel)
      throw new InputError(
        `the ${this.backend.name} engine serves no LoRA adapters`,
        "use the native engine (--backend native)",
      );
    const model = this.backend.adapterModel(this.policy, dir);
    const options = { ...this.opts, ...this.backend.schedulerOptions(this.policy) };
    return new AdapterEngine(this.backend, model, this.tokenizer, config, dir, options);
  }

  /** New LoRA adapters (or a directory's, `start.adapter`) that train over the policy's base weights (the C engine). */
  trainAdapters(start: LoraStart, config: ModelConfig, tokenizerFrom: string): AdapterTrainer<M, T> {
    if (!this.backend.adapterTrainable)
      throw new InputError(
        `the ${this.backend.name} engine trains no LoRA adapters over a shared base`,
        "use the native engine (--backend native)",
      );
    const t = this.backend.adapterTrainable(this.policy, start);
    const options = { ...this.opts, ...this.backend.schedulerOptions(t) };
    return new AdapterTrainer(this.backend, this.policy, t, start, this.tokenizer, config, tokenizerFrom, options);
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
    const cacheTensors = this.scheduler.prefix.tensorCount() + this.scheduler.tensorCount();
    return {
      backend: this.backend.name,
      liveTensors: this.backend.liveTensors(cacheTensors),
      cacheTensors,
      prefixCache: this.scheduler.prefix.stats(),
      scheduler: this.scheduler.stats(),
    };
  }

  async dispose() {
    this.scheduler.prefix.clear();
    this.policy.dispose();
    this.critic?.dispose();
    this.critic = undefined;
    this.backend.dispose();
  }
}
