/**
 * The `javascript` tool (the ReTool code-interpreter analogue): the model
 * writes JavaScript, the tool runs it in QuickJS compiled to WebAssembly and
 * returns what it printed plus the value of its last expression.
 *
 * Isolation, in layers:
 *  - QuickJS: the code sees the ECMAScript built-ins and a `console`, nothing
 *    of Node (no process, require, import, fetch, timers, file system). Each
 *    run gets a fresh runtime and context: no state is kept between calls.
 *  - Limits (javascript-sandbox.ts): a time limit by interrupt deadline, a
 *    memory limit by capping the module's WebAssembly memory, a stack limit,
 *    and an output cap.
 *  - Worker threads: runs happen off the main thread (a run never blocks the
 *    event loop, so other trajectories keep sampling), on a thread with a
 *    large native stack. A run that outlives its time limit by
 *    `hardTimeoutGraceMs` (a long built-in the interrupt cannot stop), or that
 *    leaves the module in an unknown state, costs that thread: it is ended and
 *    the next run starts a fresh one.
 *
 * Errors of the code (syntax errors, exceptions, timeout, out of memory, stack
 * overflow) come back to the model as the tool's error text; the host process
 * is never at risk.
 */
import { existsSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { z } from "zod";
import { defineTool, type Tool } from "../agent/tool.js";
import { InputError } from "../util/errors.js";
import { checkLimits, SANDBOX_DEFAULTS, type SandboxLimits, type SandboxResult } from "./javascript-sandbox.js";
import type { SandboxReply, SandboxRequest } from "./javascript-worker.js";

export interface JavaScriptSandboxOptions extends Partial<SandboxLimits> {
  /** Worker threads at most (runs beyond that wait their turn). Default 2. */
  maxWorkers?: number;
  /** A run still going this long after its time limit has its thread ended. Default 2000 ms. */
  hardTimeoutGraceMs?: number;
}

export interface SandboxStats {
  /** Live worker threads, and how many are running code now. */
  workers: number;
  busy: number;
  /** Runs finished (any outcome). */
  runs: number;
  /** Threads ended because a run broke them (hard timeout, crash, unknown module state) or was aborted. */
  resets: number;
}

interface Slot {
  worker: Worker;
  ready: Promise<void>;
  busy: boolean;
  dead: boolean;
  onReply?: (reply: SandboxReply) => void;
  onDeath?: (err: Error) => void;
}

function workerEntry(): string {
  const js = fileURLToPath(new URL("./javascript-worker.js", import.meta.url));
  return existsSync(js) ? js : js.replace(/\.js$/, ".ts");
}

const MiB = 1024 * 1024;

/** A pool of sandbox threads. Runs are independent; each gets a fresh QuickJS context. */
export class JavaScriptSandbox {
  readonly limits: SandboxLimits;
  readonly maxWorkers: number;
  readonly hardTimeoutGraceMs: number;
  private slots: Slot[] = [];
  private waiters: (() => void)[] = [];
  private runs = 0;
  private resets = 0;
  private disposed = false;

  constructor(opts: JavaScriptSandboxOptions = {}) {
    try {
      this.limits = checkLimits({
        timeLimitMs: opts.timeLimitMs ?? SANDBOX_DEFAULTS.timeLimitMs,
        memoryLimitBytes: opts.memoryLimitBytes ?? SANDBOX_DEFAULTS.memoryLimitBytes,
        maxStackBytes: opts.maxStackBytes ?? SANDBOX_DEFAULTS.maxStackBytes,
        maxOutputChars: opts.maxOutputChars ?? SANDBOX_DEFAULTS.maxOutputChars,
      });
    } catch (err) {
      throw new InputError((err as Error).message);
    }
    this.maxWorkers = opts.maxWorkers ?? 2;
    this.hardTimeoutGraceMs = opts.hardTimeoutGraceMs ?? 2_000;
    if (!(Number.isInteger(this.maxWorkers) && this.maxWorkers >= 1))
      throw new InputError(`javascript sandbox: maxWorkers must be a positive integer, got ${this.maxWorkers}`);
    if (!(this.hardTimeoutGraceMs >= 0))
      throw new InputError(`javascript sandbox: hardTimeoutGraceMs must be >= 0, got ${this.hardTimeoutGraceMs}`);
  }

  stats(): SandboxStats {
    return {
      workers: this.slots.length,
      busy: this.slots.filter((s) => s.busy).length,
      runs: this.runs,
      resets: this.resets,
    };
  }

  /** Runs `code`; resolves with the outcome (never rejects for anything the code does). Rejects when aborted or the sandbox cannot start. */
  async run(code: string, signal?: AbortSignal): Promise<SandboxResult> {
    if (this.disposed) throw new Error("the javascript sandbox was disposed");
    signal?.throwIfAborted();
    const slot = await this.acquire(signal);
    slot.worker.ref(); // a pending run keeps the process alive; an idle thread does not
    try {
      await slot.ready;
      signal?.throwIfAborted();
      return await this.runOn(slot, code, signal);
    } finally {
      slot.busy = false;
      if (!slot.dead) slot.worker.unref();
      this.waiters.shift()?.();
    }
  }

  /** Ends every thread. Runs in flight resolve as internal errors. */
  async dispose(): Promise<void> {
    this.disposed = true;
    const slots = [...this.slots];
    for (const s of slots) this.kill(s, new Error("the javascript sandbox was disposed"), false);
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private async acquire(signal?: AbortSignal): Promise<Slot> {
    for (;;) {
      if (this.disposed) throw new Error("the javascript sandbox was disposed");
      const idle = this.slots.find((s) => !s.busy && !s.dead);
      if (idle) return ((idle.busy = true), idle);
      if (this.slots.length < this.maxWorkers) {
        const s = this.spawn();
        s.busy = true;
        return s;
      }
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = () => {
          this.waiters = this.waiters.filter((w) => w !== wake);
          reject(signal!.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        this.waiters.push(wake);
      });
    }
  }

  private spawn(): Slot {
    const entry = workerEntry();
    const options = {
      workerData: { limits: this.limits },
      // QuickJS's stack check counts its own stack; the thread's native stack must be far larger.
      resourceLimits: { stackSizeMb: Math.max(8, Math.ceil((64 * this.limits.maxStackBytes) / MiB)) },
      stdout: true,
      stderr: true,
    };
    const worker = entry.endsWith(".ts")
      ? // Sources run under tsx (tests): register its loader in the thread before importing the entry.
        new Worker(
          `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(entry).href)}); });`,
          { ...options, eval: true },
        )
      : new Worker(entry, options);
    // The thread's own prints (an emscripten abort message) are not the model's business; keep the end for diagnostics.
    let stderrTail = "";
    worker.stdout.resume();
    worker.stderr.on("data", (d: Buffer) => (stderrTail = (stderrTail + d.toString("utf8")).slice(-2000)));
    let started!: () => void, failed!: (e: Error) => void;
    const slot: Slot = {
      worker,
      busy: false,
      dead: false,
      ready: new Promise<void>((res, rej) => ((started = res), (failed = rej))),
    };
    slot.ready.catch(() => {}); // observed by run(); never an unhandled rejection
    worker.on("message", (m: SandboxReply) => {
      if ("ready" in m) {
        if (m.ready) started();
        else {
          failed(new Error(`the javascript sandbox could not start: ${m.error}`));
          this.kill(slot, new Error(m.error), false);
        }
        return;
      }
      slot.onReply?.(m);
    });
    const died = (err: Error) => {
      const why = stderrTail.trim() ? `${err.message}: ${stderrTail.trim().split("\n").slice(-1)[0]}` : err.message;
      failed(new Error(`the javascript sandbox thread stopped: ${why}`));
      this.kill(slot, new Error(why));
    };
    worker.on("error", died);
    worker.on("exit", (code) => died(new Error(`thread exited with code ${code}`)));
    worker.unref();
    this.slots.push(slot);
    return slot;
  }

  /** Retires a slot: out of the pool, its thread ended, its run (if any) told. */
  private kill(slot: Slot, err: Error, countReset = true): void {
    if (slot.dead) return;
    slot.dead = true;
    if (countReset && !this.disposed) this.resets++;
    this.slots = this.slots.filter((s) => s !== slot);
    slot.onDeath?.(err);
    void slot.worker.terminate();
    this.waiters.shift()?.(); // room for a new thread
  }

  private runOn(slot: Slot, code: string, signal?: AbortSignal): Promise<SandboxResult> {
    return new Promise<SandboxResult>((resolve, reject) => {
      const t0 = performance.now();
      const failure = (kind: "timeout" | "internal", message: string): SandboxResult => ({
        ok: false,
        output: "",
        outputDropped: 0,
        error: { kind, message },
        ms: Math.round(performance.now() - t0),
      });
      let done = false;
      const settle = (f: () => void) => {
        if (done) return;
        done = true;
        clearTimeout(hard);
        signal?.removeEventListener("abort", onAbort);
        slot.onReply = slot.onDeath = undefined;
        this.runs++;
        f();
      };
      const hard = setTimeout(() => {
        settle(() =>
          resolve(
            failure(
              "timeout",
              `timeout: the code ran longer than ${this.limits.timeLimitMs} ms and could not be interrupted; the sandbox was reset`,
            ),
          ),
        );
        this.kill(slot, new Error("hard timeout"));
      }, this.limits.timeLimitMs + this.hardTimeoutGraceMs);
      const onAbort = () => {
        settle(() => reject(signal!.reason));
        this.kill(slot, new Error("aborted"));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      slot.onReply = (m) => {
        if (!("result" in m)) return;
        settle(() => resolve(m.result));
        if (m.fatal) this.kill(slot, new Error("the sandbox module was left in an unknown state"));
      };
      slot.onDeath = (err) =>
        settle(() =>
          resolve(failure("internal", `internal: the sandbox thread stopped (${err.message}); it was reset`)),
        );
      slot.worker.postMessage({ code } satisfies SandboxRequest);
    });
  }
}

/**
 * The text the model reads. Success: the printed output, then `=> value` when
 * the last expression has one. Failure: the error first, then what was printed
 * before it. Cut to about `maxChars` with a "[truncated: N more characters]" marker.
 */
export function formatSandboxResult(r: SandboxResult, maxChars: number): string {
  const clip = (s: string, n: number) =>
    s.length > n ? `${s.slice(0, n)}\n[truncated: ${s.length - n} more characters]` : s;
  const main = r.error ? r.error.message : r.value !== undefined ? `=> ${r.value}` : "";
  // The value or the error gets at least half the room, and all of it when nothing was printed.
  const mainText = clip(main, Math.max(1, Math.floor(maxChars / 2), maxChars - r.output.length - 1));
  const room = Math.max(0, maxChars - mainText.length - 1);
  const kept = r.output.slice(0, room);
  const dropped = r.outputDropped + (r.output.length - kept.length);
  const printed = dropped > 0 ? `${kept}\n[truncated: ${dropped} more characters]` : kept;
  if (r.error) return printed ? `${mainText}\nOutput before the error:\n${printed}` : mainText;
  const text = [printed, mainText].filter((s) => s !== "").join("\n");
  return text === "" ? "(no output: the code printed nothing and its last expression is undefined)" : text;
}

export interface JavaScriptToolOptions extends JavaScriptSandboxOptions {
  /** Default "javascript". */
  name?: string;
  /** The tool runner's own timeout, queueing and thread start included. Default 30 s. */
  timeoutMs?: number;
  /** Longest accepted program, in characters. Default 20,000. */
  maxCodeChars?: number;
}

export interface JavaScriptTool extends Tool<{ code: string }> {
  readonly sandbox: JavaScriptSandbox;
}

/** A `javascript` tool with its own sandbox pool (threads start on first use and do not keep the process alive). */
export function createJavaScriptTool(opts: JavaScriptToolOptions = {}): JavaScriptTool {
  const sandbox = new JavaScriptSandbox(opts);
  const { timeLimitMs, memoryLimitBytes, maxOutputChars } = sandbox.limits;
  const tool = defineTool({
    name: opts.name ?? "javascript",
    description:
      "Runs JavaScript in an isolated sandbox and returns what it printed with console.log, then '=> ' and the value of the last expression. " +
      `Plain ECMAScript only: no Node APIs, modules, network or files. Each call starts fresh (nothing is kept between calls). ` +
      `Limits: ${timeLimitMs} ms, ${Math.round(memoryLimitBytes / MiB)} MiB, ${maxOutputChars} characters of output. ` +
      "A returned promise is awaited (use an async function for await).",
    inputSchema: z.object({
      code: z
        .string()
        .min(1)
        .max(opts.maxCodeChars ?? 20_000)
        .describe("JavaScript source, e.g. 'const xs = [3, 4]; xs.map((x) => x * x).reduce((a, b) => a + b)'."),
    }),
    timeoutMs: opts.timeoutMs,
    // Room for the marker and the runner's error prefix: the text is already cut to size here.
    maxResponseChars: maxOutputChars + 256,
    async execute({ code }, ctx) {
      const r = await sandbox.run(code, ctx.signal);
      const text = formatSandboxResult(r, maxOutputChars);
      if (!r.ok) throw new Error(text);
      return { text, metadata: { ms: r.ms } };
    },
  });
  return Object.assign(tool, { sandbox });
}

/** The tool with default limits: 1 s, 64 MiB, 256 KiB of stack, 4,096 characters of output. */
export const javascriptTool: JavaScriptTool = createJavaScriptTool();

export {
  SANDBOX_DEFAULTS,
  type SandboxLimits,
  type SandboxResult,
  type SandboxErrorKind,
} from "./javascript-sandbox.js";
