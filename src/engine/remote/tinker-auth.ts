/**
 * What the Tinker client sends as X-API-Key, from one of three sources:
 *  - an API key (engine.tinker via TINKER_API_KEY): sent as it is;
 *  - a credential command (engine.tinker.credentialCommand, or TINKER_CREDENTIAL_CMD): a shell
 *    command that prints a credential, for organizations whose credentials change; it runs when a
 *    credential is first needed, again when the one it printed expires (a JWT's `exp`) or the
 *    server refuses it (401);
 *  - either of them exchanged for a short-lived JWT at `/api/v1/auth/token`, when the server's
 *    client config says `pjwt_auth_enabled`: the JWT is sent instead, and exchanged again a minute
 *    before it expires, or when the server refuses it.
 * A 401 is answered by one more try with a fresh credential where one can come (tinker-http.ts).
 * Credentials are never logged nor put in an error: a failing command is named by its command and
 * exit status only.
 */
import { execFile } from "node:child_process";
import { TinkerError } from "./tinker-error.js";
import { REAL_CLOCK, type Clock } from "./tinker-waits.js";

/** Where the credential comes from. */
export type CredentialSource = { apiKey: string } | { command: string } | undefined;

/** Renew a JWT this long before its `exp`. */
const RENEW_BEFORE_MS = 60_000;
/** How long a credential command may run. */
const COMMAND_TIMEOUT_MS = 30_000;

/** The `exp` of a JWT (ms since the epoch), or undefined when `token` is not a JWT with one. */
export function jwtExpiry(token: string): number | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p))) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8")) as { exp?: unknown };
    return typeof claims.exp === "number" && Number.isFinite(claims.exp) ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Runs a credential command; its output, trimmed, is the credential. */
export function runCredentialCommand(command: string, timeoutMs = COMMAND_TIMEOUT_MS): Promise<string> {
  const hint = "engine.tinker.credentialCommand (or TINKER_CREDENTIAL_CMD) must print a credential on stdout";
  return new Promise((resolve, reject) => {
    execFile("/bin/sh", ["-c", command], { timeout: timeoutMs, maxBuffer: 64 * 1024 }, (err, stdout) => {
      if (err) {
        const e = err as Error & { code?: unknown; killed?: boolean };
        const how = e.killed ? `did not finish within ${timeoutMs / 1000} s` : `failed (exit status ${String(e.code)})`;
        return reject(new TinkerError(`the credential command '${command}' ${how}`, hint, 401));
      }
      const credential = stdout.trim();
      if (credential === "" || /\s/.test(credential))
        return reject(
          new TinkerError(
            `the credential command '${command}' printed ${credential === "" ? "nothing" : "more than one word"}`,
            hint,
            401,
          ),
        );
      resolve(credential);
    });
  });
}

/** A credential held, and until when it may be sent (ms; Infinity when nothing says). */
interface Held {
  value: string;
  until: number;
}

export class TinkerAuth {
  /** Exchanges a credential for a JWT at /api/v1/auth/token; set when the server's client config asks for it. */
  exchange?: (credential: string, signal?: AbortSignal) => Promise<string>;
  private base?: Held;
  private jwt?: Held;
  /** One fetch at a time: concurrent requests share it. */
  private pending?: Promise<string>;

  constructor(
    private readonly source: CredentialSource,
    private readonly clock: Clock = REAL_CLOCK,
    private readonly run: (command: string) => Promise<string> = runCredentialCommand,
  ) {}

  /** Whether a refused credential can be replaced by another (a command runs again, a JWT is exchanged again). */
  get renewable(): boolean {
    return this.exchange !== undefined || (this.source !== undefined && "command" in this.source);
  }

  /** The X-API-Key to send now (undefined: none). */
  async header(signal?: AbortSignal): Promise<string | undefined> {
    if (!this.source) return undefined;
    const held = this.exchange ? this.jwt : this.base;
    if (held && this.clock.now() < held.until) return held.value;
    this.pending ??= this.fetch(signal).finally(() => (this.pending = undefined));
    return this.pending;
  }

  /** After a 401 to `used`: forgets it, so the next header() fetches another. */
  refused(used: string | undefined): void {
    if (this.jwt?.value === used) this.jwt = undefined;
    else if (this.base?.value === used) this.base = undefined;
  }

  private async fetch(signal?: AbortSignal): Promise<string> {
    const base = await this.baseCredential();
    if (!this.exchange) return base;
    let jwt: string;
    try {
      jwt = await this.exchange(base, signal);
    } catch (e) {
      // A command's credential the exchange refuses may be stale: one more with a fresh one.
      if (!(e instanceof TinkerError && e.status === 401 && this.source && "command" in this.source)) throw e;
      this.base = undefined;
      jwt = await this.exchange(await this.baseCredential(), signal);
    }
    this.jwt = { value: jwt, until: (jwtExpiry(jwt) ?? Infinity) - RENEW_BEFORE_MS };
    return jwt;
  }

  private async baseCredential(): Promise<string> {
    if (this.base && this.clock.now() < this.base.until) return this.base.value;
    const source = this.source!;
    const value = "apiKey" in source ? source.apiKey : await this.run(source.command);
    const expiry = "command" in source ? jwtExpiry(value) : undefined;
    this.base = { value, until: expiry === undefined ? Infinity : expiry - RENEW_BEFORE_MS };
    return value;
  }
}
