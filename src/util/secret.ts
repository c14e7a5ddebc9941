/**
 * The API keys of our servers (`serve`, `serve --tinker`, `dashboard`, the gateway's episodes):
 * a key must be non-empty and without spaces (an empty one would let an empty header in; one with
 * spaces could never be sent), and a key a client sends is compared in time that says nothing
 * about the key (both sides hashed to the same length first).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { InputError } from "./errors.js";

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest();

/**
 * A checker for `secret`, or an InputError when it is no usable key; `server` names the server in
 * that error ("serve --tinker") and `setting` where the key came from.
 */
export function secretMatcher(
  secret: string,
  server: string,
  setting = "--api-key (or AGENT_R1_API_KEY)",
): (given: string | undefined) => boolean {
  if (!/^\S+$/.test(secret))
    throw new InputError(
      `${server}: the API key must be non-empty and without spaces`,
      `check ${setting}, or give none to serve without one`,
    );
  const digest = sha256(secret);
  return (given) => given !== undefined && given !== "" && timingSafeEqual(sha256(given), digest);
}

/** The key of an `Authorization: Bearer KEY` header, if there is one. */
export function bearerKey(authorization: string | undefined): string | undefined {
  const m = /^Bearer\s+(.+)$/i.exec(authorization ?? "");
  return m ? m[1].trim() : undefined;
}
