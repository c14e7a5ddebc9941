/**
 * What a compute backend gives the local engine. The engine's one Replica (./replica.ts) holds the
 * policy, the critic and the sampling scheduler, and calls a backend for everything that touches
 * tensors: opening a model directory, the scheduler's decode compute, logprobs, the policy and
 * critic passes, a critic made from the policy, saving, and the checks that come before training.
 * A backend is one folder (./native/: the C engine; ./tfjs/: TensorFlow.js) whose module exports
 * `openBackend`, and one line in BACKENDS below.
 */
import type { Tokenizer } from "../../model/tokenizer.js";
import type { ResolvedLoss } from "../../rl/policy-loss.js";
import type { AdamParams, Datum, OptimStepResult, ValueDatum } from "../types.js";
import type { BackendName } from "./addon.js";
import type { DecodeCompute } from "./decode-compute.js";
import type { RawForwardBackward, RawValuePass, ReplicaOptions, Role } from "./replica-api.js";
import type { SchedulerOptions } from "./scheduler.js";

/** Where trained LoRA adapters start: new ones of `spec` (drawn from `seed`), or `adapter`'s (a directory of this spec). */
export type LoraStart = NonNullable<ReplicaOptions["lora"]>;

/** A model as a backend trains it: its parameters, their gradients and AdamW's state. */
export interface TrainableModel<M> {
  readonly model: M;
  /** Trained floats: what exportGradients writes. */
  readonly size: number;
  optimStep(params: AdamParams): OptimStepResult;
  /** Writes the gradients to `target`; whether any were accumulated. */
  exportGradients(target: Float32Array): boolean;
  /** The gradients become the sum of several replicas' exports. */
  setGradientsFromSum(sources: Float32Array[]): void;
  zeroGrad(): void;
  weightsChecksum(): number;
  dispose(): void;
}

/** The replica's models when a backend is asked to check or plan: the policy, and the critic if there is one. */
export interface Models<T> {
  policy?: T;
  critic?: T;
}

export interface Backend<M, T extends TrainableModel<M>, KV> {
  readonly name: BackendName;
  /** A model directory for `role` (the policy's LM head, the critic's value head), with its optimizer state. */
  open(dir: string, role: Role, models: Models<T>): T;
  /** The sampling scheduler's options for this policy (the C engine adds its keys-and-values budget). */
  schedulerOptions(policy: T): SchedulerOptions;
  decodeCompute(model: M): DecodeCompute<KV>;
  logprobs(model: M, sequences: number[][], temperature: number): (number | null)[][];
  policyPass(t: T, datums: Datum[], loss: ResolvedLoss, coef: number[][]): RawForwardBackward;
  /** A value model from the policy's weights. */
  critic(policy: T): T;
  criticValues(model: M, sequences: number[][]): number[][];
  criticPass(t: T, datums: ValueDatum[], clip: number, total: number): RawValuePass;
  /**
   * Before a training pass (its sequences' `lengths`) or an optimizer step (no lengths) of `t`:
   * TF.js checks that training fits its wasm heap; the C engine readies full weights to train.
   */
  beforeTraining(t: T, role: Role, models: Models<T>, lengths?: number[]): void;
  save(t: T, dir: string, tokenizerFrom: string): void;
  /** The LoRA adapters of `t` alone, in PEFT's layout (the C engine only). */
  saveAdapter?(t: T, dir: string): void;
  /** A sampling model of the policy's base weights with the PEFT adapter in `dir` (the C engine only). */
  adapterModel?(policy: T, dir: string): M;
  /**
   * LoRA adapters that train over the policy's base weights, which they share and never change:
   * new ones, or (`start.adapter`) a directory's with its optimizer state (the C engine only).
   */
  adapterTrainable?(policy: T, start: LoraStart): T;
  /** Tensors alive besides the caches' `cacheTensors`. */
  liveTensors(cacheTensors: number): number;
  dispose(): void;
}

/** What a backend module's openBackend gives: the backend, the policy of the directory, its tokenizer. */
export interface OpenedBackend<M, T extends TrainableModel<M>, KV> {
  backend: Backend<M, T, KV>;
  policy: T;
  tokenizer: Tokenizer;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyOpened = OpenedBackend<any, TrainableModel<any>, any>;

/** Every backend, by name: the module that opens it (loaded only when chosen, so the C engine never loads TF.js). */
export const BACKENDS: Record<
  BackendName,
  () => Promise<{ openBackend(dir: string, opts: ReplicaOptions): Promise<AnyOpened> }>
> = {
  native: () => import("./native/native-backend.js"),
  tfjs: () => import("./tfjs/tfjs-backend.js"),
};
