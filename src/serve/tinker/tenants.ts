/**
 * The engines behind `serve --tinker`'s models and sampling sessions, with one copy of each base
 * model however many train over it (as Tinker holds a base once and each client's LoRA beside it):
 *  - a LoRA model is a set of adapters over the shared base (LocalEngine.trainAdapters): its own
 *    adapters, gradients, optimizer state and sampling; a forward_backward or optim_step touches
 *    only its adapters, and the base never changes;
 *  - a full-weight model (no lora_config, or rank 0) is an engine of its own, its weights a copy;
 *  - a sampling session on a base model samples the shared base; on a saved LoRA checkpoint of a
 *    base served here, its adapters over that base; on anything else, an engine loaded from disk.
 * The shared base is loaded with the first thing that needs it and let go with the last.
 * Everything is admitted by the memory plan (./memory-ledger.ts) before it loads.
 *
 * Passes of different models need no lock of their own: each runs on the server's thread from
 * start to end (the native engine), so passes over a shared base take turns; each engine orders
 * its own sampling against its own training.
 */
import { resolve } from "node:path";
import type { LocalEngine, LocalEngineOptions } from "../../engine/local/local-engine.js";
import type { AdapterEngine } from "../../engine/local/adapter-engine.js";
import type { Engine, SampleResult, SamplingParams } from "../../engine/types.js";
import { resolveBackend } from "../../engine/local/addon.js";
import { isLoraDir, loraBaseDir } from "../../engine/local/native/lora-checkpoint.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { readModelConfig } from "../../model/model-dir.js";
import { readPeftSpec } from "../../model/peft.js";
import { AgentR1Error } from "../../util/errors.js";
import { describeTraining, type Training } from "./lora-request.js";
import { baseCharge, MemoryLedger, modelCharge, samplerCharge } from "./memory-ledger.js";

/** A training model's engine. */
export interface TrainingEngine extends Engine {
  dispose(): Promise<void>;
}

/** A sampling session's engine. */
export interface SamplingEngine {
  sample(prompt: number[], params?: SamplingParams): Promise<SampleResult>;
  computeLogprobs(sequences: number[][]): Promise<(number | null)[][]>;
}

/** An engine held for a model or sampler, and how to let it go (disposed, its memory and base released). */
export interface Lease<E> {
  engine: Promise<E>;
  release(): Promise<void>;
}

interface SharedBase {
  engine: Promise<LocalEngine>;
  users: number;
}

/** A 400 for what reading a model directory refused. */
function asTinker<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (e instanceof AgentR1Error && !(e instanceof TinkerError)) throw new TinkerError(`${what}: ${e.message}`);
    throw e;
  }
}

export class Tenants {
  private readonly ledger: MemoryLedger;
  private readonly bases = new Map<string, SharedBase>();

  constructor(
    private readonly baseModels: Map<string, string>,
    private readonly engineOptions: LocalEngineOptions = {},
  ) {
    this.ledger = new MemoryLedger(engineOptions);
  }

  /** Base models loaded now, and how many models and samplers use each (tests, stats). */
  sharedBases(): Record<string, number> {
    return Object.fromEntries([...this.bases].map(([name, b]) => [name, b.users]));
  }

  /**
   * The engine of training model `id` over base model `base`, once the memory plan admits it (a
   * 429 naming the model and the budget otherwise, before anything loads).
   */
  trainer(id: string, base: string, training: Training): Lease<TrainingEngine> {
    const dir = this.baseModels.get(base)!;
    const config = asTinker(`base model '${base}'`, () => readModelConfig(dir));
    const asked = `create_model: a model of '${base}' (${describeTraining(training, false)})`;
    if (training.kind === "full") {
      this.ledger.admit(asked, [modelCharge(id, config, undefined, this.engineOptions)]);
      return this.lease(this.load(dir), `model:${id}`);
    }
    this.requireNative();
    this.ledger.admit(asked, [
      baseCharge(base, config, this.engineOptions),
      modelCharge(id, config, training.spec, this.engineOptions),
    ]);
    const engine = this.acquire(base).then((b) => b.trainAdapters({ spec: training.spec, seed: training.seed }));
    return this.lease(engine, `model:${id}`, base);
  }

  /** The engine a sampling session on directory `dir` samples (a base model's, or a checkpoint's). */
  sampler(dir: string, where: string): Lease<SamplingEngine> {
    const base = this.nameOf(dir);
    if (base !== undefined) {
      const config = asTinker(where, () => readModelConfig(dir));
      this.ledger.admit(`${where}: the base '${base}'`, [baseCharge(base, config, this.engineOptions)]);
      return this.lease(this.acquire(base), undefined, base, false);
    }
    const config = asTinker(where, () => readModelConfig(dir));
    const over = this.baseOfAdapters(dir);
    if (over !== undefined && this.native()) {
      const spec = asTinker(where, () => readPeftSpec(dir, config));
      this.ledger.admit(`${where}`, [
        baseCharge(over, config, this.engineOptions),
        samplerCharge(dir, config, spec, this.engineOptions),
      ]);
      const engine: Promise<AdapterEngine> = this.acquire(over).then((b) => b.openAdapter(dir));
      return this.lease(engine, `sampler:${dir}`, over);
    }
    this.ledger.admit(`${where}`, [samplerCharge(dir, config, undefined, this.engineOptions)]);
    return this.lease(this.load(dir), `sampler:${dir}`);
  }

  /** A 400 when `dir` is not a checkpoint this model can load (adapters into full weights, or the reverse). */
  checkLoadable(training: Training, dir: string, path: string, model: string): void {
    const lora = isLoraDir(dir);
    if (training.kind === "full" && lora)
      throw new TinkerError(`path '${path}' holds LoRA adapters; model ${model} trains full weights`);
    if (training.kind === "lora" && !lora)
      throw new TinkerError(`path '${path}' holds full weights; model ${model} trains LoRA adapters`);
  }

  /** The served base model whose directory `dir` is. */
  private nameOf(dir: string): string | undefined {
    for (const [name, d] of this.baseModels) if (resolve(d) === resolve(dir)) return name;
    return undefined;
  }

  /** The served base model a LoRA checkpoint's adapters were trained over, if it is one. */
  private baseOfAdapters(dir: string): string | undefined {
    if (!isLoraDir(dir)) return undefined;
    try {
      return this.nameOf(loraBaseDir(dir));
    } catch {
      return undefined;
    }
  }

  private native(): boolean {
    try {
      return resolveBackend(this.engineOptions.backend).backend === "native";
    } catch {
      return false;
    }
  }

  /** LoRA models train over a shared base on the native engine only. */
  private requireNative(): void {
    const { backend, fallback } = asTinker("lora_config", () => resolveBackend(this.engineOptions.backend));
    if (backend !== "native")
      throw new TinkerError(
        `lora_config: LoRA models need the native engine, and this server runs on tfjs${fallback ? ` (${fallback})` : ""}; ask for full weights (no lora_config, or rank 0), or serve with --backend native`,
      );
  }

  private async load(dir: string): Promise<LocalEngine> {
    const { LocalEngine } = await import("../../engine/local/local-engine.js");
    return LocalEngine.load(dir, this.engineOptions);
  }

  /** The shared engine of base model `name`, loaded with its first user. */
  private acquire(name: string): Promise<LocalEngine> {
    let b = this.bases.get(name);
    if (!b) {
      b = { engine: this.load(this.baseModels.get(name)!), users: 0 };
      this.bases.set(name, b);
    }
    b.users++;
    return b.engine;
  }

  private releaseBase(name: string): void {
    const b = this.bases.get(name);
    if (!b || --b.users > 0) return;
    this.bases.delete(name);
    this.ledger.release(`base:${name}`);
    void b.engine.then((e) => e.dispose()).catch(() => undefined);
  }

  /**
   * Holds `engine` under ledger key `key` (and a use of base `base`): released once, when asked
   * or when it fails to load; `own` engines are disposed then (a shared base is not).
   */
  private lease<E extends { dispose(): Promise<void> | void }>(
    engine: Promise<E>,
    key: string | undefined,
    base?: string,
    own = true,
  ): Lease<E> {
    let released: Promise<void> | undefined;
    const release = () =>
      (released ??= (async () => {
        if (own) await engine.then((e) => e.dispose()).catch(() => undefined);
        if (key) this.ledger.release(key);
        if (base !== undefined) this.releaseBase(base);
      })());
    engine.catch(() => release());
    return { engine, release };
  }
}
