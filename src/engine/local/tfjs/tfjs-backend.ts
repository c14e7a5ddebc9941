/**
 * The TF.js backend (../backend.ts): the decoder on TensorFlow.js's wasm backend (./transformer.ts),
 * the portable engine, which needs no addon. Training must fit
 * the 4 GiB wasm heap (./heap-plan.ts): it is refused before any tensor work, instead of aborting
 * the process.
 */
import { join } from "node:path";
import { initBackend, tf } from "./tf-backend.js";
import { Trainable } from "./trainable.js";
import { TfDecodeCompute } from "./tf-decode.js";
import { computeLogprobs, policyPass } from "./policy-train.js";
import { criticPass, criticValues } from "./critic-train.js";
import { loadTrainableState, saveTrainable } from "../trainable-io.js";
import { checkTrainingHeap, largestMicroBatch } from "./heap-plan.js";
import { Transformer, type KVCache } from "./transformer.js";
import { loadModelDir } from "../../../model/model-dir.js";
import type { ModelConfig } from "../../../model/config.js";
import { memoryPlanner, DEFAULT_ACTIVATION_BUDGET, type MicroBatchPlanner } from "../../micro-batches.js";
import type { ResolvedLoss } from "../../../rl/policy-loss.js";
import type { Datum, ValueDatum } from "../../types.js";
import type { Backend, Models, OpenedBackend } from "../backend.js";
import type { ReplicaOptions, Role } from "../replica-api.js";

const shapeOf = (c: ModelConfig) => ({
  vocabSize: c.vocabSize,
  hiddenSize: c.hiddenSize,
  intermediateSize: c.intermediateSize,
  numLayers: c.numLayers,
  numHeads: c.numHeads,
});

/** A model directory as a Transformer with its optimizer state, for `role`'s head. */
function openTrainable(
  dir: string,
  role: Role,
): { trainable: Trainable; tokenizer: ReturnType<typeof loadModelDir>["tokenizer"] } {
  const m = loadModelDir(dir);
  const model = Transformer.fromHostWeights(
    m.config,
    m.weights,
    join(dir, "model.safetensors"),
    role === "policy" ? "lm" : "value",
  );
  const trainable = new Trainable(model);
  try {
    loadTrainableState(trainable, dir);
  } catch (e) {
    trainable.dispose();
    throw e;
  }
  return { trainable, tokenizer: m.tokenizer };
}

export class TfjsBackend implements Backend<Transformer, Trainable, KVCache> {
  readonly name = "tfjs" as const;

  constructor(
    private readonly plan: MicroBatchPlanner,
    private readonly opts: ReplicaOptions,
  ) {}

  open(dir: string, role: Role): Trainable {
    return openTrainable(dir, role).trainable;
  }

  schedulerOptions() {
    return this.opts;
  }

  decodeCompute(model: Transformer) {
    return new TfDecodeCompute(model);
  }

  logprobs(model: Transformer, sequences: number[][], temperature: number) {
    return computeLogprobs(model, sequences, temperature, this.plan);
  }

  policyPass(t: Trainable, datums: Datum[], loss: ResolvedLoss, coef: number[][]) {
    return policyPass(t, datums, loss, this.plan, coef);
  }

  critic(policy: Trainable): Trainable {
    const model = Transformer.fromHostWeights(
      policy.model.config,
      policy.model.toHostWeights(),
      "(policy weights)",
      "value",
    );
    return new Trainable(model);
  }

  criticValues(model: Transformer, sequences: number[][]) {
    return criticValues(model, sequences, this.plan);
  }

  criticPass(t: Trainable, datums: ValueDatum[], clip: number, total: number) {
    return criticPass(t, datums, clip, total, this.plan);
  }

  /** Training must fit the wasm heap (heap-plan.ts): refused before any tensor work, instead of aborting the process. */
  beforeTraining(t: Trainable, _role: Role, models: Models<Trainable>, lengths?: number[]): void {
    const shape = shapeOf(t.model.config);
    const parameters = [models.policy, models.critic].flatMap((m) => (m ? [m.size] : []));
    checkTrainingHeap({
      parameters,
      prefixCacheBytes: this.opts.prefixCacheBytes ?? 256 * 2 ** 20,
      microBatch: lengths && largestMicroBatch(shape, this.plan, lengths),
    });
  }

  save(t: Trainable, dir: string, tokenizerFrom: string): void {
    saveTrainable(t, dir, tokenizerFrom);
  }

  liveTensors(): number {
    return tf.memory().numTensors;
  }

  dispose(): void {}
}

export async function openBackend(
  dir: string,
  opts: ReplicaOptions,
): Promise<OpenedBackend<Transformer, Trainable, KVCache>> {
  await initBackend();
  const { trainable, tokenizer } = openTrainable(dir, "policy");
  const plan = memoryPlanner(
    shapeOf(trainable.model.config),
    opts.microBatchBytes ?? DEFAULT_ACTIVATION_BUDGET,
    opts.microBatchTokens ?? Infinity,
  );
  return { backend: new TfjsBackend(plan, opts), policy: trainable, tokenizer };
}
