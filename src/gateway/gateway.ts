/**
 * The recording gateway: an OpenAI-compatible chat-completions endpoint in front of the policy
 * engine, one base URL per episode (`{url}/episodes/{id}/v1`), so an agent written with any client
 * library (the `openai` client, the Vercel AI SDK, the OpenAI Agents SDK, LangChain.js) plays an
 * episode unchanged while every completion is recorded token for token (episode-recorder.ts).
 * Routes, under each episode's base URL: POST /chat/completions (./chat-route.ts: tools, streaming
 * or not, logprobs), POST /responses (the Responses API, ./responses-route.ts: its items recorded as the
 * equivalent chat messages), GET /models. The request body is checked as `agent-r1 serve` checks
 * it (src/serve/schemas.ts, src/serve/responses-schema.ts); errors are OpenAI error objects. Bound
 * to loopback by default, on the HTTP kit (src/http/), whose Host/Origin check it shares.
 *
 * Each episode has a key of its own (`EpisodeHandle.apiKey`, compared in constant time): a request to
 * an episode's URL with another episode's key is a 401, so an agent reaches only its own episode even
 * when it learns another's URL. Every refusal that a retry cannot change is a status the OpenAI
 * clients do not retry (400, 401, 403, 404, 405, 410, 413, 415); only a second request while one
 * runs is a 409, which can succeed once the first is answered. Limits end the episode as the
 * built-in rollout ends it (episode-recorder.ts): past maxTurns a 400 `max_turns_reached`, past
 * maxTotalTokens a 400 `context_length_exceeded`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { bearerKey, secretMatcher } from "../util/secret.js";
import { HostGuard } from "../util/host-guard.js";
import { admit } from "../http/guards.js";
import { RouteTable } from "../http/routes.js";
import { startHttpServer, type HttpServer } from "../http/server.js";
import type { AgentMessage } from "../agent/chat-setup.js";
import { conversationText, rowQuotes } from "./row-quotes.js";
import { registerGateway } from "./episode-fetch.js";
import { ApiError, toApiError } from "../serve/errors.js";
import { readJsonBody, sendJson } from "../serve/http.js";
import { ResponseStore } from "../serve/responses-store.js";
import { EpisodeRecorder, RecorderError, type RecorderOptions } from "./episode-recorder.js";
import { episodeResponses } from "./responses-route.js";
import { episodeChat } from "./chat-route.js";

export interface GatewayOptions extends Omit<RecorderOptions, "seed"> {
  /** The model name agents must ask for. Default "policy". */
  model?: string;
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Unexpected errors. Default: stderr. */
  log?: (line: string) => void;
}

export interface EpisodeHandle {
  id: string;
  /** The base URL an agent's client takes (`.../episodes/{id}/v1`). */
  baseURL: string;
  /** The key its requests must send (`Authorization: Bearer KEY`): this episode's, no other's. */
  apiKey: string;
  recorder: EpisodeRecorder;
}

/** A live episode: its recorder, the check of its own key, and its Responses-API responses. */
interface LiveEpisode {
  recorder: EpisodeRecorder;
  keyMatches: (given?: string) => boolean;
  responses: ResponseStore;
  rowIndex: number;
  /** What the episode's row says, to tell its conversation from another row's (row-quotes.ts). */
  quotes: string[];
}

/** An episode's body limit: a long conversation with its tools fits. */
const BODY_LIMIT = 4 << 20;

export class Gateway {
  private readonly episodes = new Map<string, LiveEpisode>();
  private server?: HttpServer;
  private base = "";
  readonly model: string;

  constructor(private readonly o: GatewayOptions) {
    this.model = o.model ?? "policy";
  }

  get url(): string {
    if (!this.server) throw new Error("internal: the gateway is not started");
    return this.base;
  }

  async start(): Promise<this> {
    const host = this.o.host ?? "127.0.0.1";
    const guard = new HostGuard({ bound: host });
    const log = this.o.log ?? ((l: string) => process.stderr.write(l + "\n"));
    this.server = await startHttpServer({
      name: "gateway",
      host,
      port: this.o.port ?? 0,
      drainMs: 0,
      handle: (req, res) => this.handle(guard, req, res),
      answerError(e, req, res) {
        const err = e instanceof RecorderError ? new ApiError(e.status, e.message, { code: e.code }) : toApiError(e);
        if (err.status >= 500) log(`gateway: ${req.url}: ${(e as Error).stack ?? e}`);
        sendJson(res, err.status, err.body(), err.opts.headers);
      },
    });
    this.base = this.server.url;
    registerGateway(this.base);
    return this;
  }

  /** A new episode: its base URL and its own key. */
  open(meta: { rowIndex: number; sampleIndex: number; seed?: number; row?: unknown }): EpisodeHandle {
    const id = `e${meta.rowIndex}-${meta.sampleIndex}-${randomBytes(4).toString("hex")}`;
    const { model: _m, host: _h, port: _p, log: _l, ...rec } = this.o;
    const quotes = meta.row === undefined ? [] : rowQuotes(meta.row);
    const recorder = new EpisodeRecorder(id, meta.rowIndex, meta.sampleIndex, {
      ...rec,
      seed: meta.seed,
      otherRow: (messages) => this.otherRow(meta.rowIndex, quotes, messages),
    });
    const apiKey = `agent-r1-${randomBytes(16).toString("hex")}`;
    this.episodes.set(id, {
      recorder,
      keyMatches: secretMatcher(apiKey, "gateway"),
      responses: new ResponseStore(),
      rowIndex: meta.rowIndex,
      quotes,
    });
    return { id, baseURL: `${this.url}/episodes/${id}/v1`, apiKey, recorder };
  }

  /** The row of another live episode that `messages` quote, when they quote nothing of row `own` (`mine`). */
  private otherRow(own: number, mine: string[], messages: AgentMessage[]): number | undefined {
    if (mine.length === 0) return undefined;
    const text = conversationText(messages);
    if (mine.some((q) => text.includes(q))) return undefined;
    for (const e of this.episodes.values())
      if (e.rowIndex !== own && e.quotes.some((q) => text.includes(q))) return e.rowIndex;
    return undefined;
  }

  /** Forgets an episode: a completion still sampling for it stops, and later requests to its URL are 404s. */
  close(id: string): void {
    this.episodes.get(id)?.recorder.close();
    this.episodes.delete(id);
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    await s?.close();
  }

  /** The routes under an episode's base URL, given the episode. */
  private readonly routes = new RouteTable<LiveEpisode>({
    "GET /models": (_req, res) =>
      sendJson(res, 200, { object: "list", data: [{ id: this.model, object: "model", owned_by: "agent-r1" }] }),
    "POST /responses": async (req, res, _p, entry) =>
      episodeResponses(
        { recorder: entry.recorder, store: entry.responses, model: this.model, temperature: this.o.temperature },
        await readJsonBody(req, BODY_LIMIT),
        res,
        req.headers["user-agent"],
      ),
    "POST /chat/completions": async (req, res, _p, entry) =>
      episodeChat(
        { recorder: entry.recorder, model: this.model, chat: this.o.chat },
        await readJsonBody(req, BODY_LIMIT),
        res,
        req.headers["user-agent"],
      ),
  });

  private async handle(guard: HostGuard, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { path } = admit(req, res, guard);
    const m = /^\/episodes\/([A-Za-z0-9-]+)\/v1(\/.*)$/.exec(path);
    if (!m)
      throw new ApiError(404, `Unknown route: ${req.method} ${req.url}; episodes live under /episodes/{id}/v1`, {
        code: "unknown_url",
      });
    const entry = this.episodes.get(m[1]);
    if (!entry)
      throw new ApiError(
        404,
        `no episode ${m[1]} (it has ended, or never began): an agent whose own episode this is not has a client shared across episodes; make the client inside agent() from ctx.baseURL and ctx.apiKey`,
        { code: "episode_not_found" },
      );
    if (!entry.keyMatches(bearerKey(req.headers.authorization)))
      throw new ApiError(
        401,
        `the API key is missing or is not episode ${m[1]}'s (each episode has its own: pass the apiKey the rollout gave this episode's agent)`,
        { code: "invalid_api_key" },
      );
    await this.routes.run(
      req,
      res,
      m[2],
      (method, p) =>
        `Unknown route: ${method} ${p}; the gateway serves POST /chat/completions, POST /responses and GET /models`,
      entry,
    );
  }
}
