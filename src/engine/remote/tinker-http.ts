/**
 * The HTTP side of the Tinker client: requests with the API key and an idempotency key, sent
 * again as the SDK would (tinker-waits.ts says how long each wait is): after a dropped connection,
 * 408, 429 or 5xx, with backoff, at most `maxRetries` times and with the same idempotency key; a
 * sample the server pushes back on (429 to `asample`) after 1 s, then 5 s, as often as it takes
 * until the call's deadline; and while a server refuses for billing (402), every 5 s for up to
 * `billingMaxPauseMs`. Polling futures is tinker-future.ts.
 *
 * What comes back is bounded: an answer is read as a stream and stopped at `maxResponseBytes`
 * (default 256 MiB, counted after any Content-Encoding is undone), an error answer at its first
 * 64 KiB. Redirects are never followed (the API key would go along to wherever they point): a 3xx is
 * an error naming where it points. Every failure is one TinkerError naming the server, the request
 * and the fix.
 *
 * X-API-Key comes from tinker-auth.ts (an API key, a credential command, or a JWT exchanged for
 * either at /api/v1/auth/token); a 401 is sent once more with a fresh credential where one can come.
 */
import { randomUUID } from "node:crypto";
import { formatBytes, readLimited, readPrefix, redirectTarget } from "../../util/read-limited.js";
import { TinkerError } from "./tinker-error.js";
import { zstdCompress } from "./zstd.js";
import { Answer } from "./tinker-answer.js";
import { jwtExpiry, TinkerAuth } from "./tinker-auth.js";
import { sdkVersionProblem, versionAtLeast, wireFeatures, type WireFeatures } from "./tinker-versions.js";
import {
  backoffMs,
  backpressureMs,
  BillingPause,
  DEFAULT_BILLING_MAX_PAUSE_MS,
  REAL_CLOCK,
  type Clock,
} from "./tinker-waits.js";

/** The default limit on an answer's (decoded) size: far above any real result chunk, far below a crash. */
export const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024;
/** How much of an error answer is read: its message is shown cut to 300 characters anyway. */
const ERROR_BODY_BYTES = 64 * 1024;

export interface TinkerHttpOptions {
  /** The server's base URL (without /api/v1). */
  url: string;
  /** Sent as X-API-Key. */
  apiKey?: string;
  /** A shell command that prints the credential to send (instead of apiKey). */
  credentialCommand?: string;
  /** The SDK version the client reports and speaks (protobuf from 0.25). */
  sdkVersion: string;
  /** Per HTTP request. Default 60 s. */
  requestTimeoutMs?: number;
  /** How long a future may take before the call fails. Default 30 min. */
  futureTimeoutMs?: number;
  maxRetries?: number;
  /** The largest answer read, in bytes after decompression; past it the request fails. Default 256 MiB. */
  maxResponseBytes?: number;
  /** Progress lines (a long wait, a retry). */
  log?: (line: string) => void;
  /** The longest pause while the server refuses for billing (402). Default 1 h; 0 fails at the first. */
  billingMaxPauseMs?: number;
  /** Time and waits; tests give one that counts waits instead of spending them. */
  clock?: Clock;
}

/** How one request is sent. */
export interface SendOptions {
  signal?: AbortSignal;
  /** The Accept header. Default application/json. */
  accept?: string;
  /** When the call this request belongs to must end (on the clock); a pushed-back sample waits no longer. */
  deadline?: number;
  /** A 429 is backpressure (asample): send again after 1 s, then 5 s, with no limit on the attempts. */
  backpressure?: boolean;
}

/** Results that SDK ≥ 0.25 reads only as protobuf. */
export type ProtoResult = "sample" | "forward_backward";

export interface RawResponse {
  status: number;
  contentType: string;
  body: Uint8Array;
}

export { versionAtLeast };

/** The message of an error answer, on one line: its detail, error or message field, or the start of its text. */
export function messageOf(body: Uint8Array): string {
  const text = new TextDecoder().decode(body).trim();
  const line = (s: string) => s.replace(/\s+/g, " ");
  try {
    const j = JSON.parse(text) as { detail?: unknown; error?: unknown; message?: unknown };
    const m = j.detail ?? j.error ?? j.message;
    if (typeof m === "string") return line(m).slice(0, 300);
    if (m !== undefined) return JSON.stringify(m).slice(0, 300);
  } catch {
    // not JSON
  }
  return line(text).slice(0, 300) || "(empty body)";
}

export class TinkerHttp {
  readonly proto: boolean;
  /** What the SDK version gets on the wire (tinker-versions.ts). */
  readonly features: WireFeatures;
  readonly clock: Clock;
  /** The pause while the server refuses for billing, shared by every request of this client (as the SDK's). */
  readonly billing: BillingPause;
  readonly o: Required<Omit<TinkerHttpOptions, "apiKey" | "credentialCommand" | "log" | "clock">> &
    Pick<TinkerHttpOptions, "log">;
  /** What X-API-Key carries. */
  readonly auth: TinkerAuth;
  /** From the server's client config: compress protobuf bodies with zstd. */
  compress = false;
  /** Whether a request has ever got an answer: until then a refused connection is not retried (a wrong URL fails at once). */
  private reached = false;

  constructor(options: TinkerHttpOptions) {
    let url: URL;
    try {
      url = new URL(options.url);
    } catch {
      throw new TinkerError(
        `engine.tinker.url: '${options.url}' is not a URL`,
        "give http(s)://host:port of a Tinker-protocol server",
      );
    }
    const problem = sdkVersionProblem(options.sdkVersion);
    if (problem)
      throw new TinkerError(
        `engine.tinker.sdkVersion: ${problem}`,
        "give a version from 0.24.0 (JSON) to 0.31.0 (the newest published)",
      );
    const { clock, apiKey, credentialCommand, ...rest } = options;
    this.o = {
      ...rest,
      requestTimeoutMs: options.requestTimeoutMs ?? 60_000,
      futureTimeoutMs: options.futureTimeoutMs ?? 30 * 60_000,
      maxRetries: options.maxRetries ?? 6,
      maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      billingMaxPauseMs: options.billingMaxPauseMs ?? DEFAULT_BILLING_MAX_PAUSE_MS,
      url: url.href.replace(/\/+$/, ""),
    };
    this.clock = clock ?? REAL_CLOCK;
    const source = credentialCommand ? { command: credentialCommand } : apiKey ? { apiKey } : undefined;
    this.auth = new TinkerAuth(source, this.clock);
    this.billing = new BillingPause(this.o.billingMaxPauseMs, this.clock, options.log);
    this.features = wireFeatures(options.sdkVersion);
    this.proto = this.features.protobuf;
  }

  get url(): string {
    return this.o.url;
  }

  /** The server's client config asked for it: every request after this one sends a JWT exchanged for the credential. */
  enableJwt(): void {
    this.auth.exchange ??= (credential, signal) => this.exchangeJwt(credential, signal);
  }

  /**
   * POST /api/v1/auth/token with `credential`: the JWT it answers (checked to be one, with an
   * expiry). A refusal is a TinkerError; a dropped connection or a 5xx a plain Error (retried by
   * the request that needed the token).
   */
  private async exchangeJwt(credential: string, signal?: AbortSignal): Promise<string> {
    const what = "auth/token";
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    const res = await this.fetchOnce("/api/v1/auth/token", "{}", headers, what, signal, credential);
    if (res.status === 408 || res.status === 429 || res.status >= 500)
      throw new Error(`${what}: HTTP ${res.status}: ${messageOf(res.body)}`);
    if (res.status === 401 || res.status === 403)
      throw new TinkerError(
        `${this.o.url}: ${what} refused to exchange the credential for a JWT (HTTP ${res.status}: ${messageOf(res.body)})`,
        "check TINKER_API_KEY, or what engine.tinker.credentialCommand (TINKER_CREDENTIAL_CMD) prints",
        401,
      );
    if (res.status >= 300) throw this.failure(what, res.status, messageOf(res.body));
    const answer = new Answer(this.o.url, what);
    const jwt = answer.string(this.parseJson(res, what), "jwt");
    if (jwtExpiry(jwt) === undefined) throw answer.fault("jwt", "is not a JWT with an expiry (its exp claim)");
    return jwt;
  }

  /** A JSON request and its JSON answer; `what` names the request in errors ("create_model"). */
  async json(
    path: string,
    body: unknown,
    what: string,
    opts: SendOptions = {},
    headers: Record<string, string> = {},
  ): Promise<Record<string, unknown>> {
    const res = await this.send(
      path,
      JSON.stringify(body),
      { "Content-Type": "application/json", ...headers },
      what,
      opts,
    );
    return this.parseJson(res, what);
  }

  async get(path: string, what: string): Promise<Record<string, unknown>> {
    return this.parseJson(await this.send(path, undefined, {}, what), what);
  }

  /** A protobuf request body (zstd-compressed when the server asked for it). */
  async protobuf(path: string, body: Uint8Array, what: string): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = { "Content-Type": "application/x-protobuf" };
    let payload = body;
    if (this.compress) {
      payload = await zstdCompress(body);
      headers["Content-Encoding"] = "zstd";
    }
    return this.parseJson(await this.send(path, payload, headers, what), what);
  }

  /** A 2xx answer as a JSON object, or an error naming the server and the request. */
  parseJson(res: RawResponse, what: string): Record<string, unknown> {
    let v: unknown;
    try {
      v = JSON.parse(new TextDecoder().decode(res.body));
    } catch {
      throw new Answer(this.o.url, what).fault("the answer", "is not JSON");
    }
    return new Answer(this.o.url, what).object(v, "the answer");
  }

  /**
   * Sends with the waits of tinker-waits.ts; returns a 2xx answer or throws a TinkerError naming
   * the server, request and fix.
   */
  async send(
    path: string,
    body: string | Uint8Array | undefined,
    headers: Record<string, string>,
    what: string,
    opts: SendOptions = {},
  ): Promise<RawResponse> {
    const { signal } = opts;
    let key = `agent-r1-${randomUUID()}`;
    let attempt = 0,
      pushedBack = 0;
    for (;;) {
      let res: RawResponse | undefined;
      let failure: string;
      try {
        const sent = { ...headers, Accept: opts.accept ?? "application/json", "X-Idempotency-Key": key };
        res = await this.request(path, body, sent, what, signal);
        this.reached = true;
        if (res.status !== 402) this.billing.clear();
        if (res.status < 300) return res;
        failure = `HTTP ${res.status}: ${messageOf(res.body)}`;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (e instanceof TinkerError) throw e; // a redirect, an answer over the limit: sending again changes nothing
        failure = (e as Error).message;
      }
      if (res?.status === 402) {
        if (await this.billing.wait(`${this.o.url}: ${what}`, messageOf(res.body), signal)) continue;
        throw this.billingFailure(what, failure);
      }
      if (res?.status === 429 && opts.backpressure) {
        await this.pushedBack(what, pushedBack++, opts.deadline, signal);
        key = `agent-r1-${randomUUID()}`; // a new submission
        continue;
      }
      const retryable = res ? [408, 429].includes(res.status) || res.status >= 500 : this.reached;
      if (retryable && attempt < this.o.maxRetries) {
        const wait = backoffMs(attempt++, this.clock.random);
        this.o.log?.(`tinker: ${what} to ${this.o.url}: ${failure}; retrying in ${(wait / 1000).toFixed(1)} s`);
        await this.clock.sleep(wait, "backoff", signal);
        continue;
      }
      throw this.failure(what, res?.status, failure);
    }
  }

  /** Waits out the n-th push-back of a sample, unless that would pass the call's deadline. */
  private async pushedBack(what: string, n: number, deadline: number | undefined, signal?: AbortSignal) {
    const wait = backpressureMs(n);
    if (deadline !== undefined && this.clock.now() + wait > deadline)
      throw new TinkerError(
        `${this.o.url}: ${what}: the server is still too busy to take it (HTTP 429, ${n + 1} times), and the request's deadline (${this.o.futureTimeoutMs / 1000} s) has come`,
        "the server is overloaded; sample less at once, or look at its log",
        429,
      );
    await this.clock.sleep(wait, "backpressure", signal);
  }

  /** The error once a billing pause has lasted as long as it may. */
  billingFailure(what: string, detail: string): TinkerError {
    return new TinkerError(
      `${this.o.url}: ${what} was refused for billing (${detail}), still after a pause of ${this.billing.seconds()} s`,
      "settle the account with the service, or raise engine.tinker.billingPauseS to wait longer",
      402,
    );
  }

  /** The error for a request that failed with `status` (undefined: no answer). */
  failure(what: string, status: number | undefined, detail: string): TinkerError {
    const where = `${this.o.url}: ${what}`;
    if (status === undefined)
      return new TinkerError(
        `${where} failed: ${detail}`,
        "is the server running and reachable? check engine.tinker.url (or TINKER_BASE_URL)",
      );
    if (status === 401 || status === 403)
      return new TinkerError(
        `${where} was refused (${detail})`,
        "check the API key in TINKER_API_KEY (or what engine.tinker.credentialCommand prints)",
        status,
      );
    if (status === 404 && /not found/i.test(detail) && !/model|session|future|request/i.test(detail))
      return new TinkerError(
        `${where}: the server has no such endpoint (${detail})`,
        "is it a Tinker-protocol server? check engine.tinker.url",
        status,
      );
    if (status === 415 || status === 422)
      return new TinkerError(
        `${where} was not understood (${detail})`,
        `the server may speak another SDK generation than ${this.o.sdkVersion}: set engine.tinker.sdkVersion (0.24.1 for JSON servers, 0.25.0 or later for protobuf)`,
        status,
      );
    return new TinkerError(`${where} failed: ${detail}`, undefined, status);
  }

  /**
   * One request, not sent again here but for a 401 answered by a fresh credential (once): a 2xx
   * answer read within the limit, any other status with the start of its body. A lost connection
   * is a plain Error with the cause; a redirect or an answer past the limit a TinkerError.
   */
  async request(
    path: string,
    body: string | Uint8Array | undefined,
    headers: Record<string, string>,
    what: string,
    signal?: AbortSignal,
  ): Promise<RawResponse> {
    const token = await this.auth.header(signal);
    const res = await this.fetchOnce(path, body, headers, what, signal, token);
    if (res.status !== 401 || !this.auth.renewable) return res;
    this.auth.refused(token);
    return this.fetchOnce(path, body, headers, what, signal, await this.auth.header(signal));
  }

  /** One request with `token` as X-API-Key. */
  private async fetchOnce(
    path: string,
    body: string | Uint8Array | undefined,
    headers: Record<string, string>,
    what: string,
    signal: AbortSignal | undefined,
    token: string | undefined,
  ): Promise<RawResponse> {
    const timeout = AbortSignal.timeout(this.o.requestTimeoutMs);
    const lost = (e: Error): Error => {
      if (e instanceof TinkerError) return e;
      if (timeout.aborted) return new Error(`no answer within ${this.o.requestTimeoutMs / 1000} s`);
      return new Error(causeOf(e));
    };
    const res = await fetch(`${this.o.url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: {
        ...headers,
        ...(token ? { "X-API-Key": token } : {}),
        "User-Agent": `agent-r1 (tinker-sdk ${this.o.sdkVersion})`,
      },
      body: body as BodyInit | undefined,
      redirect: "manual",
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    }).catch((e: Error) => {
      throw lost(e);
    });
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => undefined);
      throw this.redirected(what, res);
    }
    const limit = this.o.maxResponseBytes;
    const buf = await (
      res.status < 300
        ? readLimited(res, limit, (over) => this.tooLarge(what, over.bytes, over.declared))
        : readPrefix(res, ERROR_BODY_BYTES)
    ).catch((e: Error) => {
      throw lost(e);
    });
    return { status: res.status, contentType: res.headers.get("content-type") ?? "", body: buf };
  }

  private redirected(what: string, res: Response): TinkerError {
    return new TinkerError(
      `${this.o.url}: ${what}: the server answered a redirect (HTTP ${res.status}) to ${redirectTarget(res)}; not followed (the API key would go along)`,
      "point engine.tinker.url (or TINKER_BASE_URL) at the final address",
      res.status,
    );
  }

  private tooLarge(what: string, bytes: number, declared: boolean): TinkerError {
    const limit = `the ${formatBytes(this.o.maxResponseBytes)} limit on answers (maxResponseBytes)`;
    return new TinkerError(
      `${this.o.url}: ${what}: ${declared ? `the answer declares ${formatBytes(bytes)}, over ${limit}` : `the answer ran past ${limit} and was cut off`}`,
      "a Tinker result is one chunk of results; is engine.tinker.url a Tinker-protocol server?",
    );
  }
}

/** The useful part of a fetch failure ("connect ECONNREFUSED 127.0.0.1:9"). */
function causeOf(e: Error): string {
  const cause = (e as Error & { cause?: { message?: string; code?: string } }).cause;
  return cause?.message ?? cause?.code ?? e.message;
}
