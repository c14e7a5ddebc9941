/** The settings of a `serve --tinker` service, and how they are checked. */
import type { LocalEngineOptions } from "../../engine/local/local-engine.js";
import { InputError } from "../../util/errors.js";
import type { TinkerLimits } from "./limits.js";

export interface TinkerServiceOptions extends Partial<TinkerLimits> {
  /** Base models by name: the name clients use (base_model) -> a model directory. */
  baseModels: Map<string, string>;
  /** Checkpoints go under <stateDir>/<model_id>/{weights,sampler_weights}/<name>; no tinker:// path leaves it. */
  stateDir: string;
  engineOptions?: LocalEngineOptions;
  /** How long a seq_id may wait for the ones before it. Default 120 s. */
  seqWaitMs?: number;
  /** Compress protobuf request bodies with zstd (client config `proto_compress_fwdbwd`). */
  compress?: boolean;
  /** Engines held at once: training models plus models loaded for sampling. Default 8. */
  maxModels?: number;
  /** A session with no heartbeat or request for this long is closed and its models unloaded. Default 5 min. */
  sessionTtlMs?: number;
  /** What client/dynamic_config answers. Default: asked again every 300 s, cancelling on, 64 cancels at once. */
  dynamicConfig?: { refreshIntervalS?: number; cancelEnabled?: boolean; cancelBatch?: number };
  log?: (line: string) => void;
}

/** Sessions held at once; an idle one closes after sessionTtlMs. */
export const MAX_SESSIONS = 10_000;

export function positive(v: number, name: string): number {
  if (!Number.isSafeInteger(v) || v < 1)
    throw new InputError(`serve --tinker: ${name} must be a positive integer, got ${v}`);
  return v;
}
