/** The --backend flag of the commands that load models, and the one line printed when auto falls back to tfjs. */
import { BACKEND_CHOICES, fallbackLine, resolveBackend, type BackendChoice } from "../../engine/local/addon.js";
import { usageError, type FlagSpec, type Parsed } from "../args.js";
import type { CommandIO } from "../command.js";

export const BACKEND_FLAG: FlagSpec = {
  backend: {
    type: "string",
    value: BACKEND_CHOICES.join("|"),
    description:
      "the engine: native (the C decoder), tfjs (TensorFlow.js on wasm, the portable engine), or auto (native where the addon loads, else tfjs)",
    fallback: "env AGENT_R1_BACKEND, else auto",
  },
};

let announced = false;

/**
 * Says once per process, on stderr, that `auto` fell back to tfjs because the addon did not
 * load. Commands call it after their model has loaded, so a command that fails to load one
 * still fails with a single line (`native` without the addon is that error).
 */
export function announceBackend(choice: BackendChoice | undefined, io: CommandIO): void {
  const { fallback } = resolveBackend(choice);
  if (fallback !== undefined && !announced) {
    announced = true;
    io.err(fallbackLine(fallback));
  }
}

/** The --backend flag's value, checked (undefined when absent: env AGENT_R1_BACKEND, else auto). */
export function parseBackendFlag(command: string, flags: Parsed["flags"]): BackendChoice | undefined {
  const raw = flags.backend;
  if (raw === undefined) return undefined;
  if (!(BACKEND_CHOICES as readonly unknown[]).includes(raw)) {
    throw usageError(command, `--backend: unknown backend '${raw}'; choose one of: ${BACKEND_CHOICES.join(", ")}`);
  }
  return raw as BackendChoice;
}
