/**
 * The policy as asynchronous training drives it: a PolicyEngine around the recipe's engine that
 * counts policy versions (optimizer steps that were applied) and stamps every sampled sequence
 * with the version of the weights that sampled it (SampledSequence.policyVersion, which the agent
 * loop and the gateway copy onto the trajectory's steps).
 *
 * The stamp is exact because an optimizer step runs alone: it waits for the sample calls in flight,
 * and sample calls that come during it wait for it (a RwGate). That is also what each engine needs
 * for its weights to change under it safely: the split engine pushes the new weights to its
 * inference server inside the step, and a Tinker server refuses a sampling session whose weights
 * have changed. Training passes and scoring are not held here: on a remote engine they overlap
 * sampling; the local engine holds its own training passes apart from its decode steps
 * (src/engine/local/local-engine.ts).
 */
import type { PolicyEngine } from "../../engine/factory.js";
import type {
  AdamParams,
  Datum,
  ForwardBackwardResult,
  LossSpec,
  OptimStepResult,
  SampleResult,
  SamplingParams,
} from "../../engine/types.js";
import { RwGate } from "../../util/rw-gate.js";

export class VersionedPolicy implements PolicyEngine {
  private readonly gate = new RwGate();

  constructor(
    private readonly inner: PolicyEngine,
    /** The version the weights start at: the optimizer steps already taken (a resumed run's). */
    private current: number,
  ) {}

  /** Optimizer steps applied so far: the version the next sample call gets. */
  get version(): number {
    return this.current;
  }

  get tokenizer() {
    return this.inner.tokenizer;
  }

  get config() {
    return this.inner.config;
  }

  sample(prompt: number[], params?: SamplingParams): Promise<SampleResult> {
    return this.gate.shared(async () => {
      const version = this.current;
      const res = await this.inner.sample(prompt, params);
      return { ...res, sequences: res.sequences.map((s) => ({ ...s, policyVersion: version })) };
    });
  }

  computeLogprobs(sequences: number[][], opts?: { temperature?: number }): Promise<(number | null)[][]> {
    return this.inner.computeLogprobs(sequences, opts);
  }

  forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    return this.inner.forwardBackward(datums, loss);
  }

  optimStep(params: AdamParams): Promise<OptimStepResult> {
    return this.gate.exclusive(async () => {
      const res = await this.inner.optimStep(params);
      if (!res.skipped) this.current++;
      return res;
    });
  }

  save(dir: string): Promise<void> {
    return this.inner.save(dir);
  }

  load(dir: string): Promise<void> {
    return this.gate.exclusive(() => this.inner.load(dir));
  }

  describe(): string {
    return this.inner.describe?.() ?? "policy";
  }

  async prefixHitRate(): Promise<number> {
    return (await this.inner.prefixHitRate?.()) ?? 0;
  }

  dispose(): Promise<void> {
    return this.inner.dispose();
  }
}

/**
 * The policy as the rollout producer sees it: every sample call also carries `signal`, and once
 * it aborts new calls fail at once, so a stopped producer's episodes end at their next turn.
 */
export class AbortableSampling implements PolicyEngine {
  constructor(
    private readonly inner: PolicyEngine,
    private readonly signal: AbortSignal,
  ) {}

  get tokenizer() {
    return this.inner.tokenizer;
  }

  get config() {
    return this.inner.config;
  }

  async sample(prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    if (this.signal.aborted) throw this.signal.reason;
    const signal = params.signal ? AbortSignal.any([params.signal, this.signal]) : this.signal;
    return this.inner.sample(prompt, { ...params, signal });
  }

  computeLogprobs(sequences: number[][], opts?: { temperature?: number }): Promise<(number | null)[][]> {
    return this.inner.computeLogprobs(sequences, opts);
  }

  forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult> {
    return this.inner.forwardBackward(datums, loss);
  }

  optimStep(params: AdamParams): Promise<OptimStepResult> {
    return this.inner.optimStep(params);
  }

  save(dir: string): Promise<void> {
    return this.inner.save(dir);
  }

  load(dir: string): Promise<void> {
    return this.inner.load(dir);
  }

  describe(): string {
    return this.inner.describe?.() ?? "policy";
  }

  dispose(): Promise<void> {
    return this.inner.dispose();
  }
}
