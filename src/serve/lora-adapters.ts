/**
 * The LoRA adapters `agent-r1 serve` holds, by name, loaded and unloaded while it runs (as vLLM and
 * SGLang do between RL steps; the routes are ./lora-routes.ts). Each is an engine of its own over the
 * served model's weights, shared, not copied (LocalEngine.openAdapter: the native engine), read
 * from a PEFT adapter directory inside --weights-from. A request names one as its model, and is
 * then sampled on the base with that adapter. Unloading one lets its running requests finish.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ADAPTER_CONFIG_FILE } from "../model/peft.js";
import type { ServedEngine } from "./context.js";
import { ApiError } from "./errors.js";
import { underRoot } from "./weights-root.js";

/** A loaded adapter as the routes use it. */
export interface ServedAdapter extends ServedEngine {
  /** The directory it was read from. */
  readonly source: string;
  dispose(): void;
}

/** What an engine needs to serve adapters (LocalEngine on the native backend). */
export interface AdapterHost {
  openAdapter(dir: string): Promise<ServedAdapter>;
}

const forbidden = (message: string) => new ApiError(403, message, { code: "forbidden" });

export class LoraAdapters {
  private readonly loaded = new Map<string, ServedAdapter>();
  /** Names being loaded: a second load of one waits for nothing and is refused. */
  private readonly loading = new Set<string>();

  constructor(
    private readonly engine: ServedEngine & Partial<AdapterHost>,
    /** serve's --weights-from; unset refuses every load. */
    private readonly root: string | undefined,
    /** The served model's id, which no adapter may take. */
    private readonly baseId: string,
    private readonly log: (line: string) => void,
  ) {}

  get(name: string): ServedAdapter | undefined {
    return this.loaded.get(name);
  }

  /** Loaded adapters, in the order they were loaded. */
  list(): [string, ServedAdapter][] {
    return [...this.loaded];
  }

  /** Reads the adapter in `path` (inside the root) as `name`; `replace` lets it take the place of a loaded one. */
  async load(name: string, path: string, replace = false): Promise<void> {
    const dir = this.adapterDir(path);
    if (name === this.baseId) throw new ApiError(400, `'${name}' is the base model's name; name the adapter otherwise`);
    if (this.loading.has(name) || (this.loaded.has(name) && !replace))
      throw new ApiError(400, `The LoRA adapter '${name}' has already been loaded.`, { code: "already_loaded" });
    if (typeof this.engine.openAdapter !== "function")
      throw new ApiError(501, "this server's engine serves no LoRA adapters", { code: "not_implemented" });
    this.loading.add(name);
    try {
      const adapter = await this.engine.openAdapter(dir);
      this.loaded.get(name)?.dispose();
      this.loaded.set(name, adapter);
    } finally {
      this.loading.delete(name);
    }
    this.log(`serve: loaded LoRA adapter '${name}' from ${dir}`);
  }

  unload(name: string): void {
    const adapter = this.loaded.get(name);
    if (!adapter)
      throw new ApiError(404, `The LoRA adapter '${name}' cannot be found.`, { code: "not_found", param: "lora_name" });
    this.loaded.delete(name);
    adapter.dispose();
    this.log(`serve: unloaded LoRA adapter '${name}'`);
  }

  /** Every adapter dropped (the server is closing). */
  clear(): void {
    for (const a of this.loaded.values()) a.dispose();
    this.loaded.clear();
  }

  /** The real path of a PEFT adapter directory inside the root, or the ApiError saying why not. */
  private adapterDir(path: string): string {
    if (this.root === undefined)
      throw forbidden("LoRA loading is off: start serve with --weights-from DIR to allow loading adapters from DIR");
    const where = underRoot(this.root, path);
    if ("problem" in where && where.problem === "outside")
      throw forbidden(`lora_path must be a directory inside ${this.root} (serve's --weights-from)`);
    if (!("real" in where) || !existsSync(join(where.real, ADAPTER_CONFIG_FILE)))
      throw new ApiError(404, `No adapter found at ${path} (no ${ADAPTER_CONFIG_FILE} there)`, {
        code: "not_found",
        param: "lora_path",
      });
    return where.real;
  }
}
