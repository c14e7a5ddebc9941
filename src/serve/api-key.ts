/**
 * The optional API key of the serve endpoints, checked the way OpenAI-compatible servers do:
 * `Authorization: Bearer KEY` on every /v1 route, 401 with the OpenAI error object otherwise.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { ApiError } from "./errors.js";

export class ApiKey {
  private readonly digest: Buffer;

  constructor(key: string) {
    this.digest = sha256(key);
  }

  /** Throws a 401 unless the request carries the key. */
  check(headers: IncomingHttpHeaders): void {
    const m = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? "");
    if (!m)
      throw unauthorized(
        "this server requires an API key: send it as 'Authorization: Bearer KEY' (the openai client's apiKey)",
      );
    // Hashing first makes both sides the same length, so the comparison time says nothing about the key.
    if (!timingSafeEqual(sha256(m[1].trim()), this.digest))
      throw unauthorized("the API key is not the one this server was started with");
  }
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

function unauthorized(message: string): ApiError {
  return new ApiError(401, message, { code: "invalid_api_key", headers: { "WWW-Authenticate": "Bearer" } });
}
