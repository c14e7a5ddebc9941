/**
 * Which browsers a local HTTP server answers, judged by the Host and Origin headers.
 *
 * Host stops DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1
 * reaches the server as same-origin, but its requests still say `Host: evil.example`. Origin
 * stops cross-site requests: a page elsewhere may send (not read) a simple request, and the
 * server would act on it. Browsers always send Host and send Origin on cross-origin requests
 * (and on any POST); non-browser clients (curl, fetch from Node, the openai client) send a
 * Host naming the address they dialed and no Origin, so they pass.
 *
 * Accepted Host names: the bound host; plus localhost, 127.0.0.1 and ::1 when bound to a
 * loopback address; plus, when bound to every interface (0.0.0.0 or ::), any IP literal and
 * this machine's hostname (a name like those cannot be pointed at us by someone else's DNS);
 * plus `allowHosts` ("*" accepts any Host). Accepted Origins: none (no header), the server
 * itself (the Origin's host:port equals the Host header), and `allowOrigins` ("*" accepts
 * any); an allowed cross origin gets CORS headers so its pages can read the answers.
 */
import type { IncomingHttpHeaders } from "node:http";
import { isIP } from "node:net";
import { hostname as machineName } from "node:os";
import { InputError } from "./errors.js";

export interface HostGuardOptions {
  /** The address the server listens on (as given to listen). */
  bound: string;
  /** More Host names to accept (no port); "*" accepts any. */
  allowHosts?: readonly string[];
  /** Origins whose pages may call the server (`https://app.example:3000`, or `null` for file:// pages); "*" accepts any. */
  allowOrigins?: readonly string[];
  /** Names the options in messages: the CLI's flags by default. */
  flags?: { host: string; origin: string };
}

export type GuardVerdict = { ok: true; headers: Record<string, string> } | { ok: false; message: string };

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "::1"];

export class HostGuard {
  private readonly hosts = new Set<string>();
  private readonly origins = new Set<string>();
  private readonly anyHost: boolean;
  private readonly anyIp: boolean;
  private readonly anyOrigin: boolean;
  private readonly flags: { host: string; origin: string };

  constructor(opts: HostGuardOptions) {
    this.flags = opts.flags ?? { host: "--allow-host", origin: "--allow-origin" };
    const bound = canonicalHost(opts.bound) ?? opts.bound.toLowerCase();
    this.hosts.add(bound);
    const wildcard = isWildcard(bound);
    if (wildcard || isLoopback(bound)) for (const name of LOOPBACK_NAMES) this.hosts.add(name);
    if (wildcard) this.hosts.add(machineName().toLowerCase());
    this.anyIp = wildcard;
    for (const name of opts.allowHosts ?? []) {
      if (name === "*") continue;
      const canon = canonicalHost(name);
      if (canon === undefined)
        throw new InputError(
          `${this.flags.host} '${name}' is not a host name`,
          "give a name or an IP address, without scheme or port",
        );
      this.hosts.add(canon);
    }
    this.anyHost = opts.allowHosts?.includes("*") ?? false;
    for (const origin of opts.allowOrigins ?? []) {
      if (origin === "*") continue;
      const canon = canonicalOrigin(origin);
      if (canon === undefined)
        throw new InputError(
          `${this.flags.origin} '${origin}' is not an origin`,
          "write it as scheme://host[:port], e.g. https://app.example:3000",
        );
      this.origins.add(canon);
    }
    this.anyOrigin = opts.allowOrigins?.includes("*") ?? false;
  }

  /** Whether to answer a request with these headers; when yes, the headers to add to the response (CORS for an allowed cross origin). */
  check(headers: IncomingHttpHeaders): GuardVerdict {
    const host = headers.host;
    if (!host) return { ok: false, message: "the request has no Host header" };
    const name = hostOfHeader(host);
    if (name === undefined) return { ok: false, message: `the Host header '${host}' is malformed` };
    if (!this.anyHost && !this.hosts.has(name) && !(this.anyIp && isIP(name) !== 0)) {
      return {
        ok: false,
        message: `this server does not answer to Host '${name}'; if that is how you reach it, start it with ${this.flags.host} ${name}`,
      };
    }
    const origin = headers.origin;
    if (origin === undefined) return { ok: true, headers: {} };
    const canon = canonicalOrigin(origin);
    if (canon !== undefined && canon !== "null" && sameHostPort(canon, host)) return { ok: true, headers: {} };
    if (canon !== undefined && (this.anyOrigin || this.origins.has(canon)))
      return { ok: true, headers: { "Access-Control-Allow-Origin": origin, Vary: "Origin" } };
    return {
      ok: false,
      message: `requests from pages on ${origin} are refused (cross-site); to allow them, start the server with ${this.flags.origin} ${canon ?? origin}`,
    };
  }
}

/** The headers of an answer to a CORS preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin. */
export function preflightHeaders(headers: IncomingHttpHeaders, methods: string): Record<string, string> {
  const asked = headers["access-control-request-headers"];
  return {
    "Access-Control-Allow-Methods": methods,
    "Access-Control-Allow-Headers": typeof asked === "string" && asked !== "" ? asked : "Authorization, Content-Type",
    "Access-Control-Max-Age": "600",
  };
}

/** A host name or IP literal in one spelling: lower case, no trailing dot, IPv6 without brackets; undefined if it is not one. */
function canonicalHost(name: string): string | undefined {
  const bare = name.replace(/^\[(.*)\]$/, "$1");
  if (bare === "" || /[\s/?#@\\]/.test(bare)) return undefined;
  try {
    const url = new URL(`http://${isIP(bare) === 6 ? `[${bare}]` : bare}`);
    if (url.port !== "") return undefined;
    return url.hostname
      .replace(/^\[(.*)\]$/, "$1")
      .replace(/\.$/, "")
      .toLowerCase();
  } catch {
    return undefined;
  }
}

/** The host name of a Host header (`name`, `name:port`, `[v6]:port`). */
function hostOfHeader(header: string): string | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^\s/?#@\\[\]:]+)(?::(\d{1,5}))?$/.exec(header);
  return m ? canonicalHost(m[1]) : undefined;
}

/** `scheme://host[:port]` as the URL standard serializes an origin (default port dropped), or "null". */
function canonicalOrigin(origin: string): string | undefined {
  if (origin === "null") return "null";
  try {
    const url = new URL(origin);
    if (url.origin === "null" || url.pathname.length > 1 || url.search || url.hash || url.username) return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/** Whether an origin is this server as the Host header names it (scheme aside, so a TLS proxy that keeps Host still counts). */
function sameHostPort(origin: string, host: string): boolean {
  try {
    return new URL(origin).host === new URL(`http://${host}`).host;
  } catch {
    return false;
  }
}

/** Every interface: 0.0.0.0, ::, or no host at all. */
function isWildcard(host: string): boolean {
  return host === "" || host === "0.0.0.0" || (isIP(host) === 6 && /^[0:]+$/.test(host));
}

export function isLoopback(host: string): boolean {
  return (
    host === "localhost" ||
    (isIP(host) === 4 && host.startsWith("127.")) ||
    host === "::1" ||
    host === "::ffff:127.0.0.1"
  );
}
