/**
 * The training configuration: one zod schema, parsed once at the edge (a YAML
 * recipe plus `key.path=value` overrides). Every field has a working default;
 * unknown keys are errors.
 */
import { z } from "zod";
import { PRESET_NAMES, type PresetName } from "./presets.js";
import { COMPACTION_DEFAULTS } from "../agent/compaction-options.js";
import { BACKEND_CHOICES, BF16_PRODUCT_CHOICES, BLAS_CHOICES } from "../engine/local/addon.js";
import { judgeConfigSchema } from "../rewards/judge-config.js";
import { distillConfigSchema } from "./distill-config.js";
import { NEWEST_SDK, OLDEST_SDK, sdkVersionProblem } from "../engine/remote/tinker-versions.js";

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const fraction = z.number().min(0).max(1);

export const ESTIMATORS = [
  "grpo",
  "dr-grpo",
  "rloo",
  "reinforce",
  "reinforce++",
  "reinforce++-baseline",
  "gae",
  "gae-step",
  "gigpo",
] as const;

const toolNames = z.array(z.string().min(1)).optional();

/** One entry of task.mcp: a server started as a process (stdio) or reached at a URL (streamable HTTP). */
const mcpServerSchema = z
  .strictObject({
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
    url: z.string().min(1).optional(),
    headers: z.record(z.string(), z.string()).optional(),
    include: toolNames,
    exclude: toolNames,
    maxMessageBytes: positiveInt.optional(),
  })
  .superRefine((s, ctx) => {
    const say = (message: string) => ctx.addIssue({ code: "custom", message });
    if ((s.command === undefined) === (s.url === undefined))
      return say("give command (a server over stdio) or url (streamable HTTP): exactly one");
    const wrong =
      s.url !== undefined
        ? (["args", "env", "cwd"] as const).filter((k) => s[k] !== undefined)
        : (["headers"] as const).filter((k) => s[k] !== undefined);
    if (wrong.length) say(`${wrong.join(", ")}: not for a server at ${s.url !== undefined ? "a url" : "a command"}`);
  });

/** An inclusive range [lo, hi] of learner/sampler probability ratios (src/rl/off-policy-mask.ts). */
const twoNumbers = { error: "give [lo, hi]: two numbers" };
const ratioRange = z.tuple([z.number(twoNumbers), z.number(twoNumbers)], twoNumbers).superRefine(([lo, hi], ctx) => {
  if (!(lo >= 0)) ctx.addIssue({ code: "custom", message: `give [lo, hi] with lo ≥ 0 (got lo ${lo})` });
  else if (!(lo < hi)) ctx.addIssue({ code: "custom", message: `give [lo, hi] with lo < hi (got [${lo}, ${hi}])` });
});

/** rollout.compaction (src/agent/compaction-options.ts checks the same in code). */
const compactionSchema = z.strictObject({
  atTokens: positiveInt.describe(
    "Trained compaction (docs/compaction.md), on when set: once the context the next turn would sample from is longer than this many tokens, the policy is asked for a summary (trained like any action) and the episode goes on from the system prompt + the task + the summary + the last keepLast turns, as a new datum of the same episode. Below rollout.maxTotalTokens, with room for the request and a summary.",
  ),
  keepLast: nonNegInt
    .default(COMPACTION_DEFAULTS.keepLast)
    .describe("Turns (an action and its tool responses) kept verbatim after the summary."),
  prompt: z
    .string()
    .refine((p) => p.trim() !== "", "must not be empty")
    .default(COMPACTION_DEFAULTS.prompt)
    .describe("The user turn asking for the summary."),
});

export type McpServerEntry = z.infer<typeof mcpServerSchema>;

export const configSchema = z.strictObject({
  preset: z
    .enum(PRESET_NAMES as [PresetName, ...PresetName[]])
    .optional()
    .describe(
      "A named preset (src/train/presets.ts) whose settings the recipe gets unless it sets them: steppo (Agent-R1's StepPO: gae-step, the gspo loss with clips 3e-4/4e-4 and dual clip 10, seq-mean-token-mean, a k3 KL of 0.001).",
    ),
  model: z
    .strictObject({
      path: z.string().optional().describe("A Hugging Face model directory to start from."),
      preset: z
        .enum(["tiny", "small", "medium"])
        .optional()
        .describe("Or a fresh random model of a preset (written into the run directory)."),
      tokenizer: z
        .string()
        .optional()
        .describe("Tokenizer directory for a preset model; default: the shipped tokenizer."),
    })
    .prefault({}),
  engine: z
    .strictObject({
      kind: z
        .enum(["local", "tinker"])
        .default("local")
        .describe(
          "The engine: local (in this process: the C engine, or TF.js) or tinker (a Tinker-protocol server: engine.tinker). The settings below up to `blas` are the local engine's.",
        ),
      workers: nonNegInt
        .optional()
        .describe("Worker threads, one model replica each; 0 runs in the main thread. Default: 2 on 2+ cores."),
      prefixCacheMb: nonNegInt.default(256).describe("Prefix (KV) cache budget per replica, MiB; 0 disables."),
      microBatchMb: positiveInt
        .default(640)
        .describe("Activation memory per training micro-batch, MiB (the wasm heap is 4 GiB)."),
      sharedPrefix: z
        .boolean()
        .default(true)
        .describe(
          "C engine: datums of one forwardBackward, computeLogprobs or critic call that begin alike (a GRPO group's prompt) compute their common prefix once (docs/engine.md); false runs every datum in full. The TF.js engine never shares.",
        ),
      backend: z
        .enum(BACKEND_CHOICES)
        .optional()
        .describe(
          "The local engine: native (the decoder in C over native memory, one copy of the weights, bf16 kept as bf16), tfjs (TensorFlow.js on wasm, the portable engine and the reference) or auto (native where the addon loads, else tfjs on wasm). Default: env AGENT_R1_BACKEND, else auto.",
        ),
      maxContextTokens: positiveInt
        .optional()
        .describe(
          "Longest sequence (prompt + completion) the local engine serves, tokens: sampling stops with 'length' there, and the native memory plan reserves keys and values for this many tokens instead of the model's max_position_embeddings. Default: the model's.",
        ),
      memoryGb: z
        .number()
        .positive()
        .optional()
        .describe(
          "The native engine's memory budget, GiB: a model whose weights, training state, micro-batch and KV cache would need more is refused in one line before it loads or trains. Default: 75% of physical memory.",
        ),
      lora: z
        .strictObject({
          rank: positiveInt.default(32).describe("Adapter rank r."),
          alpha: z.number().positive().optional().describe("Scale numerator: B·A is scaled by alpha / r. Default: r."),
          dropout: z
            .number()
            .min(0)
            .lt(1, "must be below 1")
            .default(0)
            .describe(
              "Dropout on the adapters' input in training passes (PEFT's lora_dropout); sampling and scoring never drop.",
            ),
          trainAttn: z
            .boolean()
            .default(true)
            .describe("Adapt q_proj, k_proj, v_proj and o_proj (Tinker's train_attn)."),
          trainMlp: z.boolean().default(true).describe("Adapt gate_proj, up_proj and down_proj (Tinker's train_mlp)."),
          trainUnembed: z
            .boolean()
            .default(false)
            .describe("Adapt lm_head (Tinker's train_unembed); not for tied-embedding models."),
          rslora: z.boolean().default(false).describe("Rank-stabilized scale alpha / sqrt(r)."),
          seed: z.number().int().default(0).describe("Seed of the adapters' initialization."),
          adapter: z
            .string()
            .optional()
            .describe("Start from a PEFT adapter directory (adapter_config.json + adapter_model.safetensors)."),
        })
        .optional()
        .describe(
          "Train LoRA adapters (native engine) instead of the full weights: only the adapters get gradients and optimizer state; checkpoints hold the adapters in PEFT's format.",
        ),
      blas: z
        .enum(BLAS_CHOICES)
        .optional()
        .describe(
          "The addon's matrix products: own (the project's kernels), system (the BLAS the addon was built with, e.g. OpenBLAS; float32 weights only) or auto (own). Default: env AGENT_R1_BLAS, else auto.",
        ),
      bf16Products: z
        .enum(BF16_PRODUCT_CHOICES)
        .default("auto")
        .describe(
          "Native engine, bfloat16 weights (a sampling model, a LoRA base, the reference): tiles multiplies on the CPU's bfloat16 units (AMX tiles, else AVX512_BF16 dot products) with the activations rounded to bfloat16 and float32 sums (as PyTorch and vLLM do in bfloat16); exact widens the weights to float32 and keeps float32 activations; auto is tiles where the CPU (and, for AMX, the OS) has them. Full fine-tuning trains float32 weights either way.",
        ),
      tinker: z
        .strictObject({
          url: z
            .string()
            .optional()
            .describe("The server's base URL. Default: env TINKER_BASE_URL, else the hosted service."),
          baseModel: z.string().min(1).describe("The server's name of the base model to train."),
          lora: z
            .strictObject({
              rank: positiveInt.default(32),
              seed: z.number().int().optional(),
              trainAttn: z.boolean().default(true),
              trainMlp: z.boolean().default(true),
              trainUnembed: z.boolean().default(true),
            })
            .nullable()
            .prefault({})
            .describe(
              "LoRA adapters to train (Tinker's LoraConfig); null trains the full weights where the server can.",
            ),
          sdkVersion: z
            .string()
            .regex(/^\d+\.\d+\.\d+$/)
            .superRefine((v, ctx) => {
              const problem = sdkVersionProblem(v);
              if (problem) ctx.addIssue({ code: "custom", message: problem });
            })
            .default("0.25.0")
            .describe(
              `The Tinker SDK version to report and speak, ${OLDEST_SDK} to ${NEWEST_SDK}: 0.24.x JSON (SkyRL, miles); from 0.25.0 protobuf; from 0.27.0 per-sequence sample ids required; ${NEWEST_SDK} also polls sample completions per session and cancels abandoned samples where the server offers it (docs/scale-out.md).`,
            ),
          retries: nonNegInt
            .default(6)
            .describe(
              "Times a failed request or a lost connection is retried (backoff up to 10 s) before the run stops.",
            ),
          credentialCommand: z
            .string()
            .min(1)
            .optional()
            .describe(
              "A shell command that prints the credential to send as X-API-Key (run again when it expires or is refused). Default: env TINKER_API_KEY, else env TINKER_CREDENTIAL_CMD.",
            ),
          billingPauseS: nonNegInt
            .default(3600)
            .describe(
              "How long to pause, trying again every 5 s, while the server refuses work for billing (HTTP 402), before the run stops; 0 stops at once.",
            ),
        })
        .optional()
        .describe("The tinker engine (engine.kind: tinker). The tokenizer comes from model.tokenizer or model.path."),
      sampler: z
        .strictObject({
          kind: z
            .enum(["sglang", "vllm"])
            .describe("The inference server's API: SGLang's /generate, or vLLM's /v1/completions."),
          url: z.string().describe("The server's base URL."),
          model: z
            .string()
            .optional()
            .describe("The model name to request (vLLM, full weights); default the server's."),
          weightsDir: z
            .string()
            .optional()
            .describe(
              "Where the learner writes weights for the server to load after each step (a directory the server can read): LoRA adapters go to RUN/sampler-adapters by default, full weights to a temporary directory.",
            ),
          retries: nonNegInt
            .default(3)
            .describe("Times a failed LoRA adapter load is tried again (after 1, 2, 4, ... s) before the run stops."),
        })
        .optional()
        .describe(
          "Sample rollouts on an inference server while the local engine trains (pair with loss.tis): full weights on SGLang, LoRA adapters (engine.lora) on vLLM or SGLang.",
        ),
    })
    .prefault({}),
  task: z
    .strictObject({
      name: z.string().default("calc").describe("multihop or calc."),
      module: z
        .string()
        .optional()
        .describe(
          "Or a module of your own exporting `rows` or `data` and one of: `agent` (row, { baseURL, apiKey, model, signal }) => reward, the agent you already have, trained through the recording gateway; `tools` (ours, AI SDK, Agents SDK or JSON Schema tools) with an optional `reward` (row, answer) => number, `system` and `format`, played in the built-in ToolEnv; or `makeEnv` (row, { tools }) => Env. A relative path is taken from the recipe's directory.",
        ),
      mcp: z
        .array(mcpServerSchema)
        .default([])
        .describe(
          "MCP servers whose tools join the module's (started before the first rollout, closed when the run ends): { command, args, env, cwd } over stdio or { url, headers } over streamable HTTP, each with include / exclude (tool names) and maxMessageBytes. A relative cwd is taken from the recipe's directory, which is also the default; `${NAME}` in env and headers values is read from the environment when the server starts. Without task.module the rows come from data.train.",
        ),
      options: z
        .record(z.string(), z.unknown())
        .default({})
        .describe("Task-specific options, checked by the task itself."),
      worlds: positiveInt
        .default(1)
        .describe(
          "Train on the task generated in this many other worlds (a built-in generated task; seeds seed + 1000 + firstWorld + k, the train questions shared out), validating and testing on its own: nothing one world holds pays off (src/tasks/worlds.ts).",
        ),
      firstWorld: nonNegInt
        .default(0)
        .describe("With worlds: the first world's number, to keep off the worlds a warm start learned from."),
    })
    .prefault({}),
  data: z
    .strictObject({
      train: z
        .string()
        .optional()
        .describe(
          "Training rows from a file (.jsonl or .parquet, Agent-R1 rows) instead of the task's generated train split.",
        ),
      val: z.string().optional().describe("Validation rows from a file, likewise."),
      skipBadRows: z
        .boolean()
        .default(false)
        .describe(
          "Skip and count rows that fail the row schema instead of stopping at the first (`train --skip-bad-rows`).",
        ),
    })
    .prefault({}),
  rollout: z
    .strictObject({
      n: positiveInt.default(8).describe("Samples per prompt (the group size for GRPO / RLOO)."),
      maxTurns: positiveInt.default(4).describe("Assistant turns per episode at most."),
      maxTokensPerTurn: positiveInt.default(96).describe("New tokens per turn at most."),
      maxTotalTokens: positiveInt.default(1024).describe("Cap on the whole context."),
      temperature: z.number().nonnegative().default(1),
      topP: z.number().gt(0).max(1).default(1),
      agentSampling: z
        .enum(["recipe", "agent"])
        .default("recipe")
        .describe(
          "Agent tasks: whose temperature, top-p and per-turn token limit a completion uses, the recipe's (what an agent asks for instead is logged once) or the agent's requests'.",
        ),
      compaction: compactionSchema
        .optional()
        .describe(
          "Trained compaction (src/agent/compaction-flow.ts): once the context passes atTokens the policy is asked for a summary (its tokens are trained), and the episode goes on from the system prompt + the task + the summary + the last keepLast turns, as a new datum of the same episode. Unset: the context only grows.",
        ),
    })
    .superRefine((r, ctx) => {
      if (r.compaction && r.compaction.atTokens >= r.maxTotalTokens)
        ctx.addIssue({
          code: "custom",
          path: ["compaction", "atTokens"],
          message: `must be below rollout.maxTotalTokens (${r.maxTotalTokens}), got ${r.compaction.atTokens}`,
        });
    })
    .prefault({}),
  reward: z
    .strictObject({
      judge: judgeConfigSchema
        .optional()
        .describe(
          "A judge reward (docs/training.md, Judge rewards): an LLM at an OpenAI-compatible endpoint scores each group's trajectories against a rubric; reward = (1 − weight)·code + weight·judge.",
        ),
    })
    .prefault({}),
  algorithm: z
    .strictObject({
      estimator: z.enum(ESTIMATORS).default("grpo").describe("Advantage estimator; gae and gae-step train a critic."),
      gamma: fraction.default(1),
      lambda: fraction.default(1),
      gigpo: z
        .strictObject({
          stepWeight: z.number().nonnegative().default(1).describe("GiGPO: the weight w of the step advantage."),
          normalize: z
            .enum(["mean-std", "mean"])
            .default("mean-std")
            .describe(
              "GiGPO: normalize returns within a group (and within an anchor state) by mean and std, or by the mean only.",
            ),
        })
        .prefault({})
        .describe(
          "GiGPO (estimator gigpo): A = the trajectory's group-normalized score + stepWeight x the step's return normalized over the group's steps taken in the same rendered state (the env's info.state).",
        ),
      filterConstantGroups: z
        .boolean()
        .default(true)
        .describe("Drop groups whose rewards are all equal (they carry no signal)."),
      maskOverlong: z.boolean().default(false).describe("Give no gradient to trajectories cut off by a length limit."),
      processRewardWeight: z
        .number()
        .nonnegative()
        .default(0)
        .describe("Weight of per-step / per-tool-call rewards against the outcome reward."),
      kl: z
        .strictObject({
          coef: z
            .number()
            .nonnegative()
            .default(0)
            .describe("KL coefficient against the starting model; 0 loads no reference."),
          form: z.enum(["k1", "k2", "k3"]).default("k3"),
          inReward: z
            .boolean()
            .default(false)
            .describe("Subtract the KL from the reward instead of adding it to the loss."),
          target: z
            .number()
            .positive()
            .optional()
            .describe(
              "Adapt the coefficient toward this KL per token (verl's adaptive controller, starting at coef); unset keeps coef fixed.",
            ),
          horizon: z
            .number()
            .positive()
            .default(10_000)
            .describe("Episodes over which the adaptive coefficient may change by up to 20 %."),
        })
        .refine((k) => k.target === undefined || k.coef > 0, {
          message: "an adaptive KL (target) needs a starting coef > 0",
          path: ["coef"],
        })
        .prefault({}),
      distill: distillConfigSchema
        .optional()
        .describe(
          "On-policy distillation (docs/training.md, Distillation): a teacher scores the student's sampled tokens, and each action token's advantage gets −coef·(log π_student − log π_teacher). With it every group trains (filterConstantGroups drops none).",
        ),
    })
    .prefault({}),
  loss: z
    .strictObject({
      type: z
        .enum(["importance_sampling", "ppo", "cross_entropy", "cispo", "dro", "gspo"])
        .default("ppo")
        .describe(
          "Policy loss (formulas in src/rl/policy-loss.ts); gspo clips a datum's sequence-level ratio (use with aggregation seq-mean-token-mean).",
        ),
      clipLow: z
        .number()
        .nonnegative()
        .optional()
        .describe(
          "PPO/GSPO/CISPO ratio lower clip: 1 - clipLow. Default 0.2 (PPO), 3e-4 (GSPO), 1 (CISPO: no lower bound).",
        ),
      clipHigh: z
        .number()
        .nonnegative()
        .optional()
        .describe(
          "PPO/GSPO/CISPO ratio upper clip: 1 + clipHigh. Default 0.28 (PPO, DAPO's clip-higher), 4e-4 (GSPO), 3 (CISPO).",
        ),
      beta: z.number().nonnegative().default(0.05).describe("DRO: weight of the penalty ½·beta·(p - q)²."),
      tis: z
        .strictObject({ cap: z.number().positive().default(2).describe("Largest importance weight.") })
        .optional()
        .describe(
          "Truncated importance sampling: weight each action token by min(learner/sampler probability, cap), scoring the rollouts with the learner first (src/rl/tis.ts).",
        ),
      offPolicy: z
        .strictObject({
          seqMask: ratioRange
            .optional()
            .describe(
              "[lo, hi] (0 ≤ lo < hi, ends kept): weight 0 for a whole sequence whose geometric-mean learner/sampler ratio is outside it (verl's geometric rejection).",
            ),
          tokenMask: ratioRange
            .optional()
            .describe(
              "[lo, hi] (0 ≤ lo < hi, ends kept): weight 0 for an action token whose learner/sampler ratio is outside it (IcePop's mask).",
            ),
        })
        .refine((m) => m.seqMask !== undefined || m.tokenMask !== undefined, {
          message: "give seqMask, tokenMask or both",
        })
        .optional()
        .describe(
          "Off-policy masks, scoring the rollouts with the learner first (src/rl/off-policy-mask.ts); ends inclusive.",
        ),
      dualClip: z.number().nonnegative().default(3).describe("Dual-clip constant for negative advantages; 0 disables."),
      aggregation: z
        .enum(["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "sum"])
        .default("token-mean"),
      normalizer: z
        .number()
        .positive()
        .optional()
        .describe("Fixed normalizer for seq-mean-token-sum-norm; default rollout.maxTotalTokens."),
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
      gradClipNorm: z.number().nonnegative().default(1).describe("Global gradient-norm clip; 0 disables."),
    })
    .prefault({}),
  critic: z
    .strictObject({
      lr: z.number().positive().default(1e-3),
      valueClip: z
        .number()
        .nonnegative()
        .default(0.2)
        .describe("Clip of the value loss around the old values; 0 disables."),
    })
    .prefault({}),
  train: z
    .strictObject({
      iterations: positiveInt.default(20),
      batchSize: positiveInt.default(8).describe("Prompts per iteration (each sampled `rollout.n` times)."),
      ppoEpochs: positiveInt
        .default(1)
        .describe("Passes over each iteration's batch (more than 1 reuses samples off-policy)."),
      miniBatches: positiveInt
        .default(1)
        .describe("Optimizer steps per pass; the batch splits into this many mini-batches of whole episodes."),
      seed: nonNegInt.default(0),
      valEvery: nonNegInt.default(5).describe("Validate every N iterations (and at the end); 0 never."),
      valSize: nonNegInt.default(16).describe("Validation rows (the first N of the val split)."),
      valGreedy: z.boolean().default(true).describe("Validate greedily; false samples at rollout.temperature."),
      checkpointEvery: nonNegInt.default(10).describe("Checkpoint every N iterations (and at the end)."),
      keepCheckpoints: positiveInt
        .default(2)
        .describe("The newest N checkpoints stay on disk; older ones are removed."),
      samplesPerIteration: nonNegInt
        .default(4)
        .describe("Episodes per iteration written, decoded, to samples/iter-N.jsonl (the dashboard's samples)."),
      async: z
        .strictObject({
          maxStaleness: positiveInt.describe(
            "k: a group trains only if every one of its samples came from weights at most k optimizer steps older than the learner's when the batch is consumed.",
          ),
          onStale: z
            .enum(["drop", "wait"])
            .default("wait")
            .describe(
              "wait: the producer runs at most floor(k / steps per iteration) batches ahead, so no sample is ever stale; drop: it runs up to k batches ahead and stale groups are dropped (counted in stale_groups_dropped).",
            ),
        })
        .optional()
        .describe(
          "Asynchronous training (src/train/async/): the next batches are sampled while the current one trains, on the newest weights the sampler has; absent, rollout and update take turns (lockstep). docs/training.md, Asynchronous training.",
        ),
    })
    .prefault({}),
});

export type TrainConfig = z.infer<typeof configSchema>;
