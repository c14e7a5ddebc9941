/**
 * A policy that trains on one engine (the learner) and samples its rollouts on an inference server
 * (vLLM or SGLang, sampler-client.ts). After each optimizer step, and once at the start, the
 * learner's weights are written to a directory the server can read and the server is asked to load
 * them, so every rollout samples the current policy. The two then differ only in numerics (kernels,
 * batching, precision): `loss.tis` corrects for that with the learner's own logprobs (src/rl/tis.ts),
 * which `computeLogprobs` (the learner's) provides.
 *
 * The weights directory is the caller's unless it says the engine owns it (a temporary directory
 * made with src/util/temp-dirs.ts): then `dispose` removes it, and the process does at exit if
 * nothing did.
 */
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
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
import { removeTempDir } from "../../util/temp-dirs.js";
import type { RolloutSampler } from "./sampler-client.js";

export class SplitEngine implements PolicyEngine {
  private version = 0;
  private ready: Promise<void>;

  constructor(
    private readonly learner: PolicyEngine,
    private readonly sampler: RolloutSampler,
    /** Where the sampler reads weights from: one subdirectory per version, the last two kept. */
    private readonly weightsDir: string,
    /** Whether `weightsDir` is a temporary directory of this engine's, removed by `dispose`. */
    private readonly ownsWeightsDir = false,
  ) {
    mkdirSync(weightsDir, { recursive: true });
    this.ready = this.push(); // the server may hold other weights: give it the learner's
    this.ready.catch(() => undefined);
  }

  get tokenizer() {
    return this.learner.tokenizer;
  }

  get config() {
    return this.learner.config;
  }

  /** Writes the learner's weights as version v and points the server at them. */
  private async push(): Promise<void> {
    const v = ++this.version;
    const dir = join(this.weightsDir, `v${v}`);
    await this.learner.save(dir);
    await this.sampler.reload(dir, v);
    const old = join(this.weightsDir, `v${v - 2}`);
    if (v > 2 && existsSync(old)) rmSync(old, { recursive: true, force: true });
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    await this.ready;
    assertTokens(prompt, this.config.vocabSize, "sample: the prompt");
    const eos = this.tokenizer.eosTokenId;
    // The sampler checks what comes back, token ids against the vocabulary included.
    const res = await this.sampler.sample(prompt, params, eos !== undefined ? [eos] : [], this.config.vocabSize);
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
      this.ready = this.push();
      await this.ready;
    }
    return r;
  }

  save(dir: string): Promise<void> {
    return this.learner.save(dir);
  }

  async load(dir: string): Promise<void> {
    await this.learner.load(dir);
    this.ready = this.push();
    await this.ready;
  }

  describe(): string {
    return `${this.learner.describe?.() ?? "learner"}; rollouts sampled on ${this.sampler.describe()}`;
  }

  /** Disposes of the learner once any weight push is over, then removes the weights directory if it is ours. */
  async dispose(): Promise<void> {
    try {
      await this.ready.catch(() => undefined);
      await this.learner.dispose();
    } finally {
      if (this.ownsWeightsDir) removeTempDir(this.weightsDir);
    }
  }
}
