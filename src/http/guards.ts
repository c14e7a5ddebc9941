/**
 * What every server checks before its routes: the request target parses (400), Host and Origin
 * are ones it answers (403; util/host-guard.ts, whose CORS headers are set on the response), and,
 * with a key, the request carries it (401), as `Authorization: Bearer KEY` or in a header of the
 * server's protocol (X-API-Key for Tinker).
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { HostGuard } from "../util/host-guard.js";
import { parseRequestTarget } from "../util/request-target.js";
import { bearerKey, secretMatcher } from "../util/secret.js";
import { HttpError } from "./errors.js";

/** The request's URL, its path without trailing slashes ("/" at least), after the Host/Origin check. */
export function admit(req: IncomingMessage, res: ServerResponse, guard: HostGuard): { url: URL; path: string } {
  const url = parseRequestTarget(req.url);
  if (!url) throw new HttpError(400, `malformed request target '${req.url}'`, "invalid_url");
  const verdict = guard.check(req.headers);
  if (!verdict.ok) throw new HttpError(403, verdict.message, "forbidden");
  for (const [k, v] of Object.entries(verdict.headers)) res.setHeader(k, v);
  return { url, path: url.pathname.replace(/\/+$/, "") || "/" };
}

export interface KeyGate {
  /** Throws a 401 unless the request's headers carry the key. */
  check(headers: IncomingHttpHeaders): void;
  /** Whether `given` is the key (a key that arrives another way, as a dashboard's ?key=). */
  matches(given: string | undefined): boolean;
}

/**
 * A key check; `key` must be non-empty without spaces (an InputError naming `server` and
 * `setting` where it came from). `header` is where requests carry it: "authorization" (a Bearer
 * token, the default) or another header's name.
 */
export function keyGate(
  key: string,
  o: { server: string; setting?: string; header?: string; missing: string; wrong?: string },
): KeyGate {
  const matches = secretMatcher(key, o.server, o.setting);
  const header = o.header ?? "authorization";
  const bearer = header === "authorization";
  const challenge: Record<string, string> = bearer ? { "WWW-Authenticate": "Bearer" } : {};
  return {
    matches,
    check(headers) {
      const raw = headers[header];
      const given = bearer ? bearerKey(raw as string | undefined) : typeof raw === "string" ? raw : undefined;
      if (given === undefined) throw new HttpError(401, o.missing, "invalid_api_key", challenge);
      if (!matches(given)) throw new HttpError(401, o.wrong ?? o.missing, "invalid_api_key", challenge);
    },
  };
}
