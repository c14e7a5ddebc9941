/**
 * The OpenAI-compatible HTTP server over one LocalEngine (node:http, no
 * framework). Every request goes straight to the engine, so concurrent
 * requests share its continuous batching. Routes:
 *   POST /v1/chat/completions, POST /v1/completions (with vLLM's token-id fields),
 *   POST /v1/responses (the Responses API, ./responses.ts), GET and DELETE /v1/responses/{id},
 *   GET /v1/models, GET /v1/models/{id}, GET /health,
 *   POST /generate and /update_weights_from_disk (SGLang's, ./sglang.ts; RL samplers use them).
 * Every failure is answered with the OpenAI error object and a 4xx/5xx
 * status; the server keeps serving.
 *
 * Before any route: the request target must parse (400), Host and Origin must
 * be ones this server answers (403, see util/host-guard.ts), and with an API
 * key every route but /health needs `Authorization: Bearer KEY` (401). JSON routes
 * need `Content-Type: application/json` (415). Per-request limits on
 * sequences, tokens and response bytes are in request-limits.ts.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { basename, resolve } from "node:path";
import type { LocalEngine, LocalEngineOptions } from "../engine/local/local-engine.js";
import { InputError } from "../util/errors.js";
import { HostGuard, preflightHeaders } from "../util/host-guard.js";
import { decodePathPart, parseRequestTarget } from "../util/request-target.js";
import { ApiKey } from "./api-key.js";
import { chatCompletions } from "./chat-completions.js";
import { generate, updateWeightsFromDisk } from "./sglang.js";
import { completions } from "./completions.js";
import { ServeContext, type ServedEngine } from "./context.js";
import { ApiError, badRequest, toApiError } from "./errors.js";
import { DEFAULT_BODY_LIMIT, readJsonBody, sendJson } from "./http.js";
import { requestLimits, type RequestLimits } from "./request-limits.js";
import { deleteResponse, responses, retrieveResponse } from "./responses.js";
import { ResponseStore } from "./responses-store.js";

export interface ServeOptions extends Partial<RequestLimits> {
  /** A Hugging Face model directory to load (or pass `engine`). */
  model?: string;
  /** An engine already loaded (or anything with its sample / computeLogprobs / tokenizer / config); the server does not dispose it on close. */
  engine?: ServedEngine;
  /** Model id clients see. Default: the model directory's basename (the engine's source directory for a given LocalEngine). */
  name?: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. Default 8000. */
  port?: number;
  /** Request bodies above this many bytes get a 413. Default 1 MiB. */
  bodyLimit?: number;
  /** New tokens for a chat request that sets no max_tokens. Default: the rest of the context window. */
  defaultMaxTokens?: number;
  /** Options for loading the engine from `model`. */
  engineOptions?: LocalEngineOptions;
  /** Where unexpected (500) errors are reported. Default: stderr. */
  log?: (line: string) => void;
  /** When set, every /v1 route requires `Authorization: Bearer <apiKey>` (/health stays open). */
  apiKey?: string;
  /** Host names accepted besides the bound address (and the loopback names when bound to loopback); "*" accepts any. */
  allowHosts?: string[];
  /** Origins whose web pages may call the server (CORS); "*" accepts any. Same-origin requests always may. */
  allowOrigins?: string[];
  /** A directory whose model directories POST /update_weights_from_disk may load (an RL trainer's weights); unset refuses the route. */
  weightsFrom?: string;
}

export interface RunningServer {
  /** http://host:port */
  url: string;
  host: string;
  port: number;
  modelId: string;
  engine: ServedEngine;
  /** Stops accepting connections, lets running requests finish (a few seconds at most), and disposes an engine the server loaded. */
  close(): Promise<void>;
}

type Handler = (ctx: ServeContext, req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Imported only when the server loads a model itself, so serving a given engine never loads TF.js. */
async function loadLocalEngine(dir: string, options: LocalEngineOptions | undefined): Promise<LocalEngine> {
  const { LocalEngine } = await import("../engine/local/local-engine.js");
  return LocalEngine.load(dir, options);
}

/** The directory a LocalEngine was loaded from; undefined for other engines. */
function sourceDirectoryOf(engine: ServedEngine): string | undefined {
  const dir = (engine as { sourceDirectory?: unknown }).sourceDirectory;
  return typeof dir === "string" ? dir : undefined;
}

export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  if (!opts.engine && !opts.model) throw new InputError("serve: a model directory (or a loaded engine) is required");
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port ?? 8000;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InputError(`serve: the port must be an integer in [0, 65535], got ${port}`);
  const limits = requestLimits(opts);
  const guard = new HostGuard({ bound: host, allowHosts: opts.allowHosts, allowOrigins: opts.allowOrigins });
  const apiKey = opts.apiKey !== undefined ? new ApiKey(opts.apiKey, "serve") : undefined;
  const loaded = opts.engine ? undefined : await loadLocalEngine(opts.model!, opts.engineOptions);
  const engine: ServedEngine = opts.engine ?? loaded!;
  const dir = opts.model ?? sourceDirectoryOf(engine);
  const modelId = opts.name ?? (dir !== undefined ? basename(resolve(dir)) : "model");
  const ctx = new ServeContext(modelId, engine, opts.defaultMaxTokens, limits);
  const limit = opts.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const log = opts.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const stored = new ResponseStore();

  const routes: Record<string, Partial<Record<string, Handler>>> = {
    "/v1/chat/completions": { POST: async (c, req, res) => chatCompletions(c, await readJsonBody(req, limit), res) },
    "/v1/completions": { POST: async (c, req, res) => completions(c, await readJsonBody(req, limit), res) },
    "/v1/responses": { POST: async (c, req, res) => responses(c, stored, await readJsonBody(req, limit), res) },
    "/v1/models": { GET: async (c, _req, res) => sendJson(res, 200, { object: "list", data: [modelCard(c)] }) },
    "/health": { GET: async (_c, _req, res) => sendJson(res, 200, { status: "ok", model: modelId }) },
    "/generate": { POST: async (c, req, res) => generate(c, await readJsonBody(req, limit), res) },
    "/update_weights_from_disk": {
      POST: async (c, req, res) => updateWeightsFromDisk(c, await readJsonBody(req, limit), res, opts.weightsFrom),
    },
    "/v1/load_lora_adapter": {
      POST: async () => {
        throw new ApiError(
          400,
          "this server serves full weights and loads no LoRA adapters (use /update_weights_from_disk)",
          {
            code: "lora_not_supported",
          },
        );
      },
    },
  };

  let inFlight = 0;
  let idle: (() => void) | undefined;
  const server = createServer((req, res) => {
    inFlight++;
    res.on("close", () => {
      inFlight--;
      if (inFlight === 0) idle?.();
    });
    handle({ ctx, routes, guard, apiKey, stored }, req, res).catch((e) => {
      const err = toApiError(e);
      if (err.status >= 500)
        log(`serve: ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      if (!res.headersSent) sendJson(res, err.status, err.body(), err.opts.headers);
      else res.end();
    });
  });

  try {
    await listen(server, port, host);
  } catch (e) {
    await loaded?.dispose();
    throw e;
  }
  const actual = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${actual}`,
    host,
    port: actual,
    modelId,
    engine,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        if (inFlight > 0) {
          await Promise.race([new Promise<void>((r) => (idle = r)), new Promise((r) => setTimeout(r, 5000).unref())]);
        }
        server.closeAllConnections();
        await closed;
        await loaded?.dispose();
      })();
      return closing;
    },
  };
}

interface Served {
  ctx: ServeContext;
  routes: Record<string, Partial<Record<string, Handler>>>;
  guard: HostGuard;
  apiKey?: ApiKey;
  /** The responses kept for previous_response_id and GET /v1/responses/{id}. */
  stored: ResponseStore;
}

async function handle(
  { ctx, routes, guard, apiKey, stored }: Served,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const target = parseRequestTarget(req.url);
  if (!target)
    throw badRequest(`malformed request target '${req.url}'; expected a path such as /v1/models`, null, "invalid_url");
  const verdict = guard.check(req.headers);
  if (!verdict.ok) throw new ApiError(403, verdict.message, { code: "forbidden" });
  for (const [k, v] of Object.entries(verdict.headers)) res.setHeader(k, v);
  const path = target.pathname.replace(/\/+$/, "") || "/";
  const method = req.method ?? "GET";
  // A CORS preflight (it carries no credentials); the guard has already vetted its Origin.
  if (
    method === "OPTIONS" &&
    req.headers.origin !== undefined &&
    req.headers["access-control-request-method"] !== undefined
  ) {
    res.writeHead(204, preflightHeaders(req.headers, "GET, POST, OPTIONS")).end();
    return;
  }
  if (apiKey && path !== "/health") apiKey.check(req.headers);
  if (path.startsWith("/v1/models/") && method === "GET") {
    const id = decodePathPart(path.slice("/v1/models/".length));
    if (id === undefined)
      throw badRequest(`malformed percent-encoding in the model id of '${path}'`, null, "invalid_url");
    ctx.checkModel(id);
    return sendJson(res, 200, modelCard(ctx));
  }
  if (path.startsWith("/v1/responses/") && (method === "GET" || method === "DELETE")) {
    const id = decodePathPart(path.slice("/v1/responses/".length));
    if (id === undefined)
      throw badRequest(`malformed percent-encoding in the response id of '${path}'`, null, "invalid_url");
    return method === "GET" ? retrieveResponse(stored, id, res) : deleteResponse(stored, id, res);
  }
  const route = routes[path];
  if (!route) throw new ApiError(404, `Unknown route: ${method} ${path}`, { code: "unknown_url" });
  const handler = route[method];
  if (!handler) {
    const allowed = Object.keys(route).join(", ");
    res.setHeader("Allow", allowed);
    throw new ApiError(405, `${path} accepts ${allowed}, not ${method}`, { code: "method_not_allowed" });
  }
  await handler(ctx, req, res);
}

function modelCard(ctx: ServeContext) {
  return {
    id: ctx.modelId,
    object: "model",
    created: ctx.created,
    owned_by: "agent-r1",
    max_model_len: ctx.engine.config.maxPositionEmbeddings,
  };
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const onError = (e: NodeJS.ErrnoException) => {
      if (e.code === "EADDRINUSE")
        reject(
          new InputError(
            `serve: port ${port} on ${host} is already in use`,
            "pick another --port, or --port 0 for a free one",
          ),
        );
      else if (e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND")
        reject(new InputError(`serve: cannot listen on host '${host}' (${e.code})`));
      else if (e.code === "EACCES")
        reject(
          new InputError(
            `serve: no permission to listen on port ${port}`,
            "ports below 1024 need privileges; pick another --port",
          ),
        );
      else reject(e);
    };
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolvePromise();
    });
  });
}
