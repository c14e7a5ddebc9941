/**
 * One set of LoRA adapters trained over the local engine's base weights, which it shares with the
 * engine and with every other set (`LocalEngine.trainAdapters`): several training runs on one copy
 * of a base model, as a Tinker server holds one model per client. Its own adapters, gradients,
 * optimizer state and step, its own sampling scheduler and prefix cache; the base weights never
 * change. The C engine only.
 *
 * Its calls take turns as the engine's do (a RwGate): sample calls run together, while a training
 * pass, an optimizer step or a load runs alone, so a sampled sequence comes from one set of
 * adapters. Calls of different sets never wait for each other here: a pass runs on this thread from
 * start to end, so passes over the shared base already run one at a time, and a set's passes read
 * and write only its own adapters.
 */
import type { Tokenizer } from "../../model/tokenizer.js";
import type { ModelConfig } from "../../model/config.js";
import { aggregationCoefficients } from "../../rl/aggregation.js";
import { summarizeForwardBackward } from "../../rl/loss-metrics.js";
import { resolvedLoss } from "../../rl/policy-loss.js";
import { RwGate } from "../../util/rw-gate.js";
import { checkAdamParams } from "../optim-params.js";
import { validateDatums } from "../validate-datums.js";
import { assertScoringTemperature, assertTokens } from "../validate.js";
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
import type { Backend, LoraStart, TrainableModel } from "./backend.js";
import { checkRequestOptions } from "./sampling-params.js";
import { Scheduler, type SchedulerOptions } from "./scheduler.js";

export class AdapterTrainer<M = unknown, T extends TrainableModel<M> = TrainableModel<M>> implements Engine {
  private readonly scheduler: Scheduler<unknown>;
  private readonly gate = new RwGate();

  constructor(
    private readonly backend: Backend<M, T, unknown>,
    /** The base's trainable (its weights are what every set shares). */
    private readonly base: T,
    private trainable: T,
    /** The adapters' spec: a load must hold adapters of the same. */
    readonly lora: LoraStart,
    readonly tokenizer: Tokenizer,
    readonly config: ModelConfig,
    /** Where checkpoints copy their tokenizer from (the base model's directory). */
    private readonly tokenizerFrom: string,
    options: SchedulerOptions,
  ) {
    this.scheduler = new Scheduler(backend.decodeCompute(trainable.model), tokenizer, options);
  }

  /** Optimizer steps taken (restored by load). */
  get step(): number {
    return (this.trainable as { step?: number }).step ?? 0;
  }

  describe(): string {
    return `local, LoRA rank ${this.lora.spec.rank} over a shared base`;
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    checkRequestOptions(params);
    if (params.signal?.aborted) throw params.signal.reason;
    return this.gate.shared(() => this.scheduler.submit(prompt, params, { first: 0 }));
  }

  async computeLogprobs(sequences: number[][], opts: { temperature?: number } = {}): Promise<(number | null)[][]> {
    sequences.forEach((s, i) => assertTokens(s, this.config.vocabSize, `sequence ${i}`));
    if (opts.temperature !== undefined) assertScoringTemperature(opts.temperature, "computeLogprobs: temperature");
    return this.backend.logprobs(this.trainable.model, sequences, opts.temperature ?? 1);
  }

  /** As LocalEngine.forwardBackward: the gradients add up in this set's adapters only. */
  async forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    const spec = resolvedLoss(loss);
    validateDatums(datums, spec);
    assertScoringTemperature(spec.temperature, "forwardBackward: loss.temperature");
    datums.forEach((d, i) => {
      assertTokens(d.tokens, this.config.vocabSize, `datum ${i} tokens`);
      assertTokens(d.targetTokens, this.config.vocabSize, `datum ${i} targetTokens`);
    });
    const coef = aggregationCoefficients(datums, spec.aggregation, spec.normalizer);
    return this.gate.exclusive(async () => {
      const t = this.trainable;
      const lengths = datums.map((d) => d.tokens.length);
      this.backend.beforeTraining(t, "policy", { policy: t }, lengths);
      const raw = this.backend.policyPass(t, datums, spec, coef);
      return summarizeForwardBackward(datums, spec, raw.logprobs, raw.lossSum, raw.entropySum);
    });
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    checkAdamParams(params);
    return this.gate.exclusive(async () => {
      const res = this.trainable.optimStep(params);
      // Cached keys and values were computed with the old adapters.
      if (!res.skipped) this.scheduler.prefix.clear();
      return res;
    });
  }

  /** A LoRA checkpoint: the adapters in PEFT's layout, their optimizer state and step, over the base's directory. */
  async save(dir: string): Promise<void> {
    this.backend.save(this.trainable, dir, this.tokenizerFrom);
  }

  /** The adapters alone, in PEFT's layout. */
  async saveAdapter(dir: string): Promise<void> {
    this.backend.saveAdapter!(this.trainable, dir);
  }

  /** Continues from a LoRA checkpoint (or PEFT adapter) of the same spec: its adapters, optimizer state and step. */
  async load(dir: string): Promise<void> {
    await this.gate.exclusive(async () => {
      const next = this.backend.adapterTrainable!(this.base, { ...this.lora, adapter: dir });
      this.scheduler.setCompute(this.backend.decodeCompute(next.model));
      this.trainable.dispose();
      this.trainable = next;
    });
  }

  /** Drops the prefix cache; requests still running finish on these adapters. */
  async dispose(): Promise<void> {
    this.scheduler.prefix.clear();
    this.trainable.dispose();
  }
}
