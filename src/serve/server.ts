/**
 * The OpenAI-compatible HTTP server over one engine (a LocalEngine it loads from a model directory,
 * or one given): its routes and its error mapper on the HTTP kit (src/http/: listen, guards, body
 * reader, route table, drain on close). Every request goes straight to the engine, so concurrent
 * requests share its continuous batching. Routes:
 *   POST /v1/chat/completions, POST /v1/completions (with vLLM's token-id fields),
 *   POST /v1/responses (the Responses API, ./responses.ts), GET and DELETE /v1/responses/{id},
 *   GET /v1/models, GET /v1/models/{id}, GET /health,
 *   POST /generate and /update_weights_from_disk (SGLang's, ./sglang.ts; RL samplers use them),
 *   POST /v1/load_lora_adapter, /v1/unload_lora_adapter (vLLM's) and /load_lora_adapter,
 *   /unload_lora_adapter (SGLang's): LoRA adapters over the served weights, which requests then
 *   name as their model (./lora-routes.ts, ./lora-adapters.ts; the native engine).
 * Every failure is answered with the OpenAI error object and a 4xx/5xx
 * status; the server keeps serving.
 *
 * Before any route: the request target must parse (400), Host and Origin must
 * be ones this server answers (403, see util/host-guard.ts), and with an API
 * key every route but /health needs `Authorization: Bearer KEY` (401). JSON routes
 * need `Content-Type: application/json` (415). Per-request limits on
 * sequences, tokens and response bytes are in request-limits.ts.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { basename, resolve } from "node:path";
import type { LocalEngine, LocalEngineOptions } from "../engine/local/local-engine.js";
import { InputError } from "../util/errors.js";
import { HostGuard, preflightHeaders } from "../util/host-guard.js";
import { admit, keyGate, type KeyGate } from "../http/guards.js";
import { RouteTable } from "../http/routes.js";
import { checkPort, startHttpServer } from "../http/server.js";
import { chatCompletions } from "./chat-completions.js";
import { generate, updateWeightsFromDisk } from "./sglang.js";
import { completions } from "./completions.js";
import { ServeContext, type ServedEngine } from "./context.js";
import { toApiError } from "./errors.js";
import { LoraAdapters } from "./lora-adapters.js";
import { sglangLoadAdapter, sglangUnloadAdapter, vllmLoadAdapter, vllmUnloadAdapter } from "./lora-routes.js";
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
  /** A directory whose model directories POST /update_weights_from_disk, and whose LoRA adapters the load_lora_adapter routes, may load (an RL trainer's weights); unset refuses those routes. */
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

/** The OpenAI-compatible routes over one engine. */
function serveRoutes(
  ctx: ServeContext,
  adapters: LoraAdapters,
  stored: ResponseStore,
  limit: number,
  weightsFrom?: string,
): RouteTable {
  const body = (req: IncomingMessage) => readJsonBody(req, limit);
  return new RouteTable({
    "POST /v1/chat/completions": async (req, res) => chatCompletions(ctx, await body(req), res),
    "POST /v1/completions": async (req, res) => completions(ctx, await body(req), res),
    "POST /v1/responses": async (req, res) => responses(ctx, stored, await body(req), res),
    "GET /v1/responses/:id": (_req, res, p) => retrieveResponse(stored, p.id, res),
    "DELETE /v1/responses/:id": (_req, res, p) => deleteResponse(stored, p.id, res),
    "GET /v1/models": (_req, res) => sendJson(res, 200, { object: "list", data: modelCards(ctx) }),
    "GET /v1/models/*id": (_req, res, p) => {
      ctx.checkModel(p.id);
      sendJson(res, 200, modelCards(ctx).find((m) => m.id === p.id) ?? modelCards(ctx)[0]);
    },
    "GET /health": (_req, res) => sendJson(res, 200, { status: "ok", model: ctx.modelId }),
    "POST /generate": async (req, res) => generate(ctx, await body(req), res),
    "POST /update_weights_from_disk": async (req, res) => updateWeightsFromDisk(ctx, await body(req), res, weightsFrom),
    "POST /v1/load_lora_adapter": async (req, res) => vllmLoadAdapter(adapters, await body(req), res),
    "POST /v1/unload_lora_adapter": async (req, res) => vllmUnloadAdapter(adapters, await body(req), res),
    "POST /load_lora_adapter": async (req, res) => sglangLoadAdapter(adapters, await body(req), res),
    "POST /unload_lora_adapter": async (req, res) => sglangUnloadAdapter(adapters, await body(req), res),
  });
}

export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  if (!opts.engine && !opts.model) throw new InputError("serve: a model directory (or a loaded engine) is required");
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port ?? 8000;
  checkPort(port, "serve");
  const limits = requestLimits(opts);
  const guard = new HostGuard({ bound: host, allowHosts: opts.allowHosts, allowOrigins: opts.allowOrigins });
  const apiKey =
    opts.apiKey !== undefined
      ? keyGate(opts.apiKey, {
          server: "serve",
          missing:
            "this server requires an API key: send it as 'Authorization: Bearer KEY' (the openai client's apiKey)",
          wrong: "the API key is not the one this server was started with",
        })
      : undefined;
  const loaded = opts.engine ? undefined : await loadLocalEngine(opts.model!, opts.engineOptions);
  const engine: ServedEngine = opts.engine ?? loaded!;
  const dir = opts.model ?? sourceDirectoryOf(engine);
  const modelId = opts.name ?? (dir !== undefined ? basename(resolve(dir)) : "model");
  const log = opts.log ?? ((line: string) => process.stderr.write(line + "\n"));
  const adapters = new LoraAdapters(engine, opts.weightsFrom, modelId, log);
  const ctx = new ServeContext(modelId, engine, opts.defaultMaxTokens, limits, adapters);
  const routes = serveRoutes(
    ctx,
    adapters,
    new ResponseStore(),
    opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
    opts.weightsFrom,
  );

  let http;
  try {
    http = await startHttpServer({
      name: "serve",
      host,
      port,
      handle: (req, res) => handle(routes, guard, apiKey, req, res),
      answerError(e, req, res) {
        const err = toApiError(e);
        if (err.status >= 500)
          log(`serve: ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        sendJson(res, err.status, err.body(), err.opts.headers);
      },
    });
  } catch (e) {
    await loaded?.dispose();
    throw e;
  }
  let closing: Promise<void> | undefined;
  return {
    url: http.url,
    host,
    port: http.port,
    modelId,
    engine,
    close() {
      closing ??= http.close().then(() => {
        adapters.clear();
        return loaded?.dispose();
      });
      return closing;
    },
  };
}

async function handle(
  routes: RouteTable,
  guard: HostGuard,
  apiKey: KeyGate | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { path } = admit(req, res, guard);
  // A CORS preflight (it carries no credentials); the guard has already vetted its Origin.
  if (
    req.method === "OPTIONS" &&
    req.headers.origin !== undefined &&
    req.headers["access-control-request-method"] !== undefined
  ) {
    res.writeHead(204, preflightHeaders(req.headers, "GET, POST, OPTIONS")).end();
    return;
  }
  if (apiKey && path !== "/health") apiKey.check(req.headers);
  await routes.run(req, res, path, (method, p) => `Unknown route: ${method} ${p}`, undefined);
}

/** The served model, then each loaded LoRA adapter (its `parent` the model, its `root` the directory it came from). */
function modelCards(ctx: ServeContext) {
  const card = (id: string, more: Record<string, string> = {}) => ({
    id,
    object: "model",
    created: ctx.created,
    owned_by: "agent-r1",
    max_model_len: ctx.engine.config.maxPositionEmbeddings,
    ...more,
  });
  return [
    card(ctx.modelId),
    ...(ctx.adapters?.list() ?? []).map(([name, a]) => card(name, { parent: ctx.modelId, root: a.source })),
  ];
}
