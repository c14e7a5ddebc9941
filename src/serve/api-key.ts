/**
 * The optional API key of the serve endpoints, checked the way OpenAI-compatible servers do:
 * `Authorization: Bearer KEY` on every /v1 route, 401 with the OpenAI error object otherwise.
 */
import type { IncomingHttpHeaders } from "node:http";
import { bearerKey, secretMatcher } from "../util/secret.js";
import { ApiError } from "./errors.js";

export class ApiKey {
  private readonly matches: (given: string | undefined) => boolean;

  /** Refuses an empty key or one with spaces (an InputError naming `server`). */
  constructor(key: string, server = "serve") {
    this.matches = secretMatcher(key, server);
  }

  /** Throws a 401 unless the request carries the key. */
  check(headers: IncomingHttpHeaders): void {
    const given = bearerKey(headers.authorization);
    if (given === undefined)
      throw unauthorized(
        "this server requires an API key: send it as 'Authorization: Bearer KEY' (the openai client's apiKey)",
      );
    if (!this.matches(given)) throw unauthorized("the API key is not the one this server was started with");
  }
}

function unauthorized(message: string): ApiError {
  return new ApiError(401, message, { code: "invalid_api_key", headers: { "WWW-Authenticate": "Bearer" } });
}
