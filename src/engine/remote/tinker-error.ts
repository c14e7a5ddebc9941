/**
 * One error class for the Tinker protocol, on both sides: the client throws it with a message that
 * names the server and the request and a hint with the fix; the server turns it into a 4xx answer
 * whose body carries the message (`status`, default 400).
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
