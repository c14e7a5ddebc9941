/**
 * Test-only fault injection for the trainer (see docs/reliability.md). Nothing
 * here runs unless a test asks for it: either `TrainOptions.faults`, or the
 * environment variable AGENT_R1_FAULT, read in this one place, for runs in a
 * child process. AGENT_R1_FAULT is a comma-separated list of
 *
 *   pause:PHASE:ITER   print "AGENT_R1_FAULT paused at PHASE ITER" on stderr and wait
 *                      forever (the test kills the process at that known point)
 *   fail:PHASE:ITER    throw a FaultInjected error there (for `checkpoint`, a simulated
 *                      ENOSPC "no space left on device")
 *   nan-loss:ITER      make the policy loss of iteration ITER non-finite (NaN)
 *
 * PHASE is where in iteration ITER:
 *   rollout     the rows are taken (the data cursor has moved in memory), nothing played yet;
 *   update      the policy has taken its optimizer steps (in memory), the critic not yet;
 *   checkpoint  the policy is written into the temporary checkpoint directory, the
 *               state and the manifest are not (nothing renamed into place yet).
 */
import { InputError } from "../util/errors.js";

export const FAULT_PHASES = ["rollout", "update", "checkpoint"] as const;
export type FaultPhase = (typeof FAULT_PHASES)[number];

export interface TrainFaults {
  /** Called when iteration `iteration` reaches `phase`; may throw, or never resolve. */
  at?(phase: FaultPhase, iteration: number): void | Promise<void>;
  /** True when the policy loss of this iteration should be made non-finite. */
  nanLoss?(iteration: number): boolean;
}

/** The error a `fail:` fault throws. */
export class FaultInjected extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
    this.name = "FaultInjected";
  }
}

export const PAUSE_MARKER = "AGENT_R1_FAULT paused at";

/** The faults an AGENT_R1_FAULT value asks for (undefined when empty). */
export function parseFaults(spec: string | undefined): TrainFaults | undefined {
  if (!spec || spec.trim() === "") return undefined;
  const pauses = new Set<string>(), fails = new Set<string>(), nans = new Set<number>();
  for (const item of spec.split(",").map((s) => s.trim()).filter(Boolean)) {
    const parts = item.split(":");
    const iter = Number(parts[parts.length - 1]);
    const bad = () => new InputError(`AGENT_R1_FAULT: cannot read '${item}'`, `use pause:PHASE:ITER, fail:PHASE:ITER or nan-loss:ITER with PHASE one of ${FAULT_PHASES.join(", ")}`);
    if (!Number.isInteger(iter) || iter < 1) throw bad();
    if (parts[0] === "nan-loss" && parts.length === 2) nans.add(iter);
    else if ((parts[0] === "pause" || parts[0] === "fail") && parts.length === 3 && (FAULT_PHASES as readonly string[]).includes(parts[1])) {
      (parts[0] === "pause" ? pauses : fails).add(`${parts[1]}:${iter}`);
    } else throw bad();
  }
  return {
    async at(phase, iteration) {
      const key = `${phase}:${iteration}`;
      if (fails.has(key)) {
        throw phase === "checkpoint"
          ? new FaultInjected("ENOSPC: no space left on device, write (injected by AGENT_R1_FAULT)", "ENOSPC")
          : new FaultInjected(`injected failure at ${phase} of iteration ${iteration} (AGENT_R1_FAULT)`);
      }
      if (pauses.has(key)) {
        process.stderr.write(`${PAUSE_MARKER} ${phase} ${iteration}\n`);
        // Keeps the event loop alive until the test kills the process.
        await new Promise<never>(() => setInterval(() => {}, 60_000));
      }
    },
    nanLoss: (iteration) => nans.has(iteration),
  };
}

/** The faults of this process's environment. */
export function faultsFromEnv(): TrainFaults | undefined {
  return parseFaults(process.env.AGENT_R1_FAULT);
}
