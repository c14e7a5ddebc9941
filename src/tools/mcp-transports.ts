/**
 * What connectMcp puts between an MCP server and the SDK's Client, so that a server that answers
 * with too much, or logs too much, only ever fails its own call:
 *  - StdioTransport, for a server process: what the SDK's StdioClientTransport does
 *    (newline-delimited JSON-RPC over its stdin and stdout), except that a message over
 *    maxMessageBytes is skipped as it streams in, in constant memory (only its top-level `id` is
 *    kept), and the request it answers fails naming the size. The SDK's transport closed the
 *    connection at its 10 MiB read buffer instead, and so every tool of that server for the rest
 *    of the run. The server's stderr is read as it comes, keeping only its last few KiB (for error
 *    messages): the SDK piped it into a stream nobody read, so a server that logged ~80 KiB blocked
 *    on a full pipe and every later call timed out;
 *    A server process still running when this process ends (at exit, on an error that ends it, on
 *    SIGINT or SIGTERM: ../util/exit-hooks.ts) is sent SIGTERM, so none outlives a run that forgot
 *    to close it or was killed;
 *  - cappedFetch, for the SDK's streamable HTTP transport, which reads a JSON answer whole and an
 *    SSE event whole with no limit: one over maxMessageBytes fails its request instead.
 * Nothing of the SDK is imported here: connectMcp passes in how to parse a message.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { onProcessEnd } from "../util/exit-hooks.js";

/** The largest message read from a server: the SDK's stdio read limit (10 MiB), per message. */
export const DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;
const STDERR_TAIL_BYTES = 4096;
/** How long close() waits for the process after closing its stdin, and again after SIGTERM. */
const EXIT_GRACE_MS = 2000;

export interface StdioServer {
  command: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
}

export interface StdioOptions {
  /** Names the server in errors. */
  label(): string;
  maxMessageBytes: number;
  /** One line of JSON as a JSON-RPC message (throws when it is not one). */
  parse(line: string): unknown;
  env: Record<string, string>;
}

const bytes = (n: number) => n.toLocaleString("en-US");
/** "a message of N bytes is over the limit ..." (N when it is known). */
const over = (what: string, max: number, size?: number) =>
  `${what}${size === undefined ? "" : ` of ${bytes(size)} bytes`} is over the limit of ${bytes(max)} bytes (maxMessageBytes)`;
/** A JSON-RPC error answer to request `id` (what a transport hands the Client for an answer it dropped). */
const errorAnswer = (id: string | number, message: string) => ({
  jsonrpc: "2.0" as const,
  id,
  error: { code: -32603, message },
});

/**
 * Reads a JSON object as it streams past and keeps only what an oversized message needs: its
 * top-level `id`, and whether it has a `method` (a request or notification, not a response).
 */
class TopLevelFields {
  id: string | number | undefined;
  hasMethod = false;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private key: string | undefined;
  private text: number[] = [];

  feed(chunk: Buffer): void {
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (b === 0x5c) this.escaped = true;
        else if (b === 0x22) this.inString = false;
        if (this.depth === 1) this.keep(b);
      } else if (b === 0x22) {
        this.inString = true;
        if (this.depth === 1) this.keep(b);
      } else if (b === 0x7b || b === 0x5b) this.depth++;
      else if (b === 0x7d || b === 0x5d) {
        if (--this.depth === 0) this.member();
      } else if (this.depth === 1) {
        if (b === 0x3a) {
          this.key = this.value() as string | undefined;
          this.text = [];
        } else if (b === 0x2c) this.member();
        else if (b > 0x20) this.keep(b);
      }
    }
  }

  /** Top-level keys and scalar values are short; anything longer is not one we want. */
  private keep(b: number): void {
    if (this.text.length <= 256) this.text.push(b);
  }

  private value(): unknown {
    try {
      return this.text.length && this.text.length <= 256 ? JSON.parse(Buffer.from(this.text).toString()) : undefined;
    } catch {
      return undefined;
    }
  }

  private member(): void {
    const v = this.value();
    if (this.key === "id" && (typeof v === "string" || typeof v === "number")) this.id = v;
    if (this.key === "method") this.hasMethod = true;
    this.key = undefined;
    this.text = [];
  }
}

/** Splits a byte stream into lines, each at most `max` bytes; a longer one is scanned and dropped. */
class MessageLines {
  private chunks: Buffer[] = [];
  private size = 0;
  private oversized: TopLevelFields | undefined;

  constructor(
    private readonly max: number,
    private readonly onLine: (line: Buffer) => void,
    private readonly onOversized: (size: number, fields: TopLevelFields) => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start <= chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const part = chunk.subarray(start, nl < 0 ? chunk.length : nl);
      this.size += part.length;
      if (this.oversized) this.oversized.feed(part);
      else if (this.size > this.max) {
        this.oversized = new TopLevelFields();
        for (const c of this.chunks) this.oversized.feed(c);
        this.oversized.feed(part);
        this.chunks = [];
      } else if (part.length) this.chunks.push(part);
      if (nl < 0) return;
      if (this.oversized) this.onOversized(this.size, this.oversized);
      else if (this.size) this.onLine(Buffer.concat(this.chunks, this.size));
      this.chunks = [];
      this.size = 0;
      this.oversized = undefined;
      start = nl + 1;
    }
  }
}

/** An MCP client transport (start, send, close, onmessage, onerror, onclose) over a child process. */
export class StdioTransport {
  onmessage?: (message: unknown) => void;
  onerror?: (error: Error) => void;
  onclose?: () => void;
  private child: ChildProcess | undefined;
  /** Unregisters the SIGTERM this process sends the server when it ends. */
  private release: (() => void) | undefined;
  private stderrTail = "";
  private readonly lines: MessageLines;

  constructor(
    private readonly server: StdioServer,
    private readonly o: StdioOptions,
  ) {
    this.lines = new MessageLines(
      o.maxMessageBytes,
      (line) => this.receive(line),
      (size, fields) => this.oversized(size, fields),
    );
  }

  /** The last line the server wrote to stderr that names an error (else its last line), for error messages. */
  lastStderrLine(): string {
    const lines = this.stderrTail.split("\n").filter((l) => l.trim());
    const last = (lines.filter((l) => /error/i.test(l)).pop() ?? lines.pop() ?? "").trim();
    return last.length > 200 ? `${last.slice(0, 200)}...` : last;
  }

  start(): Promise<void> {
    if (this.child) throw new Error(`${this.o.label()}: the transport is already started`);
    return new Promise((resolve, reject) => {
      const child = spawn(this.server.command, this.server.args ?? [], {
        env: { ...this.o.env, ...this.server.env },
        cwd: this.server.cwd,
        stdio: ["pipe", "pipe", "pipe"],
        shell: false,
        windowsHide: true,
      });
      this.child = child;
      this.release = onProcessEnd(() => child.kill("SIGTERM"));
      child.once("spawn", () => resolve());
      child.on("error", (err) => {
        reject(err);
        this.onerror?.(err);
      });
      child.once("close", () => {
        this.child = undefined;
        this.release?.();
        this.onclose?.();
      });
      child.stdin!.on("error", (err) => this.onerror?.(err));
      child.stdout!.on("error", (err) => this.onerror?.(err));
      child.stdout!.on("data", (chunk: Buffer) => this.lines.push(chunk));
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (text: string) => {
        this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_BYTES);
      });
    });
  }

  private receive(line: Buffer): void {
    let message: unknown;
    try {
      message = this.o.parse(line.toString("utf8").replace(/\r$/, ""));
    } catch (err) {
      this.onerror?.(err as Error);
      return;
    }
    this.onmessage?.(message);
  }

  /** A message too large to read: the request it answers fails; anything else is reported and dropped. */
  private oversized(size: number, fields: TopLevelFields): void {
    const what = over("a message", this.o.maxMessageBytes, size);
    if (fields.id !== undefined && !fields.hasMethod)
      this.onmessage?.(errorAnswer(fields.id, `${this.o.label()}: its answer was dropped: ${what}`));
    else this.onerror?.(new Error(`${this.o.label()}: dropped ${what}`));
  }

  send(message: unknown): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed) return Promise.reject(new Error(`${this.o.label()}: not connected`));
    return new Promise((resolve) => {
      if (stdin.write(JSON.stringify(message) + "\n")) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Closes stdin; then SIGTERM, then SIGKILL, each after a grace period the process did not exit in. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("close", () => resolve());
    });
    const grace = () => new Promise<void>((resolve) => setTimeout(resolve, EXIT_GRACE_MS).unref());
    child.stdin?.end();
    await Promise.race([exited, grace()]);
    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      child.kill(signal);
      if (signal === "SIGTERM") await Promise.race([exited, grace()]);
    }
  }
}

// ---- streamable HTTP ----

type Fetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** The ids of the requests a POST body carries (one message or a batch). */
function requestIds(body: unknown): (string | number)[] {
  if (typeof body !== "string") return [];
  try {
    const parsed = JSON.parse(body) as unknown;
    return (Array.isArray(parsed) ? parsed : [parsed])
      .filter((m) => m && typeof m === "object" && "method" in m && "id" in m)
      .map((m) => (m as { id: string | number }).id);
  } catch {
    return [];
  }
}

/** A JSON body cut at `max` bytes: reading it fails with an error naming the limit. */
function jsonLimit(label: () => string, max: number): TransformStream<Uint8Array, Uint8Array> {
  let size = 0;
  return new TransformStream({
    transform(chunk, controller) {
      size += chunk.length;
      if (size > max) controller.error(new Error(`${label()}: its answer was dropped: ${over("the answer", max)}`));
      else controller.enqueue(chunk);
    },
  });
}

/**
 * An SSE body whose events are each at most `max` bytes: at a longer one, the stream ends with an
 * error answer to each request the POST carried (after a blank line, which ends the cut event).
 */
function sseLimit(label: () => string, max: number, ids: (string | number)[]): TransformStream<Uint8Array, Uint8Array> {
  let event = 0,
    line = 0,
    previous = 0;
  return new TransformStream({
    transform(chunk, controller) {
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i];
        if (b === 0x0a && previous === 0x0d) {
          // the \n of a \r\n: its line has ended already
        } else if (b === 0x0a || b === 0x0d) {
          if (line === 0) event = 0;
          line = 0;
        } else {
          line++;
          if (++event > max) {
            const message = `${label()}: its answer was dropped: ${over("an event", max)}`;
            const answers = ids.map((id) => `event: message\ndata: ${JSON.stringify(errorAnswer(id, message))}\n\n`);
            controller.enqueue(new TextEncoder().encode(`\n\n${answers.join("")}`));
            controller.terminate();
            return;
          }
        }
        previous = b;
      }
      controller.enqueue(chunk);
    },
  });
}

/**
 * fetch for the SDK's streamable HTTP transport, with each answer (JSON) or event (SSE) at most
 * `max` bytes, and no redirect followed (the request's credentials would go along to wherever it points).
 */
export function cappedFetch(label: () => string, max: number, base: Fetch = fetch): Fetch {
  return async (url, init) => {
    const res = await base(url, { ...init, redirect: "manual" });
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      throw new Error(
        `${label()}: the server answered a redirect (HTTP ${res.status}) to ${res.headers.get("location") ?? "(no Location)"}; not followed (its credentials would go along): give the final address`,
      );
    }
    if (!res.ok || !res.body) return res;
    const type = (res.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    const limit = type === "text/event-stream" ? sseLimit(label, max, requestIds(init?.body)) : jsonLimit(label, max);
    return new Response(res.body.pipeThrough(limit), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}
