/**
 * The errors of the Tinker protocol, on both sides: the client throws them with a message that
 * names the server and the request and a hint with the fix; the server turns a TinkerError into a
 * 4xx answer whose body carries the message (`status`, default 400). An answer the client cannot
 * trust (a field of the wrong type, size, shape or range) is a TinkerAnswerError, which also
 * carries the server, the request and the field on their own.
 */
import { AgentR1Error } from "../../util/errors.js";

export class TinkerError extends AgentR1Error {
  constructor(
    message: string,
    hint?: string,
    readonly status = 400,
  ) {
    super(message, hint);
  }
}

/** Builds the error for a field of an answer (or a request) that breaks the protocol. */
export type Fault = (field: string, problem: string) => Error;

const ANSWER_HINT =
  "the server does not answer as the Tinker SDK reads the protocol; check its version (engine.tinker.sdkVersion) and its log";

/** A server's answer the client refuses: "<server>: <request>: <field> <problem>". */
export class TinkerAnswerError extends TinkerError {
  constructor(
    readonly server: string,
    readonly request: string,
    readonly field: string,
    problem: string,
    hint = ANSWER_HINT,
  ) {
    super(`${server}: ${request}: ${field} ${problem}`, hint);
  }
}
