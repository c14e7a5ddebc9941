/**
 * A live dashboard over one run directory: routes and an error mapper on the HTTP kit (src/http/).
 *
 *   GET /                  the page (static/page.ts)
 *   GET /app.js            its script: browser/app.ts, compiled by tsconfig.browser.json to
 *                          dist/browser/app.js (`npm run build`) and read once at start
 *   GET /chart.js          Chart.js's UMD build, from the installed package
 *   GET /api/info          { run, runDir, config }: the directory and its config.yaml text
 *   GET /api/metrics?after=N[&gen=G]
 *                          { generation, reset, after, total, skipped, records }: the metrics.jsonl
 *                          records from index N on; metrics.jsonl is re-read as it grows. When G is
 *                          not the current generation (the file was rewritten), every record is
 *                          returned with reset: true.
 *   GET /api/samples       { iterations }: iterations with a samples file, newest first
 *   GET /api/samples/N     { iteration, trajectories, skipped }
 *
 * It reads only regular files inside the run directory (run-files.ts), answers only Host
 * names and Origins it knows (util/host-guard.ts: 403 otherwise, so a DNS-rebinding page
 * cannot read the config or the samples), and a malformed request target gets a 400.
 *
 * With a key (`apiKey`), every route but /favicon.ico needs it, as `Authorization: Bearer KEY`,
 * or as the page's `?key=KEY` once: that answer sets an HttpOnly, SameSite=Strict cookie holding
 * the key and redirects to the same path without it, so the page's own requests carry the cookie
 * and the key leaves the address bar. Without the key: 401.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { existsSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, resolve } from "node:path";
import { InputError } from "../util/errors.js";
import { packageRoot } from "../util/package-root.js";
import { HostGuard } from "../util/host-guard.js";
import { bearerKey, secretMatcher } from "../util/secret.js";
import { HttpError } from "../http/errors.js";
import { admit } from "../http/guards.js";
import { RouteTable, type Handler } from "../http/routes.js";
import { startHttpServer } from "../http/server.js";
import { JsonlTail } from "./jsonl-tail.js";
import { readSamples, sampleIterations } from "./samples.js";
import { readRunFile, runFile } from "./run-files.js";
import { PAGE_HTML } from "./static/page.js";

export interface DashboardOptions {
  runDir: string;
  /** 0 picks a free port. Default 8765. */
  port?: number;
  /** Default 127.0.0.1 (this machine only). */
  host?: string;
  /** Host names accepted besides the bound address (and the loopback names when bound to loopback); "*" accepts any. */
  allowHosts?: string[];
  /** Origins whose pages may read the API (CORS); "*" accepts any. The dashboard's own page always may. */
  allowOrigins?: string[];
  /** When set, every request needs it (header, cookie, or `?key=` once); an empty key is refused. */
  apiKey?: string;
}

const COOKIE = "agent_r1_dashboard_key";

/** The key a request carries: Bearer header, then the dashboard's cookie. */
function keyOf(req: IncomingMessage): string | undefined {
  const bearer = bearerKey(req.headers.authorization);
  if (bearer !== undefined) return bearer;
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === COOKIE) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

export interface Dashboard {
  url: string;
  port: number;
  close(): Promise<void>;
}

export const DEFAULT_PORT = 8765;
export const DEFAULT_HOST = "127.0.0.1";

/** Throws an InputError naming what is missing unless `runDir` is a run directory with metrics. */
export function checkRunDir(runDir: string): void {
  if (!existsSync(runDir)) throw new InputError(`dashboard: run directory ${runDir} not found`);
  if (!statSync(runDir).isDirectory()) throw new InputError(`dashboard: ${runDir} is not a directory`);
  const metrics = join(runDir, "metrics.jsonl");
  if (!existsSync(metrics)) {
    throw new InputError(
      `dashboard: ${metrics} not found`,
      "not a run directory, or the run has not recorded its first iteration yet",
    );
  }
  if (runFile(runDir, metrics) === undefined)
    throw new InputError(
      `dashboard: ${metrics} is not a regular file inside the run directory`,
      "the dashboard does not follow links out of the run",
    );
}

/** Where Chart.js's UMD build is, resolved from this module (works from an installed package). */
export function chartJsPath(): string {
  const require = createRequire(import.meta.url);
  let main: string;
  try {
    main = require.resolve("chart.js");
  } catch {
    throw new InputError("dashboard: the chart.js package is not installed", "run npm install");
  }
  const umd = join(dirname(main), "chart.umd.js");
  if (!existsSync(umd)) throw new InputError(`dashboard: ${umd} not found in the installed chart.js`);
  return umd;
}

/**
 * Where the page's compiled script is: dist/browser/app.js in the package (the same file whether
 * this module runs from dist/src/ or from src/ under tsx). Throws an InputError when it was not built.
 */
export function appJsPath(): string {
  const file = join(packageRoot(), "dist", "browser", "app.js");
  if (!existsSync(file))
    throw new InputError(
      `dashboard: the page's script ${file} is missing`,
      "run npm run build: it compiles src/dashboard/browser/ with tsconfig.browser.json",
    );
  return file;
}

type Route = (url: URL, res: ServerResponse, params: Record<string, string>) => void;

/** The dashboard's routes: its page, its script, chart.js, and the run's info, metrics and samples; each answers HEAD too. */
function dashboardRoutes(runDir: string, appJs: Buffer, chartJs: Buffer): RouteTable<URL> {
  const tail = new JsonlTail(join(runDir, "metrics.jsonl"), { within: runDir });
  const absolute = resolve(runDir);
  const routes: Record<string, Route> = {
    "/": (_u, res) => send(res, 200, "text/html; charset=utf-8", PAGE_HTML),
    "/index.html": (_u, res) => send(res, 200, "text/html; charset=utf-8", PAGE_HTML),
    "/app.js": (_u, res) => send(res, 200, "text/javascript; charset=utf-8", appJs),
    "/chart.js": (_u, res) => send(res, 200, "text/javascript; charset=utf-8", chartJs, "public, max-age=3600"),
    "/api/info": (_u, res) =>
      json(res, 200, {
        run: basename(absolute),
        runDir: absolute,
        config: readRunFile(runDir, join(runDir, "config.yaml")) ?? null,
      }),
    "/api/metrics": (url, res) => {
      tail.refresh();
      const gen = url.searchParams.get("gen");
      const reset = gen !== null && Number(gen) !== tail.generation;
      const after = reset ? 0 : Math.max(0, Math.floor(Number(url.searchParams.get("after") ?? 0)) || 0);
      const records = tail.records;
      json(res, 200, {
        generation: tail.generation,
        reset,
        after,
        total: records.length,
        skipped: tail.skipped,
        records: records.slice(after),
      });
    },
    "/favicon.ico": (_u, res) => {
      res.writeHead(204).end();
    },
    "/api/samples": (_u, res) => json(res, 200, { iterations: sampleIterations(runDir) }),
    "/api/samples/:n": (url, res, p) => {
      if (!/^\d+$/.test(p.n)) return json(res, 404, { error: `not found: ${url.pathname}` });
      const s = readSamples(runDir, Number(p.n));
      return s ? json(res, 200, s) : json(res, 404, { error: `no samples for iteration ${p.n}` });
    },
  };
  const table: Record<string, Handler<URL>> = {};
  for (const [path, route] of Object.entries(routes)) {
    const handler: Handler<URL> = (_req, res, params, url) => route(url, res, params);
    table[`GET ${path}`] = handler;
    table[`HEAD ${path}`] = handler;
  }
  return new RouteTable(table);
}

/**
 * A request without the dashboard's key: one that brings it as ?key=KEY is sent on to the same
 * address with the key in an HttpOnly cookie (so the address bar and history lose it); any other gets 401.
 */
function refuseOrLogIn(keyMatches: (key: string | undefined) => boolean, url: URL, res: ServerResponse): void {
  const given = url.searchParams.get("key");
  if (given !== null && keyMatches(given)) {
    url.searchParams.delete("key");
    res.writeHead(303, {
      "Set-Cookie": `${COOKIE}=${encodeURIComponent(given)}; HttpOnly; SameSite=Strict; Path=/`,
      Location: url.pathname + url.search,
    });
    res.end();
    return;
  }
  res.setHeader("WWW-Authenticate", "Bearer");
  json(res, 401, {
    error: "this dashboard requires its key: open the address with ?key=KEY, or send 'Authorization: Bearer KEY'",
  });
}

/** Starts the server; resolves once it listens. */
export async function startDashboard(opts: DashboardOptions): Promise<Dashboard> {
  const runDir = opts.runDir;
  checkRunDir(runDir);
  const host = opts.host ?? DEFAULT_HOST;
  const port = opts.port ?? DEFAULT_PORT;
  const guard = new HostGuard({ bound: host, allowHosts: opts.allowHosts, allowOrigins: opts.allowOrigins });
  const keyMatches =
    opts.apiKey !== undefined
      ? secretMatcher(opts.apiKey, "dashboard", "--api-key (or AGENT_R1_DASHBOARD_KEY)")
      : undefined;
  const routes = dashboardRoutes(runDir, readFileSync(appJsPath()), readFileSync(chartJsPath()));

  const http = await startHttpServer({
    name: "dashboard",
    host,
    port,
    drainMs: 0,
    async handle(req, res) {
      const { url } = admit(req, res, guard);
      if (keyMatches && url.pathname !== "/favicon.ico" && !keyMatches(keyOf(req)))
        return refuseOrLogIn(keyMatches, url, res);
      if (req.method !== "GET" && req.method !== "HEAD")
        throw new HttpError(405, "method not allowed", null, { Allow: "GET, HEAD" });
      await routes.run(req, res, url.pathname, (_m, p) => `not found: ${p}`, url);
    },
    answerError(e, _req, res) {
      const status = e instanceof HttpError ? e.status : 500;
      for (const [k, v] of Object.entries(e instanceof HttpError ? e.headers : {})) res.setHeader(k, v);
      json(res, status, { error: (e as Error).message });
    },
  });
  return { url: http.url, port: http.port, close: () => http.close() };
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, cache = "no-store"): void {
  res.writeHead(status, { "Content-Type": type, "Cache-Control": cache, "X-Content-Type-Options": "nosniff" });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

function json(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, "application/json; charset=utf-8", JSON.stringify(value));
}
