/**
 * A route table: handlers by method and path, where a path segment `:name` matches one segment
 * and a last segment `*name` the rest of the path (one segment or more, as a model id with a
 * slash), given to the handler percent-decoded. A path no route has is a 404; a path with routes for
 * other methods is a 405 naming them in Allow.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { decodePathPart } from "../util/request-target.js";
import { HttpError } from "./errors.js";

/** A route's handler; `ctx` is what the server found out before routing (the gateway's episode). */
export type Handler<C = void> = (
  req: IncomingMessage,
  res: ServerResponse,
  params: Record<string, string>,
  ctx: C,
) => unknown;

interface Route<C> {
  method: string;
  parts: string[];
  handler: Handler<C>;
}

export type Match<C> = { handler: Handler<C>; params: Record<string, string> } | { allow: string[] } | undefined;

export class RouteTable<C = void> {
  private readonly routes: Route<C>[];

  /** `table` maps "METHOD /path/:param" to its handler. */
  constructor(table: Record<string, Handler<C>>) {
    this.routes = Object.entries(table).map(([key, handler]) => {
      const [method, path] = key.split(" ");
      return { method, parts: path.split("/"), handler };
    });
  }

  /** The handler of `method` on `path` with its parameters; else the methods the path has (405), or undefined (404). */
  match(method: string, path: string): Match<C> {
    const parts = path.split("/");
    const allow: string[] = [];
    for (const r of this.routes) {
      const params = matchParts(r.parts, parts);
      if (!params) continue;
      if (r.method === method) return { handler: r.handler, params };
      allow.push(r.method);
    }
    return allow.length > 0 ? { allow } : undefined;
  }

  /** Runs the route for the request, or throws the 404 (`notFound`'s message) or 405 it is. */
  async run(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    notFound: (method: string, path: string) => string,
    ctx: C,
  ): Promise<void> {
    const method = req.method ?? "GET";
    const m = this.match(method, path);
    if (!m) throw new HttpError(404, notFound(method, path), "unknown_url");
    if ("allow" in m) {
      const allowed = m.allow.join(", ");
      throw new HttpError(405, `${path} accepts ${allowed}, not ${method}`, "method_not_allowed", { Allow: allowed });
    }
    await m.handler(req, res, m.params, ctx);
  }
}

function matchParts(pattern: string[], parts: string[]): Record<string, string> | undefined {
  const rest = pattern[pattern.length - 1].startsWith("*");
  if (rest ? parts.length < pattern.length : pattern.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const segment = rest && i === pattern.length - 1 ? parts.slice(i).join("/") : parts[i];
    if (pattern[i].startsWith(":") || pattern[i].startsWith("*")) {
      const value = decodePathPart(segment);
      if (value === undefined)
        throw new HttpError(400, `malformed percent-encoding in '${parts.join("/")}'`, "invalid_url");
      if (value === "") return undefined;
      params[pattern[i].slice(1)] = value;
    } else if (pattern[i] !== parts[i]) return undefined;
  }
  return params;
}
