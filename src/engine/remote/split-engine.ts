/**
 * A policy that trains on one engine (the learner) and samples its rollouts on an inference server
 * (vLLM or SGLang, sampler-client.ts). After each optimizer step, and once at the start, the
 * learner's weights reach the server (a WeightsPush: whole model directories, ./full-weights-push.ts,
 * or LoRA adapters, ./adapter-push.ts), so every rollout samples the current policy. The two then
 * differ only in numerics (kernels, batching, precision): `loss.tis` corrects for that with the
 * learner's own logprobs (src/rl/tis.ts), which `computeLogprobs` (the learner's) provides.
 */
import type { PolicyEngine } from "../factory.js";
import type {
  AdamParams,
  Datum,
  ForwardBackwardResult,
  LossSpec,
  OptimStepResult,
  SampleResult,
  SamplingParams,
} from "../types.js";
import { assertTokens } from "../validate.js";
import type { RolloutSampler } from "./sampler-client.js";

/** How the learner's weights reach the server. */
export interface WeightsPush {
  /** Writes the learner's weights (after optimizer step `step`) where the server reads them, and has the server load them. */
  publish(step: number): Promise<void>;
  /**
   * Runs `sample` on the weights the server holds now (`adapter` names them when they are a LoRA
   * adapter), which stay loaded until it is done.
   */
  use<T>(sample: (adapter?: string) => Promise<T>): Promise<T>;
  /** At the end: what the server holds of ours is dropped and our files removed. */
  dispose(): Promise<void>;
}

/** The learner's optimizer steps so far (0 for an engine that does not say). */
function stepOf(learner: PolicyEngine): number {
  const step = (learner as { step?: unknown }).step;
  return typeof step === "number" ? step : 0;
}

export class SplitEngine implements PolicyEngine {
  private ready: Promise<void>;

  constructor(
    private readonly learner: PolicyEngine,
    private readonly sampler: RolloutSampler,
    private readonly push: WeightsPush,
  ) {
    this.ready = push.publish(stepOf(learner)); // the server may hold other weights: give it the learner's
    this.ready.catch(() => undefined);
  }

  get tokenizer() {
    return this.learner.tokenizer;
  }

  get config() {
    return this.learner.config;
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    await this.ready;
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    const eos = this.tokenizer.eosTokenId;
    const stop = eos !== undefined ? [eos] : [];
    // The sampler checks what comes back, token ids against the vocabulary included.
    const res = await this.push.use((adapter) =>
      this.sampler.sample(prompt, params, stop, this.config.vocabSize, adapter),
    );
    if (params.onToken)
      res.sequences.forEach((s, index) =>
        s.tokens.forEach((token, t) => params.onToken!({ index, token, logprob: s.logprobs[t] })),
      );
    return res;
  }

  computeLogprobs(sequences: number[][], opts?: { temperature?: number }): Promise<(number | null)[][]> {
    return this.learner.computeLogprobs(sequences, opts);
  }

  forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    return this.learner.forwardBackward(datums, loss);
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const r = await this.learner.optimStep(params);
    if (!r.skipped) {
      this.ready = this.push.publish(r.step);
      await this.ready;
    }
    return r;
  }

  save(dir: string): Promise<void> {
    return this.learner.save(dir);
  }

  async load(dir: string): Promise<void> {
    await this.learner.load(dir);
    this.ready = this.push.publish(stepOf(this.learner));
    await this.ready;
  }

  describe(): string {
    return `${this.learner.describe?.() ?? "learner"}; rollouts sampled on ${this.sampler.describe()}`;
  }

  /** Once any weight push is over: the server's copies dropped and our files removed, then the learner disposed of. */
  async dispose(): Promise<void> {
    try {
      await this.ready.catch(() => undefined);
      await this.push.dispose();
    } finally {
      await this.learner.dispose();
    }
  }
}
