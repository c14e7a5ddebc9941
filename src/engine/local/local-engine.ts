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
import { memoryPlanner, DEFAULT_ACTIVATION_BUDGET, type MicroBatchPlanner } from "../micro-batches.js";
import { resolvedLoss, validateDatums } from "../loss-math.js";
import type { AdamParams, Datum, Engine, ForwardBackwardResult, LossSpec, OptimStepResult, SampleResult, SamplingParams } from "../types.js";
import { InputError } from "../../util/errors.js";
import { assertTokens } from "../validate.js";

export interface LocalEngineOptions {
  /** Cap on padded tokens per micro-batch in forwardBackward and computeLogprobs. Default: none. */
  microBatchTokens?: number;
  /** Bytes of activations the gradient tape may hold per micro-batch. Default 1.25 GiB (the wasm heap is 4 GiB). */
  microBatchBytes?: number;
}

export class LocalEngine implements Engine {
  private trainable: Trainable;
  readonly plan: MicroBatchPlanner;

  private constructor(
    model: Transformer,
    readonly tokenizer: Tokenizer,
    private sourceDir: string,
    opts: LocalEngineOptions,
  ) {
    this.trainable = new Trainable(model);
    const c = model.config;
    const shape = { vocabSize: c.vocabSize, hiddenSize: c.hiddenSize, intermediateSize: c.intermediateSize, numLayers: c.numLayers, numHeads: c.numHeads };
    this.plan = memoryPlanner(shape, opts.microBatchBytes ?? DEFAULT_ACTIVATION_BUDGET, opts.microBatchTokens ?? Infinity);
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
    return computeLogprobs(this.model, sequences, opts.temperature ?? 1, this.plan);
  }

  async forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    const spec = resolvedLoss(loss);
    validateDatums(datums, spec);
    datums.forEach((d, i) => {
      this.checkTokens(d.tokens, `datum ${i} tokens`);
      this.checkTokens(d.targetTokens, `datum ${i} targetTokens`);
    });
    return policyForwardBackward(this.trainable, datums, spec, this.plan);
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    if (!(params.lr >= 0)) throw new InputError(`optimStep: lr must be >= 0, got ${params.lr}`);
    return this.trainable.optimStep(params);
  }

  /** A value model of the same architecture, initialized from the policy's current weights. */
  async createCritic(): Promise<LocalCritic> {
    const weights = this.model.toHostWeights();
    const model = Transformer.fromHostWeights(this.config, weights, "(policy weights)", "value");
    return new LocalCritic(model, this.tokenizer, this.sourceDir, this.plan);
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
    assertTokens(tokens, this.config.vocabSize, what);
  }
}
