/**
 * The settings of trained compaction (`CompactionFlow`, a recipe's `rollout.compaction`): when to
 * ask for a summary, how many recent turns survive it verbatim, and the request's words. Checked
 * once, when the flow is built; each error is one line naming the field.
 */
import { InputError } from "../util/errors.js";

export interface CompactionOptions {
  /** Ask for a summary once the context the next turn would sample from is longer than this (tokens); below maxTotalTokens. */
  atTokens: number;
  /** Turns (an action and the observation after it) kept verbatim after the summary. Default 2. */
  keepLast?: number;
  /** The user turn that asks for the summary. */
  prompt?: string;
}

export type ResolvedCompaction = Required<CompactionOptions>;

export const COMPACTION_DEFAULTS = {
  keepLast: 2,
  prompt: "Summarize what you have found so far and what is left to do.",
} as const;

const isCount = (x: unknown): x is number => typeof x === "number" && Number.isInteger(x) && x >= 0;

/** The options with their defaults, or an InputError naming the first bad field. */
export function resolveCompaction(o: CompactionOptions, maxTotalTokens: number): ResolvedCompaction {
  if (typeof o !== "object" || o === null || Array.isArray(o))
    throw new InputError(`compaction must be an object { atTokens, keepLast, prompt }, got ${JSON.stringify(o)}`);
  const known = ["atTokens", "keepLast", "prompt"];
  const unknown = Object.keys(o).find((k) => !known.includes(k));
  if (unknown !== undefined) throw new InputError(`compaction.${unknown}: unknown field; allowed: ${known.join(", ")}`);
  const given = Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  const r: Record<string, unknown> = { ...COMPACTION_DEFAULTS, ...given };
  if (!(isCount(r.atTokens) && r.atTokens > 0 && r.atTokens < maxTotalTokens))
    throw new InputError(
      `compaction.atTokens must be a positive integer below maxTotalTokens (${maxTotalTokens}), got ${JSON.stringify(r.atTokens)}`,
    );
  if (!isCount(r.keepLast))
    throw new InputError(`compaction.keepLast must be a non-negative integer, got ${JSON.stringify(r.keepLast)}`);
  if (typeof r.prompt !== "string" || r.prompt.trim() === "")
    throw new InputError(`compaction.prompt must be a non-empty string, got ${JSON.stringify(r.prompt)}`);
  return r as unknown as ResolvedCompaction;
}
