/**
 * The engine boundary, shaped like the Tinker training API: everything that
 * touches weights sits behind `Engine`. The agent runtime and the RL code use
 * only these types and never import the tensor library.
 */

export interface SamplingParams {
  /** Sequences to draw from the prompt; decoded as one batch. Default 1. */
  n?: number;
  /** New tokens at most per sequence. Default 256. */
  maxTokens?: number;
  /** 0 means greedy. Default 1. */
  temperature?: number;
  /** Nucleus mass; 1 disables. Default 1. */
  topP?: number;
  /** Keep the k most likely tokens; 0 disables. Default 0. */
  topK?: number;
  /** Stop strings and/or token ids. Default: the tokenizer's end-of-turn token. A matching token is kept in the output. */
  stop?: (string | number)[];
  /** Fixes the draws: sequence i uses the stream (seed, i). Default: random. */
  seed?: number;
  /** Also report, at every sampled position, the k most likely tokens (at most 20). Default 0: none. */
  topLogprobs?: number;
  /**
   * Called once per sampled token, right after it is appended to its sequence, in order
   * (before `sample` resolves). `index` numbers the sequence as in the returned `sequences`.
   */
  onToken?: (e: TokenEvent) => void;
  /**
   * Cancels the request: once aborted, its sequences leave the decode batch at the next step (other
   * requests in the batch go on unchanged) and `sample` rejects with `signal.reason`, as `fetch` does
   * (a DOMException named "AbortError" unless `abort(reason)` gave one). Already aborted: rejects at once, nothing is prefilled.
   */
  signal?: AbortSignal;
}

/** One sampled token, as `SamplingParams.onToken` reports it. */
export interface TokenEvent {
  /** The sequence's index within the request's n. */
  index: number;
  token: number;
  /** As in `SampledSequence.logprobs`. */
  logprob: number;
}

export type StopReason = "stop" | "length";

export interface SampledSequence {
  tokens: number[];
  /** logprob of each sampled token under the distribution it was drawn from (temperature, top-k, top-p applied). Greedy reports the untempered logprob. */
  logprobs: number[];
  stopReason: StopReason;
  /** The server's id of this sequence, where a remote engine's server gives one (a Tinker server from SDK 0.25). */
  sequenceId?: string;
  /** Present when `topLogprobs` > 0: per sampled token, the k most likely tokens, most likely first, with their logprobs under the same distribution as `logprobs` (only tokens it could draw: fewer than k under top-k / top-p or a tiny temperature). */
  topLogprobs?: TokenLogprob[][];
  /**
   * The policy version (optimizer steps taken) of the weights that sampled it, where the caller
   * tracks versions (the trainer's asynchronous mode, src/train/async/); engines leave it unset.
   */
  policyVersion?: number;
}

export interface TokenLogprob {
  token: number;
  logprob: number;
}

export interface SampleResult {
  sequences: SampledSequence[];
}

/**
 * One training example. `tokens[i]` is the model input at position i and
 * predicts `targetTokens[i]`; every per-token array has the same length.
 */
export interface Datum {
  tokens: number[];
  targetTokens: number[];
  /** Loss mask: 1 on action tokens, 0 on prompt and observation tokens. */
  weights: number[];
  /** Per-token advantages (policy-gradient losses). */
  advantages?: number[];
  /** Sampling logprobs of targetTokens (importance_sampling, ppo). */
  logprobs?: number[];
  /** Reference-policy logprobs of targetTokens (KL term). */
  refLogprobs?: number[];
  /**
   * The sequence this datum belongs to, for the seq-mean aggregations: datums of one call with the
   * same id are one sequence. A trajectory that a context rewrite split into several datums is one
   * sequence (its whole response), so the trainer gives its datums one id. Default: the datum is a
   * sequence by itself.
   */
  sequence?: number;
  /**
   * The oldest policy version (optimizer steps) that sampled one of its actions, when the rollout
   * recorded versions (train.async); bookkeeping only: no loss reads it.
   */
  policyVersion?: number;
}

/** The per-token losses, as Tinker names them; the formulas are in src/rl/policy-loss.ts. */
export type LossType = "cross_entropy" | "importance_sampling" | "ppo" | "cispo" | "dro" | "gspo";
export type KlForm = "k1" | "k2" | "k3";
/**
 * How per-token losses l reduce over the datums of one call, as verl's `agg_loss`; w are the
 * weights, a sequence s is the datums sharing a `sequence` id (see `Datum.sequence`), S the number
 * of sequences with Σ_s w > 0 (a sequence with no loss tokens is not counted):
 * - token-mean: Σ w·l / Σ w
 * - seq-mean-token-sum: per-sequence sums Σ_s w·l, averaged over the S sequences
 * - seq-mean-token-mean: per-sequence means Σ_s w·l / Σ_s w, averaged over the S sequences
 * - seq-mean-token-sum-norm: Σ w·l / `normalizer` (Dr. GRPO's fixed normalizer; no division by the number of sequences)
 * - sum: Σ w·l (Tinker's convention)
 * The coefficients: src/rl/aggregation.ts.
 */
export type LossAggregation =
  "token-mean" | "seq-mean-token-sum" | "seq-mean-token-mean" | "seq-mean-token-sum-norm" | "sum";

export interface LossSpec {
  type: LossType;
  /** PPO and CISPO: ratio clipped to [1 - clipLow, 1 + clipHigh]. Defaults 0.2 / 0.2 for PPO (raise clipHigh for DAPO's clip-higher), 1 / 3 for CISPO. */
  clipLow?: number;
  clipHigh?: number;
  /** DRO: weight of the quadratic penalty ½·β·(p − q)². Default 0.05. */
  beta?: number;
  /** PPO dual clip: for negative advantages the loss is capped at -A x dualClip. Default 3; 0 disables. */
  dualClip?: number;
  /** KL penalty against `refLogprobs`, added to the loss as coef x KL per token. */
  kl?: { coef: number; form?: KlForm };
  /** Default token-mean. */
  aggregation?: LossAggregation;
  /** For seq-mean-token-sum-norm: the fixed normalizer (verl's loss_scale_factor; for example the maximum response length). */
  normalizer?: number;
  /** Logits are divided by this before the softmax; match the sampling temperature. Default 1. */
  temperature?: number;
}

export interface ForwardBackwardResult {
  /** Per datum, the logprob of each target token under the current weights. */
  logprobs: number[][];
  metrics: {
    loss: number;
    /** Weighted tokens that entered the loss. */
    tokens: number;
    /** Mean entropy of the next-token distribution over weighted tokens (absent when the engine cannot compute it: Tinker). */
    entropy?: number;
    /** PPO: fraction of weighted tokens whose ratio was clipped. */
    clipFraction?: number;
    /** k3 estimate of KL(sampler || learner) over weighted tokens, when sampling logprobs were given. */
    approxKl?: number;
    /** Mean KL against the reference (the form in the spec), when refLogprobs were given. */
    klRef?: number;
  };
}

export interface AdamParams {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Decoupled (AdamW) weight decay. Default 0. */
  weightDecay?: number;
  /** Clip the global gradient norm to this; 0 disables. Default 0. */
  gradClipNorm?: number;
}

export interface OptimStepResult {
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** True when the gradients were not finite, or none were accumulated: nothing was applied and the step counter did not advance. */
  skipped: boolean;
  step: number;
}

export interface Engine {
  sample(prompt: number[], params?: SamplingParams): Promise<SampleResult>;
  /** Per sequence, entry 0 is null and entry i is log p(tokens[i] | tokens[<i]). */
  computeLogprobs(sequences: number[][], opts?: { temperature?: number }): Promise<(number | null)[][]>;
  forwardBackward(datums: Datum[], loss: LossSpec): Promise<ForwardBackwardResult>;
  optimStep(params: AdamParams): Promise<OptimStepResult>;
  save(dir: string): Promise<void>;
  load(dir: string): Promise<void>;
  /** Where this engine computes, in a few words for logs ("local, native backend, own avx512 kernels, 2 replicas"). */
  describe?(): string;
}

/** A value model for PPO with GAE, on its own weights. */
export interface ValueDatum {
  tokens: number[];
  /** Which positions enter the value loss. */
  weights: number[];
  returns: number[];
  /** Values predicted when the data was collected (for the clipped value loss). */
  oldValues?: number[];
}

export interface Critic {
  /** Per sequence, the value at every position. */
  values(sequences: number[][]): Promise<number[][]>;
  /** ½·mean over weighted positions of max((V−R)², (clip(V, V_old ± clip) − R)²). */
  forwardBackward(
    datums: ValueDatum[],
    opts?: { clip?: number },
  ): Promise<{ values: number[][]; metrics: { loss: number; tokens: number; clipFraction: number } }>;
  optimStep(params: AdamParams): Promise<OptimStepResult>;
  save(dir: string): Promise<void>;
  load(dir: string): Promise<void>;
}
