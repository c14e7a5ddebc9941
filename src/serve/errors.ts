/**
 * Errors as the OpenAI API reports them: a 4xx/5xx status and
 * `{"error": {"message", "type", "param", "code"}}`. An error of the HTTP kit (src/http/errors.ts)
 * keeps its status and code; bad input from the library (InputError and friends) becomes a 400;
 * anything else is a 500.
 */
import { AgentR1Error } from "../util/errors.js";
import { HttpError } from "../http/errors.js";

export type ApiErrorType = "invalid_request_error" | "server_error";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** `headers` go on the error response (WWW-Authenticate for a 401, ...). */
    readonly opts: {
      type?: ApiErrorType;
      code?: string | null;
      param?: string | null;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  get type(): ApiErrorType {
    return this.opts.type ?? (this.status >= 500 ? "server_error" : "invalid_request_error");
  }

  body(): { error: { message: string; type: ApiErrorType; param: string | null; code: string | null } } {
    return {
      error: { message: this.message, type: this.type, param: this.opts.param ?? null, code: this.opts.code ?? null },
    };
  }
}

/** A 400 naming the request field at fault. */
export function badRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(400, message, { param, code });
}

/** Any thrown value as an ApiError: library input errors are the client's fault, the rest is ours. */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof HttpError) return new ApiError(e.status, e.message, { code: e.code, headers: e.headers });
  if (e instanceof AgentR1Error) return badRequest(e.message);
  return new ApiError(500, `internal error: ${e instanceof Error ? e.message : String(e)}`);
}
