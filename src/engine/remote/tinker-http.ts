/**
 * The HTTP side of the Tinker client: requests with the API key and an idempotency key, retries
 * with backoff, and futures polled through `retrieve_future` until they hold a result.
 *
 * Retries (the SDK's policy; the wire as this client speaks it: docs/scale-out.md): a request is
 * sent again on a dropped connection, 408, 409, 429 and 5xx, after min(0.5·2^n, 10) s with jitter,
 * at most `maxRetries` times, with the same idempotency key. A future is polled again on `try_again`
 * and 408 (the server long-polls), and up to three times on 400, at most once per poll pause:
 * min(0.1·1.5^n, 2) s with jitter for the n-th empty poll in a row, less the time the poll itself
 * took, so a long-polling server is asked again at once and one that answers `try_again` at once
 * costs a few requests a second, not thousands. 429, 5xx and dropped connections wait a backoff; an
 * `{error, category}` result fails the future. Every wait has a deadline: nothing hangs without a
 * message.
 *
 * What comes back is bounded: an answer is read as a stream and stopped at `maxResponseBytes`
 * (default 256 MiB, counted after any Content-Encoding is undone), an error answer at its first
 * 64 KiB. Redirects are never followed (the API key would go along to wherever they point): a 3xx is
 * an error naming where it points.
 */
import { randomUUID } from "node:crypto";
import { formatBytes, readLimited, readPrefix, redirectTarget } from "../../util/read-limited.js";
import { TinkerError } from "./tinker-error.js";
import { zstdCompress } from "./zstd.js";

/** The default limit on an answer's (decoded) size: far above any real result chunk, far below a crash. */
export const DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024;
/** How much of an error answer is read: its message is shown cut to 300 characters anyway. */
const ERROR_BODY_BYTES = 64 * 1024;

export interface TinkerHttpOptions {
  /** The server's base URL (without /api/v1). */
  url: string;
  /** Sent as X-API-Key. */
  apiKey?: string;
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
}

/** Results that SDK ≥ 0.25 reads only as protobuf. */
export type ProtoResult = "sample" | "forward_backward";

export interface RawResponse {
  status: number;
  contentType: string;
  body: Uint8Array;
}

/** Whether `version` (x.y.z) is at least `min`. */
export function versionAtLeast(version: string, min: string): boolean {
  const a = version.split(".").map(Number),
    b = min.split(".").map(Number);
  for (let i = 0; i < 3; i++) {
    const x = a[i] ?? 0,
      y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

const backoff = (attempt: number) => Math.min(500 * 2 ** attempt, 10_000) * (0.75 + 0.25 * Math.random());

/** The pause before polling a future again after `n` empty polls in a row (0, 1, ...): 75-100 ms growing to 1.5-2 s. */
export function pollPauseMs(n: number, random: () => number = Math.random): number {
  return Math.min(100 * 1.5 ** n, 2_000) * (0.75 + 0.25 * random());
}

function messageOf(body: Uint8Array): string {
  const text = new TextDecoder().decode(body).trim();
  try {
    const j = JSON.parse(text) as { detail?: unknown; error?: unknown; message?: unknown };
    const m = j.detail ?? j.error ?? j.message;
    if (typeof m === "string") return m;
    if (m !== undefined) return JSON.stringify(m).slice(0, 300);
  } catch {
    // not JSON
  }
  return text.slice(0, 300) || "(empty body)";
}

export class TinkerHttp {
  readonly proto: boolean;
  private readonly o: Required<Omit<TinkerHttpOptions, "apiKey" | "log">> & Pick<TinkerHttpOptions, "apiKey" | "log">;
  /** From the server's client config: compress protobuf bodies with zstd. */
  compress = false;

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
    this.o = {
      ...options,
      requestTimeoutMs: options.requestTimeoutMs ?? 60_000,
      futureTimeoutMs: options.futureTimeoutMs ?? 30 * 60_000,
      maxRetries: options.maxRetries ?? 6,
      maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      url: url.href.replace(/\/+$/, ""),
    };
    this.proto = versionAtLeast(options.sdkVersion, "0.25.0");
  }

  get url(): string {
    return this.o.url;
  }

  /** A JSON request and its JSON answer; `what` names the request in errors ("create_model"). */
  async json(path: string, body: unknown, what: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const res = await this.send(path, JSON.stringify(body), { "Content-Type": "application/json" }, what, signal);
    return this.parseJson(res, what);
  }

  /** Whether a request has ever got an answer: until then a refused connection is not retried (a wrong URL fails at once). */
  private reached = false;

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

  private parseJson(res: RawResponse, what: string): Record<string, unknown> {
    try {
      const v = JSON.parse(new TextDecoder().decode(res.body));
      if (v && typeof v === "object") return v as Record<string, unknown>;
    } catch {
      // below
    }
    throw new TinkerError(`${this.o.url}: ${what} answered something that is not a JSON object`);
  }

  /** Sends with retries; returns a 2xx answer or throws a TinkerError naming the server, request and fix. */
  async send(
    path: string,
    body: string | Uint8Array | undefined,
    headers: Record<string, string>,
    what: string,
    signal?: AbortSignal,
    accept = "application/json",
  ): Promise<RawResponse> {
    const key = `agent-r1-${randomUUID()}`;
    for (let attempt = 0; ; attempt++) {
      let res: RawResponse | undefined;
      let failure: string;
      try {
        res = await this.once(path, body, { ...headers, Accept: accept, "X-Idempotency-Key": key }, what, signal);
        this.reached = true;
        if (res.status < 300) return res;
        failure = `HTTP ${res.status}: ${messageOf(res.body)}`;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (e instanceof TinkerError) throw e; // a redirect, an answer over the limit: sending again changes nothing
        failure = (e as Error).message;
      }
      const retryable = res ? [408, 429].includes(res.status) || res.status >= 500 : this.reached;
      if (retryable && attempt < this.o.maxRetries) {
        const wait = backoff(attempt);
        this.o.log?.(`tinker: ${what} to ${this.o.url}: ${failure}; retrying in ${(wait / 1000).toFixed(1)} s`);
        await sleep(wait, signal);
        continue;
      }
      throw this.failure(what, res?.status, failure);
    }
  }

  private failure(what: string, status: number | undefined, detail: string): TinkerError {
    const where = `${this.o.url}: ${what}`;
    if (status === undefined)
      return new TinkerError(
        `${where} failed: ${detail}`,
        "is the server running and reachable? check engine.tinker.url (or TINKER_BASE_URL)",
      );
    if (status === 401 || status === 403)
      return new TinkerError(`${where} was refused (${detail})`, "check the API key in TINKER_API_KEY", status);
    if (status === 404 && /not found/i.test(detail) && !/model|session|future|request/i.test(detail))
      return new TinkerError(
        `${where}: the server has no such endpoint (${detail})`,
        "is it a Tinker-protocol server? check engine.tinker.url",
        status,
      );
    if (status === 415 || status === 422)
      return new TinkerError(
        `${where} was not understood (${detail})`,
        `the server may speak another SDK generation than ${this.o.sdkVersion}: set engine.tinker.sdkVersion (0.24.1 for JSON servers, 0.25.0 for protobuf)`,
        status,
      );
    return new TinkerError(`${where} failed: ${detail}`, undefined, status);
  }

  /** One request: a 2xx answer read within the limit, any other status with the start of its body. */
  private async once(
    path: string,
    body: string | Uint8Array | undefined,
    headers: Record<string, string>,
    what: string,
    signal?: AbortSignal,
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
        ...(this.o.apiKey ? { "X-API-Key": this.o.apiKey } : {}),
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

  /** Waits out what is left of the n-th poll pause, counted from when the poll was sent. */
  private async pollPause(n: number, polledAt: number, signal?: AbortSignal): Promise<void> {
    const wait = pollPauseMs(n) - (Date.now() - polledAt);
    if (wait > 0) await sleep(wait, signal);
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

  /**
   * Polls a future until it holds a result: JSON (a record), or the protobuf bytes of a sample or
   * forward_backward result when this client speaks protobuf.
   */
  async future(
    requestId: string,
    what: string,
    proto?: ProtoResult,
    signal?: AbortSignal,
  ): Promise<{ json: Record<string, unknown> } | { bytes: Uint8Array }> {
    const deadline = Date.now() + this.o.futureTimeoutMs;
    const accept = proto && this.proto ? "application/x-protobuf" : "application/json";
    let badRequests = 0,
      attempt = 0,
      lost = 0,
      empty = 0; // polls in a row that brought no result
    for (;;) {
      if (Date.now() > deadline)
        throw new TinkerError(
          `${this.o.url}: ${what} (request ${requestId}) is not done after ${this.o.futureTimeoutMs / 1000} s`,
          "the server is overloaded or stuck; look at its log",
        );
      let res: RawResponse;
      const polled = Date.now();
      const again = () => this.pollPause(empty++, polled, signal);
      try {
        res = await this.once(
          "/api/v1/retrieve_future",
          JSON.stringify({ request_id: requestId, allow_metadata_only: false }),
          { "Content-Type": "application/json", Accept: accept },
          `${what} (request ${requestId})`,
          signal,
        );
        lost = 0;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (e instanceof TinkerError) throw e;
        if (++lost > this.o.maxRetries)
          throw new TinkerError(
            `${this.o.url}: lost the server while waiting for ${what} (${(e as Error).message})`,
            "is the server still running? once it is back, continue the run with --resume",
          );
        const wait = backoff(attempt++);
        this.o.log?.(
          `tinker: ${this.o.url} does not answer (${(e as Error).message}); retrying in ${(wait / 1000).toFixed(1)} s`,
        );
        await sleep(wait, signal);
        continue;
      }
      if (res.status === 408) {
        await again();
        continue;
      }
      if (res.status === 429 || res.status >= 500) {
        await sleep(backoff(attempt++), signal);
        continue;
      }
      if (res.status === 400 && ++badRequests <= 3) {
        await again();
        continue;
      }
      if (res.status >= 300) throw this.failure(`${what} (request ${requestId})`, res.status, messageOf(res.body));
      if (res.contentType.includes("application/x-protobuf")) return { bytes: res.body };
      const json = this.parseJson(res, what);
      if (json.type === "try_again") {
        await again();
        continue;
      }
      if ("error" in json)
        throw new TinkerError(
          `${this.o.url}: ${what} failed on the server: ${String(json.error)}${json.category ? ` (${String(json.category)} error)` : ""}`,
        );
      if (proto && this.proto)
        throw new TinkerError(
          `${this.o.url}: ${what} came back as JSON, but SDK ${this.o.sdkVersion} reads it only as protobuf`,
          "the server speaks the JSON generation: set engine.tinker.sdkVersion to 0.24.1",
        );
      return { json };
    }
  }
}

/** The useful part of a fetch failure ("connect ECONNREFUSED 127.0.0.1:9"). */
function causeOf(e: Error): string {
  const cause = (e as Error & { cause?: { message?: string; code?: string } }).cause;
  return cause?.message ?? cause?.code ?? e.message;
}
