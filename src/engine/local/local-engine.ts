/**
 * The in-process engine on TensorFlow.js (wasm): one policy model that samples
 * and trains, saved and loaded as a Hugging Face directory plus optimizer state.
 */
import { join } from "node:path";
import { initBackend, tf } from "./tf-backend.js";
import { Trainable } from "./trainable.js";
import { sampleWithCache } from "./sampler.js";
import { computeLogprobs, policyForwardBackward } from "./policy-train.js";
import { LocalCritic } from "./critic.js";
import { Transformer } from "../../model/transformer.js";
import { loadModelDir } from "../../model/model-dir.js";
import { loadTrainableState, saveTrainable } from "./trainable-io.js";
import type { ModelConfig } from "../../model/config.js";
import type { Tokenizer } from "../../model/tokenizer.js";
import { defaultTokenBudget } from "../micro-batches.js";
import { resolvedLoss, validateDatums } from "../loss-math.js";
import type { AdamParams, Datum, Engine, ForwardBackwardResult, LossSpec, OptimStepResult, SampleResult, SamplingParams } from "../types.js";
import { InputError } from "../../util/errors.js";

export interface LocalEngineOptions {
  /** Tokens per micro-batch in forwardBackward (padded tokens count). Default: from the model size. */
  microBatchTokens?: number;
}

export class LocalEngine implements Engine {
  private trainable: Trainable;
  readonly tokenBudget: number;

  private constructor(
    model: Transformer,
    readonly tokenizer: Tokenizer,
    private sourceDir: string,
    opts: LocalEngineOptions,
  ) {
    this.trainable = new Trainable(model);
    this.tokenBudget = opts.microBatchTokens ?? defaultTokenBudget(model.config.vocabSize, model.config.hiddenSize);
  }

  /** Loads a Hugging Face model directory (optimizer state too, when the directory holds one). */
  static async load(dir: string, opts: LocalEngineOptions = {}): Promise<LocalEngine> {
    await initBackend();
    const m = loadModelDir(dir);
    const model = Transformer.fromHostWeights(m.config, m.weights, join(dir, "model.safetensors"));
    const engine = new LocalEngine(model, m.tokenizer, dir, opts);
    engine.loadOptimizer(dir);
    return engine;
  }

  get config(): ModelConfig {
    return this.trainable.model.config;
  }

  get model(): Transformer {
    return this.trainable.model;
  }

  get step(): number {
    return this.trainable.step;
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    return sampleWithCache(this.model, this.tokenizer, prompt, params);
  }

  async computeLogprobs(sequences: number[][], opts: { temperature?: number } = {}): Promise<(number | null)[][]> {
    sequences.forEach((s, i) => this.checkTokens(s, `sequence ${i}`));
    return computeLogprobs(this.model, sequences, opts.temperature ?? 1, this.tokenBudget);
  }

  async forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    const spec = resolvedLoss(loss);
    validateDatums(datums, spec);
    datums.forEach((d, i) => {
      this.checkTokens(d.tokens, `datum ${i} tokens`);
      this.checkTokens(d.targetTokens, `datum ${i} targetTokens`);
    });
    return policyForwardBackward(this.trainable, datums, spec, this.tokenBudget);
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    if (!(params.lr >= 0)) throw new InputError(`optimStep: lr must be >= 0, got ${params.lr}`);
    return this.trainable.optimStep(params);
  }

  /** A value model of the same architecture, initialized from the policy's current weights. */
  async createCritic(): Promise<LocalCritic> {
    const weights = this.model.toHostWeights();
    const model = Transformer.fromHostWeights(this.config, weights, "(policy weights)", "value");
    return new LocalCritic(model, this.tokenizer, this.sourceDir, this.tokenBudget);
  }

  async save(dir: string): Promise<void> {
    saveTrainable(this.trainable, dir, this.sourceDir);
  }

  async load(dir: string): Promise<void> {
    const m = loadModelDir(dir);
    const model = Transformer.fromHostWeights(m.config, m.weights, join(dir, "model.safetensors"));
    this.trainable.dispose();
    this.trainable = new Trainable(model);
    this.sourceDir = dir;
    this.loadOptimizer(dir);
  }

  /** Live tensors in the backend, for leak checks. */
  liveTensors(): number {
    return tf.memory().numTensors;
  }

  dispose(): void {
    this.trainable.dispose();
  }

  private loadOptimizer(dir: string): void {
    loadTrainableState(this.trainable, dir);
  }

  private checkTokens(tokens: number[], what: string): void {
    const V = this.config.vocabSize;
    const bad = tokens.find((t) => !Number.isInteger(t) || t < 0 || t >= V);
    if (bad !== undefined) throw new InputError(`${what}: token ${bad} is outside the vocabulary [0, ${V})`);
  }
}
