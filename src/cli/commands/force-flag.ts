/** The --force flag every command that writes takes (the rule it relaxes: src/util/out-path.ts). */
import type { FlagSpec } from "../args.js";

export const FORCE_FLAG: FlagSpec = {
  force: { type: "boolean", default: false, description: "replace a non-empty --out directory and everything in it" },
};

/** FORCE_FLAG with the description a command needs (an output file, a run). */
export function forceFlag(description: string): FlagSpec {
  return { force: { ...FORCE_FLAG.force, description } };
}
