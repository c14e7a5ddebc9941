/**
 * What every handler needs: the served model's id, its engine, its chat format, and the per-request
 * limits. A request that names a loaded LoRA adapter as its model gets the adapter's context
 * (`forModel`): its name and engine, the base's chat format and limits.
 */
import { randomUUID } from "node:crypto";
import type { LocalEngine } from "../engine/local/local-engine.js";
import { chatSetup, type ChatSetup } from "../agent/chat-setup.js";
import { ApiError } from "./errors.js";
import { DEFAULT_REQUEST_LIMITS, type RequestLimits } from "./request-limits.js";
import { shown } from "../util/shown.js";
import type { LoraAdapters } from "./lora-adapters.js";

/** The part of the engine the server uses. */
export type ServedEngine = Pick<LocalEngine, "sample" | "computeLogprobs" | "tokenizer" | "config">;

export class ServeContext {
  /** Unix seconds, reported as the model's `created`. */
  readonly created = Math.floor(Date.now() / 1000);
  private chatFormat?: ChatSetup;

  constructor(
    readonly modelId: string,
    readonly engine: ServedEngine,
    /** New tokens when a chat request gives no max_tokens; default the rest of the context window. */
    readonly defaultMaxTokens?: number,
    readonly limits: RequestLimits = DEFAULT_REQUEST_LIMITS,
    /** LoRA adapters loaded at run time, which requests may name as their model. */
    readonly adapters?: LoraAdapters,
    /** The base model's context, whose chat format an adapter's shares. */
    private readonly base?: ServeContext,
  ) {}

  /** The model's chat template and end-of-turn token (InputError, hence a 400, when the tokenizer has none). */
  chat(): ChatSetup {
    if (this.base) return this.base.chat();
    this.chatFormat ??= chatSetup(this.engine.tokenizer);
    return this.chatFormat;
  }

  /** A request may omit `model`; when it names one, it must be ours. */
  checkModel(model: string | undefined): void {
    this.forModel(model);
  }

  /** The context of the model a request names: this one (or none named), or a loaded LoRA adapter's; else a 404. */
  forModel(model: string | undefined, param = "model"): ServeContext {
    if (model === undefined || model === this.modelId) return this;
    const adapter = this.base ? undefined : this.adapters?.get(model);
    if (adapter) return new ServeContext(model, adapter, this.defaultMaxTokens, this.limits, undefined, this);
    throw new ApiError(404, `The model '${shown(model)}' does not exist; this server serves '${this.modelId}'.`, {
      code: "model_not_found",
      param,
    });
  }
}

/**
 * `prefix` and 24 random hex digits. From randomUUID, which draws from a pooled buffer: randomBytes
 * makes a synchronous call into the system's generator each time, a measurable cost per request
 * (docs/agent-runtime.md, the gateway's cost).
 */
export function newId(prefix: string): string {
  return `${prefix}${randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}
