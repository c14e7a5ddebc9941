/**
 * The `local` engine kind: policies, references and critics in this process (LocalEngine), and
 * preset models written by `initModel`. The edges (CLI commands) build it from a recipe's
 * `engine` section; the trainer sees only the EngineFactory interface.
 */
import type { EngineFactory, PolicyEngine } from "../factory.js";
import { initModel } from "../../model/init-model.js";
import { readModelConfig } from "../../model/model-dir.js";
import { readTrainerStep } from "./trainable-io.js";
import { InputError } from "../../util/errors.js";
import { LocalEngine, type LocalEngineOptions } from "./local-engine.js";
import type { BackendChoice, Bf16Products, BlasChoice } from "./addon.js";
import { targetsFromTinker } from "../../model/peft.js";

/** A recipe's `engine` section, as the local engine reads it. */
export interface LocalEngineSection {
  workers?: number;
  prefixCacheMb?: number;
  microBatchMb?: number;
  sharedPrefix?: boolean;
  backend?: BackendChoice;
  blas?: BlasChoice;
  bf16Products?: Bf16Products;
  memoryGb?: number;
  maxContextTokens?: number;
  lora?: {
    rank: number;
    alpha?: number;
    dropout: number;
    trainAttn: boolean;
    trainMlp: boolean;
    trainUnembed: boolean;
    rslora: boolean;
    seed: number;
    adapter?: string;
  };
}

/** LocalEngine options from a recipe's `engine` section. */
export function localEngineOptions(section: LocalEngineSection): LocalEngineOptions {
  return {
    workers: section.workers,
    prefixCacheBytes: section.prefixCacheMb === undefined ? undefined : section.prefixCacheMb * 2 ** 20,
    microBatchBytes: section.microBatchMb === undefined ? undefined : section.microBatchMb * 2 ** 20,
    sharedPrefix: section.sharedPrefix,
    backend: section.backend,
    blas: section.blas,
    bf16Products: section.bf16Products,
    memoryGb: section.memoryGb,
    maxContextTokens: section.maxContextTokens,
    lora: section.lora && loraOption(section.lora),
  };
}

/** engine.lora as the replica takes it: PEFT's spec from Tinker's switches. */
function loraOption(l: NonNullable<LocalEngineSection["lora"]>): NonNullable<LocalEngineOptions["lora"]> {
  const targets = targetsFromTinker(l);
  if (targets.length === 0)
    throw new InputError("engine.lora: trainAttn, trainMlp and trainUnembed are all false, so nothing would train");
  const spec = { rank: l.rank, alpha: l.alpha ?? l.rank, dropout: l.dropout, targets, rslora: l.rslora };
  return { spec, seed: l.seed, ...(l.adapter !== undefined ? { adapter: l.adapter } : {}) };
}

export function localEngines(options: LocalEngineOptions = {}): EngineFactory {
  return {
    kind: "local",
    policy: (dir) => LocalEngine.load(dir, options),
    // The reference is the base model: no adapters (its weights stay as stored, never trained).
    reference: (dir) => LocalEngine.load(dir, { ...options, lora: undefined }),
    async critic(policy: PolicyEngine) {
      if (!(policy instanceof LocalEngine))
        throw new InputError("the local critic runs beside a local policy engine (engine.kind: local)");
      return policy.createCritic();
    },
    checkSaved(dir) {
      try {
        readModelConfig(dir);
        readTrainerStep(dir);
        return undefined;
      } catch (e) {
        return e instanceof Error ? e.message : String(e);
      }
    },
    async initModel(o) {
      await initModel(o);
    },
  };
}
