/**
 * The replica interface: what the local engine calls on one copy of its models, in this thread
 * (./replica.ts, over either backend) or over a worker channel (./worker-replica.ts). Every method
 * is async so the two are interchangeable.
 */
import type { BackendChoice, BackendName, BlasChoice, Bf16Products } from "./addon.js";
import type { SchedulerOptions, SchedulerStats } from "./scheduler.js";
import type { PrefixCacheStats } from "./prefix-cache.js";
import type { LoraSpec } from "../../model/peft.js";
import type { ResolvedLoss } from "../../rl/policy-loss.js";
import type { AdamParams, Datum, OptimStepResult, SampleResult, SamplingParams, ValueDatum } from "../types.js";

/** What one replica's pass over its datums returns; `summarizeForwardBackward` turns passes into metrics. */
export interface RawForwardBackward {
  logprobs: number[][];
  lossSum: number;
  /** Sum of next-token entropies over weighted tokens. */
  entropySum: number;
}

export interface RawValuePass {
  values: number[][];
  lossSum: number;
  /** Weighted positions, and how many of them the value clip bound. */
  tokens: number;
  clipped: number;
}

export type Role = "policy" | "critic";

export interface ReplicaOptions extends SchedulerOptions {
  /** Cap on padded tokens per micro-batch. Default: none. */
  microBatchTokens?: number;
  /** Bytes of activations the gradient tape may hold per micro-batch. Default 640 MiB (the wasm heap is 4 GiB). */
  microBatchBytes?: number;
  /**
   * Native engine: sequences of one call that begin alike compute their common prefix once
   * (./prefix-tree.ts). Default true; the TF.js engine never shares.
   */
  sharedPrefix?: boolean;
  /** The engine: native (the C engine, ./native/), tfjs (TensorFlow.js, ./tfjs/) or auto. Default: env AGENT_R1_BACKEND, else auto. */
  backend?: BackendChoice;
  /**
   * Train LoRA adapters instead of the full weights (native engine only): the spec, the seed of
   * the adapters' initialization, or a PEFT adapter directory to start from.
   */
  lora?: { spec: LoraSpec; seed?: number; adapter?: string };
  /**
   * The native engine's memory budget, GiB: loading and training are refused in one line when the
   * memory plan (./native/memory-plan.ts) exceeds it. Default: 75% of physical memory.
   */
  memoryGb?: number;
  /** BLAS threads per matrix product on the native backend. Default: cores / replicas (env AGENT_R1_BLAS_THREADS overrides). */
  blasThreads?: number;
  /** The native backend's matrix products: own kernels, the system BLAS, or auto. Default: env AGENT_R1_BLAS, else auto. */
  blas?: BlasChoice;
  /** Products with a bfloat16 weight on the native backend: AMX tiles, exact float32, or auto (tiles where the CPU has them). */
  bf16Products?: Bf16Products;
}

export interface ReplicaStats {
  /** The engine this replica runs: native, or tfjs. */
  backend: BackendName;
  liveTensors: number;
  /** Tensors held by the prefix cache and the running decode batch. */
  cacheTensors: number;
  prefixCache: PrefixCacheStats;
  scheduler: SchedulerStats;
}

/** The replica interface, as the engine calls it in-process or over a worker channel. */
export interface ReplicaApi {
  sample(prompt: number[], params: SamplingParams, firstStream: number): Promise<SampleResult>;
  computeLogprobs(sequences: number[][], temperature: number): Promise<(number | null)[][]>;
  forwardBackward(datums: Datum[], loss: ResolvedLoss, coef: number[][]): Promise<RawForwardBackward>;
  createCritic(): Promise<void>;
  disposeCritic(): Promise<void>;
  criticValues(sequences: number[][]): Promise<number[][]>;
  criticForwardBackward(datums: ValueDatum[], clip: number, total: number): Promise<RawValuePass>;
  /** Single replica: apply the accumulated gradients. */
  optimStep(role: Role, params: AdamParams): Promise<OptimStepResult>;
  /** Several replicas: write gradients to `target`; then apply the sum of every replica's. */
  exportGradients(role: Role, target: Float32Array): Promise<boolean>;
  optimStepWithSum(role: Role, sources: Float32Array[], params: AdamParams): Promise<OptimStepResult>;
  gradientSize(role: Role): Promise<number>;
  save(role: Role, dir: string, tokenizerFrom: string): Promise<void>;
  load(role: Role, dir: string): Promise<void>;
  zeroGrad(role: Role): Promise<void>;
  weightsChecksum(role: Role): Promise<number>;
  clearPrefixCache(): Promise<void>;
  stats(): Promise<ReplicaStats>;
  dispose(): Promise<void>;
}
