/**
 * Starting and stopping a node:http server the same way for every server of the package: the port
 * checked, listen errors as one line naming the server and what to do, requests counted while in
 * flight, and close() that stops accepting, lets requests in flight finish (up to `drainMs`), then
 * cuts what is left. What a handler throws goes to the server's own error mapper, which answers
 * unless the response has started (then the connection is ended).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { InputError } from "../util/errors.js";

export interface HttpServerOptions {
  /** Names the server in errors: "serve", "serve --tinker", "dashboard", "gateway". */
  name: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Answers what `handle` threw; called only while nothing of the response has been sent. */
  answerError(e: unknown, req: IncomingMessage, res: ServerResponse): void;
  /** How long close() lets requests in flight finish. Default 5 s. */
  drainMs?: number;
}

export interface HttpServer {
  /** http://host:port */
  url: string;
  host: string;
  port: number;
  server: Server;
  /** Stops accepting, lets requests in flight finish (up to drainMs), then closes every connection. */
  close(): Promise<void>;
}

/** An InputError unless `port` is an integer from 0 to 65535. */
export function checkPort(port: number, name: string): void {
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new InputError(`${name}: the port must be an integer in [0, 65535], got ${port}`);
}

export async function startHttpServer(o: HttpServerOptions): Promise<HttpServer> {
  checkPort(o.port, o.name);
  let inFlight = 0;
  let idle: (() => void) | undefined;
  const server = createServer((req, res) => {
    inFlight++;
    res.on("close", () => {
      inFlight--;
      if (inFlight === 0) idle?.();
    });
    o.handle(req, res).catch((e: unknown) => {
      if (res.headersSent) return void res.end();
      try {
        o.answerError(e, req, res);
      } catch {
        res.destroy();
      }
    });
  });
  await listen(server, o.port, o.host, o.name);
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${o.host.includes(":") ? `[${o.host}]` : o.host}:${port}`,
    host: o.host,
    port,
    server,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        const drainMs = o.drainMs ?? 5_000;
        if (inFlight > 0 && drainMs > 0)
          await Promise.race([
            new Promise<void>((r) => (idle = r)),
            new Promise((r) => setTimeout(r, drainMs).unref()),
          ]);
        server.closeAllConnections();
        await closed;
      })();
      return closing;
    },
  };
}

function listen(server: Server, port: number, host: string, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException) => {
      if (e.code === "EADDRINUSE")
        reject(
          new InputError(
            `${name}: port ${port} on ${host} is already in use`,
            "pick another --port, or --port 0 for a free one",
          ),
        );
      else if (e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND")
        reject(new InputError(`${name}: cannot listen on host '${host}' (${e.code})`));
      else if (e.code === "EACCES")
        reject(
          new InputError(
            `${name}: no permission to listen on port ${port}`,
            "ports below 1024 need privileges; pick another --port",
          ),
        );
      else reject(e);
    };
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
}
