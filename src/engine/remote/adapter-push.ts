/**
 * New weights for a sampler as LoRA adapters (a LoRA run; vLLM takes new weights over HTTP no other
 * way): after each optimizer step (and once at the start) the learner's adapters are written in
 * PEFT's layout to `dir/NAME` (a directory the server can read), the server loads them as NAME =
 * `<run>-step-<N>`, and rollouts sample by that name. The adapter they replace is unloaded, and its
 * directory removed, once no sample still running uses it.
 *
 * A load that fails is tried again `retries` times, after 1, 2, 4, ... s (before each retry the name
 * is unloaded, in case the failed try got through, or a former run left it loaded); then the run
 * stops with one line naming the server and the adapter. A failed unload is only reported (the
 * server keeps an adapter too many; its directory stays, since the server may read it again).
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { AgentR1Error } from "../../util/errors.js";
import { removeTempDir } from "../../util/temp-dirs.js";
import type { RolloutSampler } from "./sampler-client.js";
import { TinkerError } from "./tinker-error.js";
import type { WeightsPush } from "./split-engine.js";

export interface AdapterPushOptions {
  /** Writes the learner's adapters alone in PEFT's layout (adapter_config.json + adapter_model.safetensors). */
  save: (dir: string) => Promise<void>;
  sampler: RolloutSampler;
  /** Where the adapters are written: a directory the server can read. */
  dir: string;
  /** The adapters' name stem: `<run>-step-<N>`. */
  run: string;
  /** Times a failed load is tried again. */
  retries: number;
  /** The pause before the first retry, doubled for each next one. Default 1000 ms. */
  retryDelayMs?: number;
  /** Whether `dir` is a temporary directory of ours (src/util/temp-dirs.ts), removed whole by `dispose`. */
  ownsDir?: boolean;
  /** Progress lines: retries and failed unloads. */
  log?: (line: string) => void;
}

interface Loaded {
  dir: string;
  /** Samples running on it. */
  users: number;
  /** Replaced by a newer adapter: unloaded once `users` is 0. */
  retired: boolean;
}

/** A name for the server: letters, digits and `._-` only. */
export function adapterStem(run: string): string {
  return run.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "") || "agent-r1";
}

export class AdapterPush implements WeightsPush {
  private current?: string;
  private readonly loaded = new Map<string, Loaded>();
  private readonly named = new Set<string>();
  private readonly unloads = new Set<Promise<void>>();

  constructor(private readonly o: AdapterPushOptions) {
    mkdirSync(o.dir, { recursive: true });
  }

  /** The adapters the server holds for us now, oldest first (tests). */
  get live(): string[] {
    return [...this.loaded.keys()];
  }

  async publish(step: number): Promise<void> {
    const name = this.freshName(step);
    const dir = join(this.o.dir, name);
    await this.o.save(dir);
    await this.load(name, dir);
    this.loaded.set(name, { dir, users: 0, retired: false });
    const old = this.current;
    this.current = name;
    if (old !== undefined) this.retire(old);
  }

  async use<T>(sample: (adapter?: string) => Promise<T>): Promise<T> {
    const name = this.current;
    const a = name !== undefined ? this.loaded.get(name) : undefined;
    if (name === undefined || !a) throw new Error("internal: sampling before an adapter was loaded");
    a.users++;
    try {
      return await sample(name);
    } finally {
      a.users--;
      if (a.retired && a.users === 0) this.drop(name, a);
    }
  }

  /** Unloads what the server still holds of ours (once the samples on it are done) and removes the files. */
  async dispose(): Promise<void> {
    if (this.current !== undefined) this.retire(this.current);
    this.current = undefined;
    while (this.unloads.size) await Promise.all([...this.unloads]);
    if (this.o.ownsDir) removeTempDir(this.o.dir);
  }

  /** `<run>-step-<N>`, or with a suffix when this run has used that name already (a step loaded twice). */
  private freshName(step: number): string {
    const stem = `${adapterStem(this.o.run)}-step-${step}`;
    let name = stem;
    for (let k = 2; this.named.has(name); k++) name = `${stem}-${k}`;
    this.named.add(name);
    return name;
  }

  private retire(name: string): void {
    const a = this.loaded.get(name);
    if (!a) return;
    a.retired = true;
    if (a.users === 0) this.drop(name, a);
  }

  /** Unloads `name` and then removes its directory; a failure is reported, not thrown. */
  private drop(name: string, a: Loaded): void {
    this.loaded.delete(name);
    const done = this.o.sampler.unloadAdapter(name).then(
      () => rmSync(a.dir, { recursive: true, force: true }),
      (e: unknown) => this.o.log?.(`sampler: could not unload LoRA adapter '${name}': ${messageOf(e)}`),
    );
    this.unloads.add(done);
    void done.finally(() => this.unloads.delete(done));
  }

  /** Loads `name` from `dir`, tried again on failure; the last failure as one line. */
  private async load(name: string, dir: string): Promise<void> {
    const delay = this.o.retryDelayMs ?? 1000;
    for (let attempt = 0; ; attempt++) {
      try {
        if (attempt > 0) await this.o.sampler.unloadAdapter(name).catch(() => undefined);
        await this.o.sampler.loadAdapter(name, dir);
        return;
      } catch (e) {
        if (attempt >= this.o.retries) throw this.failure(e, attempt + 1);
        const wait = delay * 2 ** attempt;
        this.o.log?.(`sampler: ${messageOf(e)}; trying again in ${wait / 1000} s`);
        await sleep(wait);
      }
    }
  }

  private failure(e: unknown, tries: number): Error {
    const hint =
      e instanceof AgentR1Error && e.hint
        ? e.hint
        : `the server must be able to read ${this.o.dir} (engine.sampler.weightsDir) and take LoRA adapters of this rank (vLLM: --enable-lora --max-lora-rank, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; agent-r1 serve: --weights-from)`;
    return new TinkerError(`${messageOf(e)} (tried ${tries} time${tries === 1 ? "" : "s"})`, hint);
  }
}

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e)).replace(/\s+/g, " ");
