/**
 * The HTTP kit's one error: a status, a message, and optionally a machine-readable code and
 * headers for the response (WWW-Authenticate on a 401, Allow on a 405). The kit's parts throw it;
 * each server's error mapper turns it (and its own errors) into the body its clients expect.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "HttpError";
  }
}
