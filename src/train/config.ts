/**
 * The training configuration: one zod schema, parsed once at the edge (a YAML
 * recipe plus `key.path=value` overrides). Every field has a working default;
 * unknown keys are errors.
 */
import { z } from "zod";

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const fraction = z.number().min(0).max(1);

export const ESTIMATORS = ["grpo", "dr-grpo", "rloo", "reinforce", "reinforce++", "reinforce++-baseline", "gae", "gae-step"] as const;

export const configSchema = z.strictObject({
  model: z
    .strictObject({
      /** A Hugging Face model directory to start from. */
      path: z.string().optional(),
      /** Or a fresh random model of a preset (written into the run directory). */
      preset: z.enum(["tiny", "small", "medium"]).optional(),
      /** Tokenizer directory for a preset model; default: the shipped tokenizer. */
      tokenizer: z.string().optional(),
    })
    .prefault({}),
  engine: z
    .strictObject({
      /** Worker threads, one model replica each; 0 runs in the main thread. Default: 2 on 2+ cores. */
      workers: nonNegInt.optional(),
      prefixCacheMb: nonNegInt.default(256),
      microBatchMb: positiveInt.default(640),
    })
    .prefault({}),
  task: z
    .strictObject({
      name: z.string().default("calc"),
      /** Task-specific options, checked by the task itself. */
      options: z.record(z.string(), z.unknown()).default({}),
    })
    .prefault({}),
  rollout: z
    .strictObject({
      /** Samples per prompt (the group size for GRPO / RLOO). */
      n: positiveInt.default(8),
      maxTurns: positiveInt.default(4),
      maxTokensPerTurn: positiveInt.default(96),
      maxTotalTokens: positiveInt.default(1024),
      temperature: z.number().nonnegative().default(1),
      topP: z.number().gt(0).max(1).default(1),
    })
    .prefault({}),
  algorithm: z
    .strictObject({
      estimator: z.enum(ESTIMATORS).default("grpo"),
      gamma: fraction.default(1),
      lambda: fraction.default(1),
      /** Drop groups whose rewards are all equal (they carry no signal). */
      filterConstantGroups: z.boolean().default(true),
      /** Give no gradient to trajectories cut off by a length limit. */
      maskOverlong: z.boolean().default(false),
      /** Weight of per-step / per-tool-call rewards against the outcome reward. */
      processRewardWeight: z.number().nonnegative().default(0),
      kl: z
        .strictObject({
          coef: z.number().nonnegative().default(0),
          form: z.enum(["k1", "k2", "k3"]).default("k3"),
          /** Subtract the KL from the reward instead of adding it to the loss. */
          inReward: z.boolean().default(false),
        })
        .prefault({}),
    })
    .prefault({}),
  loss: z
    .strictObject({
      type: z.enum(["importance_sampling", "ppo", "cross_entropy"]).default("ppo"),
      clipLow: z.number().nonnegative().default(0.2),
      clipHigh: z.number().nonnegative().default(0.28),
      dualClip: z.number().nonnegative().default(3),
      aggregation: z.enum(["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "sum"]).default("token-mean"),
      normalizer: z.number().positive().optional(),
    })
    .prefault({}),
  optim: z
    .strictObject({
      lr: z.number().positive().default(1e-3),
      schedule: z.enum(["constant", "warmup", "cosine"]).default("constant"),
      warmupSteps: nonNegInt.default(0),
      minLrRatio: fraction.default(0.1),
      beta1: fraction.default(0.9),
      beta2: fraction.default(0.99),
      weightDecay: z.number().nonnegative().default(0),
      gradClipNorm: z.number().nonnegative().default(1),
    })
    .prefault({}),
  critic: z
    .strictObject({
      lr: z.number().positive().default(1e-3),
      valueClip: z.number().nonnegative().default(0.2),
    })
    .prefault({}),
  train: z
    .strictObject({
      iterations: positiveInt.default(20),
      /** Prompts per iteration (each sampled `rollout.n` times). */
      batchSize: positiveInt.default(8),
      ppoEpochs: positiveInt.default(1),
      miniBatches: positiveInt.default(1),
      seed: nonNegInt.default(0),
      valEvery: nonNegInt.default(5),
      valSize: nonNegInt.default(16),
      valGreedy: z.boolean().default(true),
      checkpointEvery: nonNegInt.default(10),
      keepCheckpoints: positiveInt.default(2),
      samplesPerIteration: nonNegInt.default(4),
    })
    .prefault({}),
});

export type TrainConfig = z.infer<typeof configSchema>;
