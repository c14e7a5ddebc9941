/**
 * `agent-r1 serve --tinker`: the local engine behind the Tinker HTTP protocol (node:http), so a
 * trainer on one machine can use an engine on another, and so the Tinker client is tested end to
 * end. Both wire generations: JSON bodies and results (SDK ≤ 0.24.1), and protobuf forward_backward
 * bodies (optionally zstd) with protobuf sample and forward_backward results for a client that
 * accepts them (SDK ≥ 0.25). Routes under /api/v1: healthz, get_server_capabilities, client/config,
 * create_session, session_heartbeat, create_model, get_info, unload_model, forward_backward,
 * forward, optim_step, save_weights, load_weights, save_weights_for_sampler,
 * create_sampling_session, asample, retrieve_future.
 *
 * Errors are answered as Tinker-protocol servers do: a 4xx/5xx status with `{"detail": message}`;
 * a future that fails answers `{"error", "category"}` with 200, the form the SDK reads. Host and
 * Origin are checked as for `serve` (util/host-guard.ts); with an API key every /api route needs
 * `X-API-Key` (an empty key is refused at start). Bodies past the limit, compressed or once
 * decompressed, get 413 (a zstd body is bounded before it is inflated); a body that does not
 * decode, 422; a field of the wrong type or range, 400 naming it; the server keeps serving.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { secretMatcher } from "../../util/secret.js";
import { InputError } from "../../util/errors.js";
import { HostGuard } from "../../util/host-guard.js";
import { parseRequestTarget } from "../../util/request-target.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { DecompressLimitError, zstdDecompress } from "../../engine/remote/zstd.js";
import {
  decodeForwardBackwardProto,
  encodeForwardBackwardOutputProto,
  encodeSampleResponseProto,
  forwardBackwardOutputToJson,
  sampleResponseToJson,
  type ForwardBackwardOutput,
  type SampleResponse,
} from "../../engine/remote/tinker-codec.js";
import { TinkerService, type TinkerServiceOptions } from "./service.js";

export interface TinkerServerOptions extends TinkerServiceOptions {
  host?: string;
  /** 0 picks a free port. Default 8000. */
  port?: number;
  /** Required as X-API-Key on every /api route when set. */
  apiKey?: string;
  allowHosts?: string[];
  allowOrigins?: string[];
  /** Request bodies past this many bytes (compressed, or decompressed) get 413. Default 64 MiB. */
  bodyLimit?: number;
  /** How long retrieve_future waits for a result before answering try_again. Default 30 s. */
  pollMs?: number;
}

export interface RunningTinkerServer {
  url: string;
  port: number;
  service: TinkerService;
  close(): Promise<void>;
}

interface Body {
  raw: string | Uint8Array;
  json?: Record<string, unknown>;
  proto?: Uint8Array;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function sendBytes(res: ServerResponse, bytes: Uint8Array): void {
  res.writeHead(200, { "Content-Type": "application/x-protobuf", "Content-Length": bytes.byteLength });
  res.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

const tooLarge = (limit: number, what = "is larger than") =>
  new TinkerError(`the request body ${what} ${limit} bytes, this server's limit (bodyLimit)`, undefined, 413);

async function readBody(req: IncomingMessage, limit: number): Promise<Body> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > limit) throw tooLarge(limit);
      chunks.push(c as Buffer);
    }
  } catch (e) {
    if (e instanceof TinkerError) throw e;
    // The client went away mid-body: nothing to answer, and not an error of the server.
    throw new TinkerError(`the request body was cut off: ${(e as Error).message}`);
  }
  let bytes: Uint8Array = Buffer.concat(chunks);
  const encoding = (req.headers["content-encoding"] ?? "identity").toLowerCase();
  if (encoding === "zstd") {
    try {
      // Bounded before it allocates: a frame declaring more than the limit is refused unread.
      bytes = await zstdDecompress(bytes, limit);
    } catch (e) {
      if (e instanceof DecompressLimitError) throw tooLarge(limit, "decompresses to more than");
      throw new TinkerError(`the zstd body does not decompress: ${(e as Error).message}`, undefined, 422);
    }
  } else if (encoding !== "identity")
    throw new TinkerError(`Content-Encoding '${encoding}' is not accepted (zstd is)`, undefined, 415);
  const type = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  if (type === "application/x-protobuf") return { raw: bytes, proto: bytes };
  if (type !== "application/json")
    throw new TinkerError(
      `the body must be application/json or application/x-protobuf, got '${type || "none"}'`,
      undefined,
      415,
    );
  const text = Buffer.from(bytes).toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TinkerError(`the body is not valid JSON: ${(e as Error).message}`, undefined, 422);
  }
  if (!json || typeof json !== "object" || Array.isArray(json))
    throw new TinkerError("the body must be a JSON object", undefined, 422);
  return { raw: text, json: json as Record<string, unknown> };
}

const jsonOf = (b: Body, route: string): Record<string, unknown> => {
  if (!b.json) throw new TinkerError(`${route} takes a JSON body`, undefined, 415);
  return b.json;
};

export async function startTinkerServer(o: TinkerServerOptions): Promise<RunningTinkerServer> {
  const host = o.host ?? "127.0.0.1";
  const port = o.port ?? 8000;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InputError(`serve --tinker: the port must be an integer in [0, 65535], got ${port}`);
  if (o.baseModels.size === 0) throw new InputError("serve --tinker: give at least one --model directory");
  const guard = new HostGuard({ bound: host, allowHosts: o.allowHosts, allowOrigins: o.allowOrigins });
  const keyMatches = o.apiKey !== undefined ? secretMatcher(o.apiKey, "serve --tinker") : undefined;
  const limit = o.bodyLimit ?? 64 << 20;
  const pollMs = o.pollMs ?? 30_000;
  const log = o.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const service = new TinkerService({ ...o, log });

  const future = (request_id: string) => ({ request_id });
  const routes: Record<string, (b: Body, req: IncomingMessage, res: ServerResponse) => Promise<void> | void> = {
    "GET /api/v1/healthz": (_b, _q, res) => send(res, 200, { status: "ok" }),
    "GET /api/v1/get_server_capabilities": (_b, _q, res) => send(res, 200, service.capabilities()),
    "POST /api/v1/client/config": (_b, _q, res) => send(res, 200, service.clientConfig()),
    "POST /api/v1/create_session": (_b, _q, res) => send(res, 200, service.createSession()),
    "POST /api/v1/session_heartbeat": (b, _q, res) => send(res, 200, service.heartbeat(jsonOf(b, "session_heartbeat"))),
    "POST /api/v1/create_model": (b, _q, res) => send(res, 200, future(service.createModel(jsonOf(b, "create_model")))),
    "POST /api/v1/get_info": (b, _q, res) => send(res, 200, service.getInfo(jsonOf(b, "get_info"))),
    "POST /api/v1/unload_model": (b, _q, res) => send(res, 200, future(service.unloadModel(jsonOf(b, "unload_model")))),
    "POST /api/v1/forward_backward": (b, _q, res) => {
      const id = b.proto
        ? service.forwardBackward(decodeProto(b.proto), b.raw)
        : service.forwardBackwardJson(jsonOf(b, "forward_backward"), b.raw as string, false);
      send(res, 200, future(id));
    },
    "POST /api/v1/forward": (b, _q, res) =>
      send(res, 200, future(service.forwardBackwardJson(jsonOf(b, "forward"), b.raw as string, true))),
    "POST /api/v1/optim_step": (b, _q, res) =>
      send(res, 200, future(service.optimStep(jsonOf(b, "optim_step"), b.raw as string))),
    "POST /api/v1/save_weights": (b, _q, res) =>
      send(res, 200, future(service.saveWeights(jsonOf(b, "save_weights"), b.raw as string))),
    "POST /api/v1/load_weights": (b, _q, res) =>
      send(res, 200, future(service.loadWeights(jsonOf(b, "load_weights"), b.raw as string))),
    "POST /api/v1/save_weights_for_sampler": (b, _q, res) =>
      send(res, 200, future(service.saveWeightsForSampler(jsonOf(b, "save_weights_for_sampler"), b.raw as string))),
    "POST /api/v1/create_sampling_session": (b, _q, res) =>
      send(res, 200, service.createSamplingSession(jsonOf(b, "create_sampling_session"))),
    "POST /api/v1/asample": (b, _q, res) => send(res, 200, future(service.asample(jsonOf(b, "asample")))),
    "POST /api/v1/retrieve_future": async (b, req, res) => {
      const body = jsonOf(b, "retrieve_future");
      const settled = await service.retrieve(body.request_id, pollMs);
      if (!settled) return send(res, 200, { type: "try_again", request_id: body.request_id, queue_state: "active" });
      if (!settled.ok) return send(res, 200, { error: settled.error, category: settled.category });
      const proto = (req.headers.accept ?? "").includes("application/x-protobuf");
      if (settled.kind === "sample")
        return proto
          ? sendBytes(res, encodeSampleResponseProto(settled.value as SampleResponse))
          : send(res, 200, sampleResponseToJson(settled.value as SampleResponse));
      if (settled.kind === "forward_backward")
        return proto
          ? sendBytes(res, encodeForwardBackwardOutputProto(settled.value as ForwardBackwardOutput))
          : send(res, 200, forwardBackwardOutputToJson(settled.value as ForwardBackwardOutput));
      return send(res, 200, settled.value);
    },
  };

  let inFlight = 0;
  const server: Server = createServer((req, res) => {
    inFlight++;
    res.on("close", () => inFlight--);
    handle(req, res).catch((e: unknown) => {
      const status = e instanceof TinkerError ? e.status : e instanceof InputError ? 400 : 500;
      const message = e instanceof Error ? e.message : String(e);
      if (status >= 500)
        log(`serve --tinker: ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? message) : message}`);
      if (!res.headersSent) send(res, status, { detail: status >= 500 ? `internal error: ${message}` : message });
      else res.end();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = parseRequestTarget(req.url);
    if (!target) throw new TinkerError(`malformed request target '${req.url}'`);
    const verdict = guard.check(req.headers);
    if (!verdict.ok) throw new TinkerError(verdict.message, undefined, 403);
    const path = target.pathname.replace(/\/+$/, "");
    if (keyMatches && path.startsWith("/api/")) {
      const given = req.headers["x-api-key"];
      if (!keyMatches(typeof given === "string" ? given : undefined))
        throw new TinkerError("this server requires its API key as X-API-Key", undefined, 401);
    }
    const route = routes[`${req.method} ${path}`];
    if (!route) throw new TinkerError(`Not Found: ${req.method} ${path}`, undefined, 404);
    const body: Body = req.method === "POST" ? await readBody(req, limit) : { raw: "" };
    await route(body, req, res);
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        e.code === "EADDRINUSE"
          ? new InputError(
              `serve --tinker: port ${port} on ${host} is already in use`,
              "pick another --port, or --port 0",
            )
          : e,
      ),
    );
    server.listen(port, host, () => resolve());
  });
  const actual = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${actual}`,
    port: actual,
    service,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        const t0 = Date.now();
        while (inFlight > 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
        server.closeAllConnections();
        await closed;
        await service.close();
      })();
      return closing;
    },
  };
}

/** A protobuf forward_backward body; anything that does not decode (whatever the decoder throws) is a 422. */
function decodeProto(bytes: Uint8Array) {
  try {
    return decodeForwardBackwardProto(bytes);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new TinkerError(
      e instanceof TinkerError ? message : `the ForwardBackwardRequest body does not decode: ${message}`,
      undefined,
      422,
    );
  }
}
