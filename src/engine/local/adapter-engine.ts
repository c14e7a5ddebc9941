/**
 * One LoRA adapter served over the local engine's base weights, as an inference server holds each
 * adapter it has loaded (`agent-r1 serve`'s /v1/load_lora_adapter): a sampling model that shares
 * the base's weight arrays and adds the adapter's (the backend's `adapterModel`, the C engine only),
 * with its own sampling scheduler and prefix cache, and logprobs through the same backend. It
 * samples and scores only; nothing trains.
 */
import type { Tokenizer } from "../../model/tokenizer.js";
import type { ModelConfig } from "../../model/config.js";
import type { SampleResult, SamplingParams } from "../types.js";
import { assertScoringTemperature, assertTokens } from "../validate.js";
import type { Backend, TrainableModel } from "./backend.js";
import { Scheduler, type SchedulerOptions } from "./scheduler.js";

export class AdapterEngine<M = unknown> {
  private readonly scheduler: Scheduler<unknown>;

  constructor(
    private readonly backend: Backend<M, TrainableModel<M>, unknown>,
    private readonly model: M,
    readonly tokenizer: Tokenizer,
    readonly config: ModelConfig,
    /** The directory the adapter was read from. */
    readonly source: string,
    options: SchedulerOptions,
  ) {
    this.scheduler = new Scheduler(backend.decodeCompute(model), tokenizer, options);
  }

  /** Samples as the engine does (the scheduler checks the parameters). */
  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    return this.scheduler.submit(prompt, params, { first: 0 });
  }

  async computeLogprobs(sequences: number[][], opts: { temperature?: number } = {}): Promise<(number | null)[][]> {
    sequences.forEach((s, i) => assertTokens(s, this.config.vocabSize, `sequence ${i}`));
    if (opts.temperature !== undefined) assertScoringTemperature(opts.temperature, "computeLogprobs: temperature");
    return this.backend.logprobs(this.model, sequences, opts.temperature ?? 1);
  }

  /** Drops the prefix cache; requests still running finish on the adapter's weights. */
  dispose(): void {
    this.scheduler.prefix.clear();
  }
}
