/**
 * Runs one piece of untrusted JavaScript in QuickJS (compiled to WebAssembly)
 * and reports what it printed, the value of its last expression, or why it
 * failed. Nothing of the host is reachable from inside: the context holds the
 * ECMAScript built-ins plus a `console` whose methods hand text to the host,
 * and no module can be imported.
 *
 * Limits, and what enforces each:
 *  - time: an interrupt handler with a deadline; QuickJS calls it while it
 *    interprets (loops, calls, regular expressions). A single long built-in
 *    call can overrun it; the worker pool in javascript.ts has a hard deadline
 *    on top.
 *  - memory: the WebAssembly memory of the module has a fixed size (QuickJS's
 *    own runtime limit is also set, but this build cannot measure allocation
 *    sizes, so it only catches single oversized allocations). Running out is
 *    noticed at the allocator, so it is reported even when QuickJS turns it
 *    into a promise rejection.
 *  - promise jobs: run in batches with the deadline checked in between (an
 *    interrupted job only rejects its promise, so a job that schedules
 *    another would otherwise run on).
 *  - stack: `setMaxStackSize`; deep recursion becomes a catchable
 *    "InternalError: stack overflow". The native stack of the thread must be
 *    well larger than this (the worker runs with a large one).
 *  - output: printed text is kept up to `maxOutputChars`, the rest counted
 *    (the sandbox side already cuts each line, so no huge string crosses over).
 *
 * Every call gets a fresh runtime and context, disposed before returning, so
 * nothing carries over between calls. A failure of the host bindings (the
 * sandbox exhausted its memory so badly that the bindings cannot allocate, or
 * the native stack overflowed) is reported with `healthy: false`: the module
 * must then be thrown away.
 */
import {
  newQuickJSWASMModule,
  newVariant,
  RELEASE_SYNC,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from "quickjs-emscripten";

export interface SandboxLimits {
  /** Wall-clock budget for running the code and its promise jobs. */
  timeLimitMs: number;
  /** Memory the code may use (the WebAssembly memory is this much larger than the module's own 16 MiB). */
  memoryLimitBytes: number;
  /** QuickJS stack limit in bytes. */
  maxStackBytes: number;
  /** Printed text kept (the rest is counted and reported as truncated). */
  maxOutputChars: number;
}

export const SANDBOX_DEFAULTS: SandboxLimits = {
  timeLimitMs: 1_000,
  memoryLimitBytes: 64 * 1024 * 1024,
  maxStackBytes: 256 * 1024,
  maxOutputChars: 4_096,
};

export type SandboxErrorKind = "syntax" | "exception" | "timeout" | "memory" | "stack_overflow" | "internal";

export interface SandboxResult {
  ok: boolean;
  /** Printed text (console.log and friends), one line per call, cut at `maxOutputChars`. */
  output: string;
  /** Printed characters that were cut off. */
  outputDropped: number;
  /** The last expression's value for display, when it is not undefined (a promise is shown settled). */
  value?: string;
  error?: { kind: SandboxErrorKind; message: string };
  ms: number;
}

const PAGE = 64 * 1024;
/** What the module needs for itself (static data and a first heap), in pages: 16 MiB. The code's allowance comes on top. */
const INITIAL_PAGES = 256;
/** The build declares a 2 GiB maximum; a larger memory could not be imported. */
const MAX_PAGES = 32_768;
/** Memory set aside in every context and released when the code has run out of memory. */
const RESERVE_BYTES = 1024 * 1024;

export function checkLimits(l: SandboxLimits): SandboxLimits {
  const positiveInt = (name: keyof SandboxLimits, min: number, max: number) => {
    const v = l[name];
    if (!(Number.isInteger(v) && v >= min && v <= max))
      throw new RangeError(`javascript sandbox: ${name} must be an integer in [${min}, ${max}], got ${v}`);
  };
  positiveInt("timeLimitMs", 1, 600_000);
  positiveInt("memoryLimitBytes", 1024 * 1024, (MAX_PAGES - INITIAL_PAGES) * PAGE);
  positiveInt("maxStackBytes", 16 * 1024, 4 * 1024 * 1024);
  positiveInt("maxOutputChars", 16, 10_000_000);
  return l;
}

/** A QuickJS module of its own, with the WebAssembly memory it runs in. */
export interface QuickJSInstance {
  module: QuickJSWASMModule;
  memory: WebAssembly.Memory;
  /** The memory's size in bytes (fixed). */
  maxBytes: number;
  /** How many times the module's allocator found the memory full, since the module was loaded. */
  exhaustions(): number;
}

/**
 * A QuickJS module whose WebAssembly memory is the memory limit, whole from
 * the start. It never grows: growing detaches the views over the old buffer,
 * and quickjs-emscripten's executePendingJobs reads the job's context through
 * such a view, so promise jobs that grew the memory made it wrap a garbage
 * context pointer (a second context that leaked and aborted the runtime's
 * disposal, or a wasm trap). Pages not yet touched cost no resident memory.
 *
 * The allocator asks the memory to grow only when it is full, so refusing
 * (and counting) those requests tells when the code exhausted memory, even
 * where QuickJS turns the error into a promise rejection nobody sees.
 */
export async function loadQuickJS(memoryLimitBytes: number): Promise<QuickJSInstance> {
  const pages = Math.min(MAX_PAGES, INITIAL_PAGES + Math.ceil(memoryLimitBytes / PAGE));
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
  let refused = 0;
  Object.defineProperty(memory, "grow", {
    value: (): number => {
      refused++;
      throw new RangeError("the sandbox memory has a fixed size");
    },
  });
  const module = await newQuickJSWASMModule(newVariant(RELEASE_SYNC, { wasmMemory: memory }));
  return { module, memory, maxBytes: pages * PAGE, exhaustions: () => refused };
}

/**
 * Evaluated first in every context. Installs `console` and returns
 * `inspect(value, mode)`: mode 0 shows a value, mode 1 describes a thrown
 * value. It keeps its own references to the built-ins it uses, so user code
 * that replaces them later changes nothing here, and it never builds strings
 * much longer than the output cap.
 *
 * Showing a value runs none of its code where it can help it: getters show
 * as `[Getter]`, strings are never built from objects. What can still run
 * (proxy traps) or fail (a revoked proxy) is caught: the value shows as
 * "could not be shown" with the reason. Only memory exhaustion (and the
 * uncatchable interrupt) escapes, for the host to report.
 */
const PRELUDE = String.raw`(function (hostWrite, limit) {
  "use strict";
  const apply = Reflect.apply, slice = String.prototype.slice, trimEnd = String.prototype.trimEnd, join = Array.prototype.join, push = Array.prototype.push;
  const isArray = Array.isArray, ownKeys = Object.keys, is = Object.is, quote = JSON.stringify;
  const getOwn = Object.getOwnPropertyDescriptor, getProto = Object.getPrototypeOf, hasOwn = Object.prototype.hasOwnProperty, isProtoOf = Object.prototype.isPrototypeOf;
  const symbolText = Symbol.prototype.toString, dateIso = Date.prototype.toISOString, dateTime = Date.prototype.getTime;
  const regexText = RegExp.prototype.toString, regexExec = RegExp.prototype.exec;
  const mapEntries = Map.prototype.entries, setValues = Set.prototype.values;
  const mapNext = getProto(new Map().entries()).next, setNext = getProto(new Set().values()).next;
  const mapSize = getOwn(Map.prototype, "size").get, setSize = getOwn(Set.prototype, "size").get;
  const TypedArrayP = getProto(Uint8Array.prototype), typedName = getOwn(TypedArrayP, Symbol.toStringTag).get, typedLength = getOwn(TypedArrayP, "length").get;
  const bufferLength = getOwn(ArrayBuffer.prototype, "byteLength").get;
  const ErrorP = Error.prototype, InternalErrorP = InternalError.prototype, DateP = Date.prototype, RegExpP = RegExp.prototype;
  const MapP = Map.prototype, SetP = Set.prototype, PromiseP = Promise.prototype, ArrayBufferP = ArrayBuffer.prototype;
  const indexOf = Array.prototype.indexOf, arraySlice = Array.prototype.slice;
  const IDENT = /^[A-Za-z_$][\w$]*$/;
  const clip = (s) => (s.length > limit ? apply(slice, s, [0, limit]) : s);
  const inherits = (proto, v) => apply(isProtoOf, proto, [v]);
  const MAX_ITEMS = 100, MAX_DEPTH = 4;

  const GETTER = {};
  /** A property's value found without running code: undefined when absent, GETTER for an accessor. */
  function peek(o, k) {
    for (let i = 0; o !== null && i < 1000; i++, o = getProto(o)) {
      const d = getOwn(o, k);
      if (d !== undefined) return apply(hasOwn, d, ["value"]) ? d.value : GETTER;
    }
    return undefined;
  }
  function accessor(d) {
    return d.get !== undefined ? (d.set !== undefined ? "[Getter/Setter]" : "[Getter]") : "[Setter]";
  }
  function list(open, close, items, more) {
    if (more > 0) apply(push, items, ["... " + more + " more"]);
    return items.length === 0 ? open + close : open + " " + apply(join, items, [", "]) + " " + close;
  }
  function errorText(v, depth, seen) {
    const name = peek(v, "name"), message = peek(v, "message");
    const head = typeof name === "string" && name !== "" ? clip(name) : "Error";
    if (message === undefined || message === "") return head;
    if (message === GETTER) return head + ": [message not shown: it is a getter]";
    if (typeof message === "string") return head + ": " + clip(message);
    return head + ": " + (depth >= MAX_DEPTH ? "[Object]" : show(message, depth + 1, seen, false));
  }
  function show(v, depth, seen, top) {
    switch (typeof v) {
      case "string": return top ? v : quote(clip(v));
      case "number": return is(v, -0) ? "-0" : "" + v;
      case "bigint": return v + "n";
      case "boolean": return v ? "true" : "false";
      case "undefined": return "undefined";
      case "symbol": return apply(symbolText, v, []);
      case "function": {
        const name = peek(v, "name");
        return "[Function" + (typeof name === "string" && name !== "" ? ": " + clip(name) : " (anonymous)") + "]";
      }
    }
    if (v === null) return "null";
    if (apply(indexOf, seen, [v]) >= 0) return "[Circular]";
    if (inherits(ErrorP, v)) return errorText(v, depth, seen);
    if (inherits(DateP, v)) return is(apply(dateTime, v, []), NaN) ? "Invalid Date" : apply(dateIso, v, []);
    if (inherits(RegExpP, v)) return apply(regexText, v, []);
    if (inherits(PromiseP, v)) return "Promise {}";
    if (inherits(ArrayBufferP, v)) return "ArrayBuffer { byteLength: " + apply(bufferLength, v, []) + " }";
    const typed = apply(typedName, v, []);
    if (depth >= MAX_DEPTH) return isArray(v) ? "[Array]" : "[Object]";
    seen = apply(arraySlice, seen, []);
    apply(push, seen, [v]);
    const items = [];
    let used = 0, more = 0;
    const add = (s) => {
      if (used > limit) { more++; return; }
      used += s.length + 2;
      apply(push, items, [s]);
    };
    if (isArray(v) || typed !== undefined) {
      const n = typed === undefined ? v.length : apply(typedLength, v, []);
      for (let i = 0; i < n; i++) {
        if (i >= MAX_ITEMS) { more += n - i; break; }
        const d = getOwn(v, i);
        add(d === undefined ? "undefined" : apply(hasOwn, d, ["value"]) ? show(d.value, depth + 1, seen, false) : accessor(d));
      }
      return (typed === undefined ? "" : typed + "(" + n + ") ") + list("[", "]", items, more);
    }
    if (inherits(MapP, v)) {
      const it = apply(mapEntries, v, []);
      for (let e = apply(mapNext, it, []), i = 0; !e.done; e = apply(mapNext, it, []), i++) {
        if (i >= MAX_ITEMS) { more++; continue; }
        add(show(e.value[0], depth + 1, seen, false) + " => " + show(e.value[1], depth + 1, seen, false));
      }
      return "Map(" + apply(mapSize, v, []) + ") " + list("{", "}", items, more);
    }
    if (inherits(SetP, v)) {
      const it = apply(setValues, v, []);
      for (let e = apply(setNext, it, []), i = 0; !e.done; e = apply(setNext, it, []), i++) {
        if (i >= MAX_ITEMS) { more++; continue; }
        add(show(e.value, depth + 1, seen, false));
      }
      return "Set(" + apply(setSize, v, []) + ") " + list("{", "}", items, more);
    }
    const keys = ownKeys(v);
    for (let i = 0; i < keys.length; i++) {
      if (i >= MAX_ITEMS) { more += keys.length - i; break; }
      const k = keys[i], d = getOwn(v, k);
      if (d === undefined) continue; // a proxy may list keys it does not have
      const shown = apply(hasOwn, d, ["value"]) ? show(d.value, depth + 1, seen, false) : accessor(d);
      add((apply(regexExec, IDENT, [k]) !== null ? k : quote(clip(k))) + ": " + shown);
    }
    return list("{", "}", items, more);
  }
  /**
   * Memory exhaustion is the host's to report: it is rethrown, never described away. (When memory is
   * so short that QuickJS throws null instead, describing that fails in turn and escapes all the same.)
   */
  function outOfMemory(err) {
    try {
      return err !== null && typeof err === "object" && inherits(InternalErrorP, err) && peek(err, "message") === "out of memory";
    } catch {
      return false;
    }
  }
  /** Why showing something failed, in a few words; never throws. */
  function reason(err) {
    try {
      if (err !== null && typeof err === "object" && inherits(ErrorP, err)) return errorText(err, MAX_DEPTH, []);
      return "it threw " + (typeof err === "object" && err !== null ? (isArray(err) ? "an array" : "an object") : show(err, 0, [], false));
    } catch {
      return "it threw something that cannot be described either";
    }
  }
  function guarded(render, fallback) {
    try {
      return render();
    } catch (err) {
      if (outOfMemory(err)) throw err;
      return fallback(reason(err));
    }
  }
  function describe(e) {
    let text = null;
    if (e !== null && typeof e === "object") {
      const name = peek(e, "name"), message = peek(e, "message");
      if (inherits(ErrorP, e) || (typeof name === "string" && typeof message === "string")) {
        text = errorText(e, 0, []);
        const stack = peek(e, "stack");
        if (typeof stack === "string" && stack !== "") text += "\n" + apply(trimEnd, apply(slice, stack, [0, 2000]), []);
      }
    }
    return text !== null ? text : "Uncaught " + show(e, 0, [], false);
  }
  const print = function (...args) {
    const parts = [];
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      apply(push, parts, [typeof a === "string" ? clip(a) : guarded(() => show(a, 0, [], false), (why) => "[could not be shown: " + why + "]")]);
    }
    const text = apply(join, parts, [" "]);
    hostWrite(clip(text), text.length);
  };
  const console = {};
  for (const name of ["log", "info", "warn", "error", "debug", "trace"]) console[name] = print;
  Object.defineProperty(globalThis, "console", { value: console, writable: true, configurable: true, enumerable: false });
  return (v, mode) =>
    clip(
      mode === 1
        ? guarded(() => describe(v), (why) => "Uncaught exception (its message could not be shown: " + why + ")")
        : guarded(() => show(v, 0, [], false), (why) => "[the value could not be shown: " + why + "]"),
    );
})`;

/** Printed text up to a cap; the rest is counted. */
class OutputBuffer {
  private text = "";
  private total = 0;
  constructor(private readonly cap: number) {}

  write(line: string, fullLength: number): void {
    const piece = this.total === 0 ? line : `\n${line}`;
    if (this.text.length < this.cap) this.text += piece.slice(0, this.cap - this.text.length);
    this.total += piece.length + (fullLength - line.length);
  }

  get kept(): string {
    return this.text;
  }

  get dropped(): number {
    return this.total - this.text.length;
  }
}

function classify(description: string, timedOut: boolean, compileError: boolean): SandboxErrorKind {
  if (timedOut || /^InternalError: interrupted/.test(description)) return "timeout";
  if (/^InternalError: out of memory|^RangeError: out of memory|out of memory in regexp/.test(description))
    return "memory";
  if (
    /^InternalError: stack overflow|^RangeError: Maximum call stack/.test(description) ||
    /^SyntaxError: stack overflow/.test(description)
  )
    return "stack_overflow";
  if (compileError && /^SyntaxError:/.test(description)) return "syntax";
  return "exception";
}

function explain(kind: SandboxErrorKind, description: string, l: SandboxLimits): string {
  switch (kind) {
    case "timeout":
      return `timeout: the code ran longer than ${l.timeLimitMs} ms and was stopped`;
    case "memory":
      return `out of memory: the code needed more than ${Math.round(l.memoryLimitBytes / (1024 * 1024))} MiB (${description.split("\n")[0]})`;
    case "stack_overflow":
      return `stack overflow: recursion too deep (${description.split("\n")[0]})`;
    default:
      return description;
  }
}

/** The prelude could not be set up: something is wrong with the module itself, retire it. */
class HostFailure extends Error {}

/** A fresh runtime with the memory, stack and time limits; no module can be imported. `stop` is asked regularly while code runs. */
function limitedRuntime(qjs: QuickJSInstance, limits: SandboxLimits, stop: () => boolean): QuickJSRuntime {
  const rt = qjs.module.newRuntime();
  rt.setInterruptHandler(stop);
  rt.setMemoryLimit(limits.memoryLimitBytes);
  rt.setMaxStackSize(limits.maxStackBytes);
  rt.setModuleLoader(() => ({ error: new Error("modules cannot be imported in this sandbox") }));
  return rt;
}

/** Installs `console` (writing into `out`) from the prelude and returns its value inspector; handles go to `own`. */
function installPrelude(
  vm: QuickJSContext,
  out: OutputBuffer,
  limits: SandboxLimits,
  own: <T extends QuickJSHandle>(h: T) => T,
): QuickJSHandle {
  const write = own(
    vm.newFunction("write", (text, length) => {
      const s = vm.typeof(text) === "string" ? vm.getString(text) : "";
      const n = vm.typeof(length) === "number" ? vm.getNumber(length) : s.length;
      out.write(s.slice(0, limits.maxOutputChars), Number.isFinite(n) && n >= s.length ? n : s.length);
    }),
  );
  const prelude = vm.evalCode(PRELUDE, "prelude.js");
  if (prelude.error) {
    prelude.error.dispose();
    throw new HostFailure("the sandbox prelude failed to compile");
  }
  const install = own(prelude.value);
  const installed = vm.callFunction(install, vm.undefined, write, own(vm.newNumber(limits.maxOutputChars)));
  if (installed.error) {
    installed.error.dispose();
    throw new HostFailure("the sandbox prelude failed to run");
  }
  return own(installed.value);
}

/**
 * Promise jobs run per call into QuickJS. The deadline and the memory are
 * checked between calls: an interrupted job only rejects its own promise, so
 * the queue would otherwise go on, and a job that schedules two grows it until
 * memory runs out (where QuickJS's async functions can then trap: stop first).
 */
const JOB_BATCH = 256;

/**
 * Runs queued promise jobs until none are left or `stopped()`, in batches so
 * that `stopped` is asked in between. Stops too when memory ran out in a job:
 * QuickJS mostly turns that into a rejection nobody sees, and its async
 * functions can trap soon after.
 */
function runJobs(
  rt: QuickJSRuntime,
  qjs: QuickJSInstance,
  stopped: () => boolean,
): { ran: number; queued: boolean; exhausted: boolean; error?: QuickJSHandle } {
  const refusedBefore = qjs.exhaustions();
  const exhausted = () => qjs.exhaustions() > refusedBefore;
  let ran = 0;
  while (!stopped() && !exhausted() && rt.hasPendingJob()) {
    const batch = rt.executePendingJobs(JOB_BATCH);
    if (batch.error) return { ran, queued: rt.hasPendingJob(), exhausted: exhausted(), error: batch.error };
    ran += batch.value;
    batch.dispose();
  }
  return { ran, queued: rt.hasPendingJob(), exhausted: exhausted() };
}

/** The timeout message once promise jobs ran: many jobs mean callbacks that kept scheduling more. */
function jobTimeout(ran: number, queued: boolean, l: SandboxLimits): string {
  if (ran <= JOB_BATCH) return explain("timeout", "", l);
  const more = queued ? " and more were still queued" : "";
  return `timeout: the code kept scheduling promise jobs (then/await callbacks) past the ${l.timeLimitMs} ms limit (${ran} jobs ran${more}); a callback that always schedules another never finishes`;
}

/** What showing a value gave: its text, or why there is none. */
type Shown = { text: string } | { failed: "timeout" | "memory" };

/**
 * Runs `code` as a global script in a fresh runtime and context of `qjs`'s module.
 * Returns `healthy: false` when the module must be discarded afterwards.
 */
export function runInQuickJS(
  qjs: QuickJSInstance,
  code: string,
  limits: SandboxLimits = SANDBOX_DEFAULTS,
): { result: SandboxResult; healthy: boolean } {
  const t0 = performance.now();
  const out = new OutputBuffer(limits.maxOutputChars);
  const displayBudgetMs = Math.min(250, limits.timeLimitMs);
  let deadline = Date.now() + limits.timeLimitMs;
  /** Set once the interrupt handler has stopped the code (it may have been swallowed by a promise). */
  let interrupted = false;
  const rt = limitedRuntime(qjs, limits, () => (Date.now() > deadline ? (interrupted = true) : false));
  const vm = rt.newContext();
  const owned: QuickJSHandle[] = [];
  const own = <T extends QuickJSHandle>(h: T): T => (owned.push(h), h);
  const refusedBefore = qjs.exhaustions();
  let healthy = true;
  const finish = (r: Omit<SandboxResult, "output" | "outputDropped" | "ms">) => ({
    result: { ...r, output: out.kept, outputDropped: out.dropped, ms: Math.round(performance.now() - t0) },
    healthy,
  });
  const fail = (kind: SandboxErrorKind, message: string) => finish({ ok: false, error: { kind, message } });
  try {
    const inspect = installPrelude(vm, out, limits, own);
    const modes = [own(vm.newNumber(0)), own(vm.newNumber(1))];

    // Held only by this handle: disposing it frees its memory at once, leaving room to describe an out-of-memory failure.
    const reserve = own(vm.newArrayBuffer(new ArrayBuffer(RESERVE_BYTES)));
    /** inspect() with a fresh short deadline. Only the interrupt or memory exhaustion make it fail. */
    const display = (h: QuickJSHandle, mode: 0 | 1): Shown => {
      if (reserve.alive) reserve.dispose(); // room to show it even when the code filled the memory
      deadline = Date.now() + displayBudgetMs;
      interrupted = false;
      let r;
      try {
        r = vm.callFunction(inspect, vm.undefined, h, modes[mode]);
      } catch {
        healthy = false; // the bindings could not allocate: do not trust this module again
        return { failed: "memory" };
      }
      if (r.error) {
        r.error.dispose();
        return { failed: interrupted ? "timeout" : "memory" };
      }
      const s = vm.typeof(r.value) === "string" ? vm.getString(r.value) : "";
      r.value.dispose();
      return { text: s };
    };
    /** QuickJS's own count of the bytes its live objects use (it walks the heap). */
    const usedBytes = () => Number(/memory used\s+\d+\s+(\d+)/.exec(rt.dumpMemoryUsage())?.[1] ?? 0);
    const failure = (h: QuickJSHandle, timedOut: boolean, compile: boolean) => {
      if (reserve.alive) reserve.dispose();
      // Out of memory with no room left even for the error object, QuickJS throws null; so does `throw null`.
      // What tells them apart is whether the allocator found the memory full during this run, or the heap is full now.
      const memoryFull =
        vm.typeof(h) === "object" &&
        vm.sameValue(h, vm.null) &&
        (qjs.exhaustions() > refusedBefore || usedBytes() > limits.memoryLimitBytes / 2);
      const shown: Shown = memoryFull ? { failed: "memory" } : display(h, 1);
      h.dispose();
      let description: string;
      if ("text" in shown) description = shown.text;
      else if (shown.failed === "memory") description = "InternalError: out of memory";
      else if (timedOut) description = "InternalError: interrupted";
      else
        description = `Uncaught exception (its message could not be shown: showing it took longer than ${displayBudgetMs} ms)`;
      const kind = classify(description, timedOut, compile);
      return fail(kind, explain(kind, description, limits));
    };

    // Compile first so that a syntax error is told apart from a SyntaxError the code throws.
    const compiled = vm.evalCode(code, "code.js", { type: "global", compileOnly: true });
    if (compiled.error) return failure(compiled.error, false, true);
    compiled.value.dispose();

    const evaluated = vm.evalCode(code, "code.js", { type: "global" });
    if (evaluated.error) return failure(evaluated.error, interrupted, false);
    let value = own(evaluated.value);
    // Promise callbacks (then, async functions) run now, under the same deadline.
    const jobs = runJobs(rt, qjs, () => interrupted || Date.now() > deadline);
    if (jobs.error) return failure(jobs.error, interrupted, false);
    if (jobs.exhausted)
      return fail(
        "memory",
        `${explain("memory", "InternalError: out of memory", limits)}; it ran out in a promise job (then/await callback), where the error only rejects a promise`,
      );
    if (jobs.queued || interrupted) return fail("timeout", jobTimeout(jobs.ran, jobs.queued, limits));
    const state = vm.getPromiseState(value);
    if (state.type === "rejected") return failure(state.error, false, false);
    if (state.type === "fulfilled" && !state.notAPromise) value = own(state.value);
    if (state.type === "pending")
      return finish({
        ok: true,
        value:
          "Promise { <pending> } (it never settled: with no timers or I/O in this sandbox, nothing could settle it later)",
      });
    if (vm.typeof(value) === "undefined") return finish({ ok: true });
    const shown = display(value, 0);
    if ("text" in shown) return finish({ ok: true, value: shown.text });
    return finish({
      ok: true,
      value:
        shown.failed === "timeout"
          ? `[the value could not be shown: showing it took longer than ${displayBudgetMs} ms]`
          : "[the value could not be shown: out of memory]",
    });
  } catch (err) {
    // The bindings threw: report it, leave the runtime undisposed (its state is unknown), retire the module.
    healthy = false;
    const why =
      err instanceof HostFailure
        ? err.message
        : `the sandbox failed (${(err as Error)?.message || String(err)}); it was reset`;
    return fail("internal", `internal: ${why}`);
  } finally {
    if (healthy) {
      for (const h of owned.reverse()) if (h.alive) h.dispose();
      vm.dispose();
      rt.dispose();
    }
  }
}
