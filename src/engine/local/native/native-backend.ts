/**
 * The C engine as a backend (../backend.ts): the decoder in native memory (./decoder.ts), full
 * weights or LoRA adapters in PEFT's format, checked against a memory plan (./memory-plan.ts)
 * before it loads and before full weights first train. The engine runs one replica per process:
 * the weights exist once, and the matrix products and element-wise kernels use every core through
 * the addon's threads.
 */
import { join, resolve } from "node:path";
import { availableParallelism } from "node:os";
import { openModelDirRaw } from "../../../model/model-dir.js";
import type { ModelConfig } from "../../../model/config.js";
import { checkMemoryPlan, memoryBudget, planMemory, type MemoryNeeds } from "./memory-plan.js";
import type { Tokenizer } from "../../../model/tokenizer.js";
import type { ReplicaOptions, Role } from "../replica-api.js";
import type { Backend, LoraStart, Models, OpenedBackend } from "../backend.js";
import { hasOptimizerState, loadTrainableState, saveTrainable } from "../trainable-io.js";
import {
  isLoraDir,
  loraBaseDir,
  readLoraDir,
  readValueHead,
  saveLoraAdapter,
  saveLoraTrainable,
  VALUE_HEAD_FILE,
} from "./lora-checkpoint.js";
import {
  ADAPTER_WEIGHTS_FILE,
  describeTargets,
  initAdapters,
  loraModules,
  readPeftSpec,
  type LoraAdapters,
  type LoraSpec,
} from "../../../model/peft.js";
import { InputError } from "../../../util/errors.js";
import { applyBf16Products, requireAddon, resolveBlas } from "../addon.js";
import { settings } from "../../../util/settings.js";
import type { ResolvedLoss } from "../../../rl/policy-loss.js";
import type { Datum, ValueDatum } from "../../types.js";
import type { MicroBatchPlanner } from "../../micro-batches.js";
import { NativeDecoder } from "./decoder.js";
import { NativeTrainable } from "./native-trainable.js";
import { NativeDecodeCompute, type NativeKv } from "./native-decode.js";
import {
  nativeCriticPass,
  nativeCriticValues,
  nativeLogprobs,
  nativePolicyPass,
  tokenPlanner,
} from "./native-train.js";

/** Bytes of activations a training micro-batch may hold by default. */
export const DEFAULT_NATIVE_ACTIVATION_BUDGET = 2 ** 30;

/** Bytes per token of a training pass: what the forward keeps, and the backward's scratch. */
export function nativeBytesPerToken(model: NativeDecoder): number {
  const c = model.config,
    qd = c.numHeads * c.headDim,
    kvd = c.numKvHeads * c.headDim;
  const scratch = 4 * (2 * c.hiddenSize + 2 * qd + 2 * kvd + 2 * c.intermediateSize);
  return model.passBytes(1024, 1, true) / 1024 + scratch;
}

/** Threads for the native engine: every core unless AGENT_R1_BLAS_THREADS says otherwise. */
function engineThreads(opts: ReplicaOptions): number {
  return opts.blasThreads ?? settings().blasThreads ?? availableParallelism();
}

/**
 * The model of a directory: full weights, or (a LoRA directory) the base it names plus its
 * adapters; with `opts.lora` and full weights, new adapters on them (or a PEFT adapter's).
 */
function openModel(
  dir: string,
  head: "lm" | "value",
  opts: ReplicaOptions,
): { model: NativeDecoder; baseDir: string; tokenizer: Tokenizer } {
  const lora = isLoraDir(dir);
  const baseDir = lora ? loraBaseDir(dir) : dir;
  const opened = openModelDirRaw(baseDir);
  const spec = lora ? readPeftSpec(dir, opened.config) : opts.lora?.spec;
  // What loading takes: weights as stored, and the adapters' training state (full training is
  // checked when it starts, see NativeBackend.ensureTrainable).
  checkMemoryPlan(
    planMemory(memoryNeeds(opened.config, spec ? "lora" : "none", opts, spec)),
    memoryBudget(opts.memoryGb),
    { model: baseDir, doing: spec ? "training LoRA adapters" : "loading", hint: LOAD_HINT },
  );
  const m = opened.load();
  let adapters: { spec: LoraSpec; adapters: LoraAdapters } | undefined;
  if (lora) {
    adapters = readLoraDir(dir, m.config);
    if (opts.lora) checkSameSpec(opts.lora.spec, adapters.spec, dir);
  } else if (opts.lora) {
    if (opts.lora.adapter) {
      adapters = readLoraDir(opts.lora.adapter, m.config);
      checkSameSpec(opts.lora.spec, adapters.spec, opts.lora.adapter);
    } else adapters = { spec: opts.lora.spec, adapters: initAdapters(m.config, opts.lora.spec, opts.lora.seed ?? 0) };
  }
  const model = NativeDecoder.fromWeights(m.config, m.weights, join(baseDir, "model.safetensors"), {
    head,
    lora: adapters,
    consume: true,
  });
  m.weights.clear(); // the decoder holds what it needs; drop the loader's arrays it did not keep
  return { model, baseDir, tokenizer: m.tokenizer };
}

const LOAD_HINT =
  "use a smaller model, a smaller engine.prefixCacheMb or engine.microBatchMb, or raise engine.memoryGb";
const TRAIN_HINT =
  "train LoRA adapters instead (engine.lora), use a smaller engine.microBatchMb, or raise engine.memoryGb";

/** The memory plan of `model` on this engine, training what `train` says (default: what it trains now). */
export function planFor(model: NativeDecoder, opts: ReplicaOptions, train?: "full", critic?: MemoryNeeds["critic"]) {
  const mode = train ?? (model.mode === "full" && !model.trainingReady ? "none" : model.mode);
  return planMemory(memoryNeeds(model.config, mode, opts, model.lora?.spec, critic));
}

/** The critic's LoRA spec in a LoRA run: the policy's, without lm_head (a value model has no LM head). */
export const criticSpec = (policy: LoraSpec): LoraSpec => ({
  ...policy,
  targets: policy.targets.filter((t) => t !== "lm_head"),
});

const loraFloats = (config: ModelConfig, spec: LoraSpec | undefined) =>
  spec ? loraModules(config, spec.targets).reduce((n, m) => n + spec.rank * (m.in + m.out), 0) : 0;

/** Bytes per element of the weight matrices as config.json says they are stored (float32 when it does not say). */
function matrixBytes(config: ModelConfig): number {
  const dtype = config.raw.torch_dtype ?? config.raw.dtype;
  return dtype === "bfloat16" || dtype === "float16" ? 2 : 4;
}

/** The memory-plan inputs of a model on this engine. */
export function memoryNeeds(
  config: ModelConfig,
  train: MemoryNeeds["train"],
  opts: ReplicaOptions,
  spec?: LoraSpec,
  critic?: MemoryNeeds["critic"],
): MemoryNeeds {
  const kvPerToken = 4 * config.numLayers * 2 * config.numKvHeads * config.headDim;
  const context = Math.min(config.maxPositionEmbeddings, opts.maxContextTokens ?? Infinity);
  return {
    config,
    matrixBytes: matrixBytes(config),
    train,
    loraFloats: loraFloats(config, spec),
    activationBytes: opts.microBatchBytes ?? DEFAULT_NATIVE_ACTIVATION_BUDGET,
    prefixCacheBytes: opts.prefixCacheBytes ?? 256 * 2 ** 20,
    contextBytes: kvPerToken * context,
    critic,
    criticLoraFloats: critic === "lora" && spec ? loraFloats(config, criticSpec(spec)) : 0,
  };
}

/** The recipe's engine.lora must describe the adapters a directory holds. */
function checkSameSpec(want: LoraSpec, have: LoraSpec, dir: string): void {
  const show = (s: LoraSpec) =>
    `rank ${s.rank}, alpha ${s.alpha}, ${describeTargets(s.targets)}${s.rslora ? ", rsLoRA" : ""}`;
  const same =
    want.rank === have.rank &&
    want.alpha === have.alpha &&
    want.rslora === have.rslora &&
    want.targets.join() === have.targets.join();
  if (!same)
    throw new InputError(
      `${dir}: its LoRA adapters (${show(have)}) differ from engine.lora (${show(want)})`,
      "make engine.lora match the adapters, or start from the base model",
    );
}

/** Adapters whose directory names a base model directory here must name this one. */
function checkSameBase(dir: string, baseDir: string): void {
  let named: string;
  try {
    named = loraBaseDir(dir);
  } catch {
    return; // a base by name (a hub id) or a directory not on this machine: nothing to compare
  }
  if (resolve(named) !== resolve(baseDir))
    throw new InputError(
      `${dir}: its LoRA adapters were trained over ${named}, not this model's base ${baseDir}`,
      "load adapters of this base model",
    );
}

/**
 * A saved LoRA critic (adapters and value head, saveLoraTrainable) over the policy's base: it needs
 * a LoRA policy on the same base directory, whose weights it then shares.
 */
function openSharedCritic(dir: string, policy: NativeTrainable | undefined): NativeTrainable {
  const base = loraBaseDir(dir);
  if (!policy?.model.lora || policy.model.mode !== "lora" || resolve(policy.baseDir) !== resolve(base))
    throw new InputError(
      `${dir}: this critic holds LoRA adapters over ${base}, which it shares with a LoRA policy on the same base; the policy is ${policy?.model.lora ? `a LoRA policy on ${policy.baseDir}` : "not a LoRA policy"}`,
      "train the policy with engine.lora on that base model, or start the critic afresh",
    );
  const lora = readLoraDir(dir, policy.model.config);
  const model = NativeDecoder.valueSharingBase(policy.model, lora, join(dir, VALUE_HEAD_FILE), readValueHead(dir));
  return new NativeTrainable(model, policy.baseDir);
}

export class NativeBackend implements Backend<NativeDecoder, NativeTrainable, NativeKv> {
  readonly name = "native" as const;
  /** Shared prefixes in training and scoring passes (engine.sharedPrefix). */
  private readonly share: boolean;

  constructor(
    private readonly plan: MicroBatchPlanner,
    private readonly opts: ReplicaOptions,
  ) {
    this.share = opts.sharedPrefix ?? true;
  }

  open(dir: string, role: Role, models: Models<NativeTrainable>): NativeTrainable {
    const t =
      role === "critic" && isLoraDir(dir)
        ? openSharedCritic(dir, models.policy)
        : (({ model, baseDir }) => new NativeTrainable(model, baseDir))(
            openModel(dir, role === "policy" ? "lm" : "value", this.opts),
          );
    this.loadState(t, dir, role, models);
    return t;
  }

  /**
   * A directory's optimizer state, for the tensors it trained: new adapters on full weights start
   * fresh. Full weights with saved moments are about to train, so the training plan is checked first.
   */
  loadState(t: NativeTrainable, dir: string, role: Role, models: Models<NativeTrainable>): void {
    if (t.model.lora && !isLoraDir(dir)) return;
    if (hasOptimizerState(dir)) this.ensureTrainable(t, role, models);
    loadTrainableState(t, dir);
  }

  /** Sampling gets what the memory plan leaves of the budget for its rows' keys and values. */
  schedulerOptions(policy: NativeTrainable) {
    return {
      kvBudgetBytes: Math.max(0, memoryBudget(this.opts.memoryGb).bytes - planFor(policy.model, this.opts).total),
    };
  }

  decodeCompute(model: NativeDecoder) {
    return new NativeDecodeCompute(model);
  }

  logprobs(model: NativeDecoder, sequences: number[][], temperature: number) {
    return nativeLogprobs(model, sequences, temperature, this.plan, this.share);
  }

  policyPass(t: NativeTrainable, datums: Datum[], loss: ResolvedLoss, coef: number[][]) {
    return nativePolicyPass(t, datums, loss, this.plan, coef, this.share);
  }

  /**
   * The critic: in a LoRA run, its own adapters (PEFT's initialization, so it starts as the base)
   * and a zero value head over the policy's base weights, which it shares; otherwise a full copy of
   * the policy's weights under a value head, trained in full.
   */
  critic(policy: NativeTrainable): NativeTrainable {
    const p = policy.model;
    if (p.mode !== "lora" || !p.lora) {
      const model = NativeDecoder.fromWeights(p.config, p.toHostWeights(), "(policy weights)", { head: "value" });
      return new NativeTrainable(model, policy.baseDir);
    }
    checkMemoryPlan(planFor(p, this.opts, undefined, "lora"), memoryBudget(this.opts.memoryGb), {
      model: policy.baseDir,
      doing: "training LoRA adapters and a critic's adapters and value head",
      hint: TRAIN_HINT,
    });
    const spec = criticSpec(p.lora.spec);
    const adapters = initAdapters(p.config, spec, (this.opts.lora?.seed ?? 0) + 1);
    return new NativeTrainable(NativeDecoder.valueSharingBase(p, { spec, adapters }, "(new critic)"), policy.baseDir);
  }

  criticValues(model: NativeDecoder, sequences: number[][]) {
    return nativeCriticValues(model, sequences, this.plan, this.share);
  }

  criticPass(t: NativeTrainable, datums: ValueDatum[], clip: number, total: number) {
    return nativeCriticPass(t, datums, clip, total, this.plan, this.share);
  }

  /** A training pass readies full weights to train (an optimizer step needs nothing more). */
  beforeTraining(t: NativeTrainable, role: Role, models: Models<NativeTrainable>, lengths?: number[]): void {
    if (lengths) this.ensureTrainable(t, role, models);
  }

  /** Before the full weights first train (float32 copies, gradients, moments): the plan must fit. */
  private ensureTrainable(t: NativeTrainable, role: Role, models: Models<NativeTrainable>): void {
    if (t.model.trainingReady) return;
    const critic = role === "critic";
    // The policy as it will train, and a critic (trained in full) beside it when there is one.
    const policy = critic ? (models.policy ?? t) : t;
    const plan = planFor(
      policy.model,
      this.opts,
      critic ? undefined : "full",
      critic || models.critic ? "full" : undefined,
    );
    checkMemoryPlan(plan, memoryBudget(this.opts.memoryGb), {
      model: t.baseDir,
      doing: critic ? "training the critic beside the policy" : "training the full weights",
      hint: TRAIN_HINT,
    });
    t.model.prepareTraining();
  }

  save(t: NativeTrainable, dir: string, tokenizerFrom: string): void {
    if (t.model.lora) saveLoraTrainable(t, dir, t.baseDir, tokenizerFrom);
    else saveTrainable(t, dir, tokenizerFrom);
  }

  /** The policy's LoRA adapters alone, in PEFT's layout; refused when the policy trains full weights. */
  saveAdapter(t: NativeTrainable, dir: string): void {
    if (!t.model.lora)
      throw new InputError(
        "this policy trains full weights, so it has no LoRA adapters to write",
        "set engine.lora to train adapters",
      );
    saveLoraAdapter(t, dir);
  }

  /**
   * A sampling model of the policy's base weights (shared, not copied) with the PEFT adapter in
   * `dir`, checked against this model; the adapter's base_model_name_or_path is not read: it goes
   * on the model this engine holds, as an inference server applies it.
   */
  adapterModel(policy: NativeTrainable, dir: string): NativeDecoder {
    const lora = readLoraDir(dir, policy.model.config);
    return NativeDecoder.withAdapters(policy.model, lora, join(dir, ADAPTER_WEIGHTS_FILE));
  }

  /**
   * Adapters that train over the policy's base weights (shared, not copied): new ones drawn from
   * `start.seed`, or a directory's (a LoRA checkpoint or PEFT adapter of the same spec, over the
   * same base when it names one here) with its optimizer state and step.
   */
  adapterTrainable(policy: NativeTrainable, start: LoraStart): NativeTrainable {
    const config = policy.model.config;
    if (!start.adapter) {
      const lora = { spec: start.spec, adapters: initAdapters(config, start.spec, start.seed ?? 0) };
      return new NativeTrainable(
        NativeDecoder.withAdapters(policy.model, lora, "(new adapters)", true),
        policy.baseDir,
      );
    }
    const dir = start.adapter;
    if (!isLoraDir(dir))
      throw new InputError(`${dir} holds full weights, not LoRA adapters`, "load a checkpoint of a LoRA model");
    const lora = readLoraDir(dir, config);
    checkSameSpec(start.spec, lora.spec, dir);
    checkSameBase(dir, policy.baseDir);
    const model = NativeDecoder.withAdapters(policy.model, lora, join(dir, ADAPTER_WEIGHTS_FILE), true);
    const t = new NativeTrainable(model, policy.baseDir);
    loadTrainableState(t, dir);
    return t;
  }

  /** No tensors outside the caches: every pass frees its buffers before it returns. */
  liveTensors(cacheTensors: number): number {
    return cacheTensors;
  }

  dispose(): void {}
}

/** Sets the addon up for this engine (matrix products, bf16 products, threads) and opens the policy. */
export async function openBackend(
  dir: string,
  opts: ReplicaOptions,
): Promise<OpenedBackend<NativeDecoder, NativeTrainable, NativeKv>> {
  const addon = requireAddon();
  const threads = Math.max(1, Math.min(64, engineThreads(opts)));
  addon.setBlas(resolveBlas(addon, opts.blas));
  applyBf16Products(addon, opts.bf16Products);
  addon.setThreads(threads);
  addon.setFusedThreads(Math.min(16, threads));
  const { model, baseDir, tokenizer } = openModel(dir, "lm", opts);
  const budget = opts.microBatchBytes ?? DEFAULT_NATIVE_ACTIVATION_BUDGET;
  const maxTokens = Math.min(opts.microBatchTokens ?? Infinity, Math.floor(budget / nativeBytesPerToken(model)));
  const backend = new NativeBackend(tokenPlanner(Math.max(1, maxTokens)), opts);
  const policy = new NativeTrainable(model, baseDir);
  backend.loadState(policy, dir, "policy", {});
  return { backend, policy, tokenizer };
}
