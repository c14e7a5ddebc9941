/** Errors of the agent runtime. Tool-call failures are not among them: those become observation text. */
import { AgentR1Error } from "../util/errors.js";

/** The chat template cannot give an observation delta (or a render) for this conversation. */
export class ChatTemplateError extends AgentR1Error {}

/** An env broke its contract (bad observation or step result) or threw; the trajectory is marked failed with it. */
export class EnvError extends AgentR1Error {
  constructor(
    readonly stage: "reset" | "step" | "close",
    message: string,
    override readonly cause?: unknown,
  ) {
    super(`env ${stage}: ${message}`);
  }
}
