/** Limits and sampling settings of the agent loop, checked once when a flow is built. */
import { InputError } from "../util/errors.js";

export interface AgentLoopOptions {
  /** Assistant turns at most. Default 8. */
  maxTurns?: number;
  /** Cap on the whole context (prompt + actions + observations). Default 4096. */
  maxTotalTokens?: number;
  /** New tokens at most per turn. Default 512. */
  maxTokensPerTurn?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  /** Stop strings or token ids. Default: the end-of-turn token. A stop is kept in the action. */
  stop?: (string | number)[];
  /** Re-render each finished trajectory through the chat template and report differences. Default true. */
  driftCheck?: boolean;
}

export type ResolvedLoopOptions = Required<
  Pick<AgentLoopOptions, "maxTurns" | "maxTotalTokens" | "maxTokensPerTurn" | "driftCheck">
> &
  Pick<AgentLoopOptions, "temperature" | "topP" | "topK" | "stop">;

export const LOOP_DEFAULTS = { maxTurns: 8, maxTotalTokens: 4096, maxTokensPerTurn: 512, driftCheck: true } as const;

export function resolveLoopOptions(o: AgentLoopOptions): ResolvedLoopOptions {
  const r = {
    ...o,
    ...Object.fromEntries(Object.entries(LOOP_DEFAULTS).map(([k, v]) => [k, o[k as keyof typeof LOOP_DEFAULTS] ?? v])),
  } as ResolvedLoopOptions;
  for (const key of ["maxTurns", "maxTotalTokens", "maxTokensPerTurn"] as const) {
    if (!(Number.isInteger(r[key]) && r[key] > 0))
      throw new InputError(`agent loop: ${key} must be a positive integer, got ${r[key]}`);
  }
  return r;
}
