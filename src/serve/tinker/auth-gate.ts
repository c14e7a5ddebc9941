/**
 * Who may use `serve --tinker`'s /api routes: with an API key, every route needs it as X-API-Key;
 * with the test JWT issuer as well (jwt-issuer.ts), only `client/config` (which tells the client to
 * exchange) and `auth/token` (the exchange) take the key, and every other route a token the issuer
 * signed that has not expired. Each refusal is a 401 saying which credential the route wants.
 */
import type { IncomingHttpHeaders } from "node:http";
import { HttpError } from "../../http/errors.js";
import { keyGate } from "../../http/guards.js";
import type { JwtIssuer } from "./jwt-issuer.js";

/** The routes that take the API key itself when tokens are issued. */
const KEY_ROUTES = new Set(["/api/v1/client/config", "/api/v1/auth/token"]);

export type Gate = (path: string, headers: IncomingHttpHeaders) => void;

/** The check for `path` (under /api), or undefined when the server needs no credential. */
export function tinkerGate(apiKey: string | undefined, issuer?: JwtIssuer): Gate | undefined {
  if (apiKey === undefined) return undefined;
  const key = keyGate(apiKey, {
    server: "serve --tinker",
    header: "x-api-key",
    missing: "this server requires its API key as X-API-Key",
  });
  if (!issuer) return (_path, headers) => key.check(headers);
  return (path, headers) => {
    if (KEY_ROUTES.has(path)) return key.check(headers);
    const given = headers["x-api-key"];
    if (typeof given === "string" && issuer.verify(given)) return;
    const why =
      typeof given !== "string"
        ? "this server requires a JWT as X-API-Key"
        : key.matches(given)
          ? "this server takes the API key only at /api/v1/auth/token (pjwt_auth_enabled): send the JWT it answers"
          : "the JWT is not one this server issued, or it has expired: exchange the API key again at /api/v1/auth/token";
    throw new HttpError(401, why, "invalid_api_key");
  };
}
