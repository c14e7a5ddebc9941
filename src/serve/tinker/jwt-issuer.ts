/**
 * A JWT issuer for testing the Tinker client's JWT exchange against `serve --tinker` on loopback
 * (startTinkerServer's `jwt` option; refused on any other address): `/api/v1/auth/token` takes the
 * server's API key and answers a short-lived token (HS256, signed with a key made at start and
 * never stored), which every other route then requires instead of the key. It proves the client
 * exchanges, sends and renews the token; it is no identity service.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { InputError } from "../../util/errors.js";

const b64 = (x: string | Buffer) => Buffer.from(x).toString("base64url");

/** Where a test issuer may run: loopback only. */
export function checkLoopback(host: string): void {
  if (!["127.0.0.1", "::1", "localhost"].includes(host))
    throw new InputError(
      `serve --tinker: the test JWT issuer (option jwt) runs on loopback only, not on ${host}`,
      "listen on 127.0.0.1, or leave the option out",
    );
}

export class JwtIssuer {
  private readonly key = randomBytes(32);

  /** `ttlS`: how long a token lasts; `now`: the time in ms (tests move it). */
  constructor(
    readonly ttlS = 900,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isSafeInteger(ttlS) || ttlS < 1)
      throw new InputError(`serve --tinker: jwt.ttlS must be a positive integer, got ${ttlS}`);
  }

  private sign(data: string): string {
    return createHmac("sha256", this.key).update(data).digest("base64url");
  }

  /** A new token, valid for ttlS from now. */
  issue(): string {
    const iat = Math.floor(this.now() / 1000);
    const head = `${b64(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${b64(JSON.stringify({ sub: "agent-r1", iat, exp: iat + this.ttlS }))}`;
    return `${head}.${this.sign(head)}`;
  }

  /** Whether `token` is one this issuer signed and it has not expired. */
  verify(token: string): boolean {
    const parts = token.split(".");
    if (parts.length !== 3) return false;
    const want = Buffer.from(this.sign(`${parts[0]}.${parts[1]}`));
    const got = Buffer.from(parts[2]);
    if (want.length !== got.length || !timingSafeEqual(want, got)) return false;
    try {
      const { exp } = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8")) as { exp?: unknown };
      return typeof exp === "number" && exp * 1000 > this.now();
    } catch {
      return false;
    }
  }
}
