/**
 * `agent-r1 serve --tinker`: the local engine behind the Tinker HTTP protocol (routes and an error
 * mapper on the HTTP kit, src/http/), so a trainer on one machine can use an engine on another, and
 * so the Tinker client is tested end to end. Both wire generations: JSON bodies and results (SDK ≤ 0.24.1), and protobuf forward_backward
 * bodies (optionally zstd) with protobuf sample and forward_backward results for a client that
 * accepts them (SDK ≥ 0.25), through SDK 0.31 (sdk-support.ts: per-sequence sample ids,
 * retrieve_futures, client/dynamic_config, cancel_future). Routes under /api/v1: healthz,
 * get_server_capabilities, client/config, client/dynamic_config, create_session,
 * session_heartbeat, create_model, get_info, unload_model, forward_backward, forward, optim_step,
 * save_weights, load_weights, save_weights_for_sampler, create_sampling_session, asample,
 * retrieve_future, retrieve_futures, cancel_future, and auth/token with the test JWT issuer.
 *
 * Errors are answered as Tinker-protocol servers do: a 4xx/5xx status with `{"detail": message}`;
 * a future that fails answers `{"error", "category"}` with 200, the form the SDK reads. Host and
 * Origin are checked as for `serve` (util/host-guard.ts); with an API key every /api route needs
 * `X-API-Key` (an empty key is refused at start), and with the test JWT issuer on loopback (option
 * `jwt`) a token exchanged for it at auth/token (auth-gate.ts, jwt-issuer.ts). Bodies past the limit, compressed or once
 * decompressed, get 413 (a zstd body is bounded before it is inflated); a body that does not
 * decode, 422; a field of the wrong type or range, 400 naming it; the server keeps serving.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { InputError } from "../../util/errors.js";
import { HostGuard } from "../../util/host-guard.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { HttpError } from "../../http/errors.js";
import { mediaType, parseJson, readBody } from "../../http/body.js";
import { admit } from "../../http/guards.js";
import { RouteTable } from "../../http/routes.js";
import { sendBytes, sendJson } from "../../http/send.js";
import { checkPort, startHttpServer } from "../../http/server.js";
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
import { tinkerGate } from "./auth-gate.js";
import { checkLoopback, JwtIssuer } from "./jwt-issuer.js";

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
  /** How long retrieve_future waits for a result before answering try_again (and retrieve_futures for a completion). Default 30 s. */
  pollMs?: number;
  /**
   * Test only, on loopback: issue JWTs for the API key at auth/token (client config
   * `pjwt_auth_enabled`), lasting `ttlS` seconds (default 900); every other route then takes a
   * token, not the key. Needs apiKey. `now` (ms) is the issuer's clock (tests move it).
   */
  jwt?: { ttlS?: number; now?: () => number };
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

const send = (res: ServerResponse, status: number, body: unknown) => sendJson(res, status, body);
const sendProto = (res: ServerResponse, bytes: Uint8Array) => sendBytes(res, 200, "application/x-protobuf", bytes);

/** A POST body: JSON (an object) or protobuf bytes, zstd-compressed or not. */
async function readTinkerBody(req: IncomingMessage, limit: number): Promise<Body> {
  const bytes = await readBody(req, limit, { zstd: true });
  const type = mediaType(req);
  if (type === "application/x-protobuf") return { raw: bytes, proto: bytes };
  if (type !== "application/json")
    throw new HttpError(415, `the body must be application/json or application/x-protobuf, got '${type || "none"}'`);
  const text = bytes.toString("utf8");
  const json = parseJson(text, 422);
  if (!json || typeof json !== "object" || Array.isArray(json))
    throw new HttpError(422, "the body must be a JSON object");
  return { raw: text, json: json as Record<string, unknown> };
}

const jsonOf = (b: Body, route: string): Record<string, unknown> => {
  if (!b.json) throw new TinkerError(`${route} takes a JSON body`, undefined, 415);
  return b.json;
};

export async function startTinkerServer(o: TinkerServerOptions): Promise<RunningTinkerServer> {
  const host = o.host ?? "127.0.0.1";
  const port = o.port ?? 8000;
  checkPort(port, "serve --tinker");
  if (o.baseModels.size === 0) throw new InputError("serve --tinker: give at least one --model directory");
  const guard = new HostGuard({ bound: host, allowHosts: o.allowHosts, allowOrigins: o.allowOrigins });
  let issuer: JwtIssuer | undefined;
  if (o.jwt) {
    checkLoopback(host);
    if (o.apiKey === undefined)
      throw new InputError("serve --tinker: the test JWT issuer (option jwt) needs an apiKey to exchange");
    issuer = new JwtIssuer(o.jwt.ttlS, o.jwt.now);
  }
  const gate = tinkerGate(o.apiKey, issuer);
  const limit = o.bodyLimit ?? 64 << 20;
  const pollMs = o.pollMs ?? 30_000;
  const log = o.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const service = new TinkerService({ ...o, log });

  const routes = tinkerRoutes(service, limit, pollMs, issuer);

  const http = await startHttpServer({
    name: "serve --tinker",
    host,
    port,
    async handle(req, res) {
      const { path } = admit(req, res, guard);
      if (gate && path.startsWith("/api/")) gate(path, req.headers);
      await routes.run(req, res, path, (method, p) => `Not Found: ${method} ${p}`, undefined);
    },
    answerError(e, req, res) {
      const status =
        e instanceof TinkerError || e instanceof HttpError ? e.status : e instanceof InputError ? 400 : 500;
      const message = e instanceof Error ? e.message : String(e);
      if (status >= 500)
        log(`serve --tinker: ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? message) : message}`);
      send(res, status, { detail: status >= 500 ? `internal error: ${message}` : message });
    },
  });
  let closing: Promise<void> | undefined;
  return {
    url: http.url,
    port: http.port,
    service,
    close() {
      closing ??= http.close().then(() => service.close());
      return closing;
    },
  };
}

/** The protocol's routes over the service; each reads its body first (a POST's), then runs. */
function tinkerRoutes(service: TinkerService, limit: number, pollMs: number, issuer?: JwtIssuer): RouteTable {
  const future = (request_id: string) => ({ request_id });
  const table: Record<string, (b: Body, req: IncomingMessage, res: ServerResponse) => Promise<void> | void> = {
    "GET /api/v1/healthz": (_b, _q, res) => send(res, 200, { status: "ok" }),
    "GET /api/v1/get_server_capabilities": (_b, _q, res) => send(res, 200, service.capabilities()),
    "POST /api/v1/client/config": (_b, _q, res) => send(res, 200, service.clientConfig(issuer !== undefined)),
    "POST /api/v1/client/dynamic_config": (_b, _q, res) => send(res, 200, service.dynamicConfig()),
    "POST /api/v1/auth/token": (_b, _q, res) => {
      if (!issuer)
        throw new TinkerError(
          "this server issues no JWTs (its client config says pjwt_auth_enabled: false); send the API key itself",
          undefined,
          404,
        );
      send(res, 200, { jwt: issuer.issue() });
    },
    "POST /api/v1/create_session": (b, _q, res) => send(res, 200, service.createSession(b.json ?? {})),
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
    "POST /api/v1/asample": (b, _q, res) => send(res, 200, service.asample(jsonOf(b, "asample"))),
    "POST /api/v1/retrieve_futures": async (b, _q, res) =>
      send(res, 200, await service.retrieveFutures(jsonOf(b, "retrieve_futures"), pollMs)),
    "POST /api/v1/cancel_future": (b, _q, res) => send(res, 200, service.cancelFuture(jsonOf(b, "cancel_future"))),
    "POST /api/v1/retrieve_future": async (b, req, res) => {
      const body = jsonOf(b, "retrieve_future");
      const settled = await service.retrieve(body.request_id, pollMs);
      if (!settled) return send(res, 200, { type: "try_again", request_id: body.request_id, queue_state: "active" });
      if (!settled.ok) return send(res, 200, { error: settled.error, category: settled.category });
      const proto = (req.headers.accept ?? "").includes("application/x-protobuf");
      if (settled.kind === "sample")
        return proto
          ? sendProto(res, encodeSampleResponseProto(settled.value as SampleResponse))
          : send(res, 200, sampleResponseToJson(settled.value as SampleResponse));
      if (settled.kind === "forward_backward")
        return proto
          ? sendProto(res, encodeForwardBackwardOutputProto(settled.value as ForwardBackwardOutput))
          : send(res, 200, forwardBackwardOutputToJson(settled.value as ForwardBackwardOutput));
      return send(res, 200, settled.value);
    },
  };

  // Every route reads its body first (POST), then runs.
  return new RouteTable(
    Object.fromEntries(
      Object.entries(table).map(([route, run]) => [
        route,
        async (req: IncomingMessage, res: ServerResponse) =>
          run(req.method === "POST" ? await readTinkerBody(req, limit) : { raw: "" }, req, res),
      ]),
    ),
  );
}

/**
 * A protobuf forward_backward body: a field it refuses keeps its status (400 naming the field, 422
 * for a body that does not decode); anything else the decoder throws is a 422.
 */
function decodeProto(bytes: Uint8Array) {
  try {
    return decodeForwardBackwardProto(bytes);
  } catch (e) {
    if (e instanceof TinkerError) throw e;
    const message = e instanceof Error ? e.message : String(e);
    throw new TinkerError(`the ForwardBackwardRequest body does not decode: ${message}`, undefined, 422);
  }
}
