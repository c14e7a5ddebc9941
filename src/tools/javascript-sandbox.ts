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
 *  - memory: the WebAssembly memory of the module has a maximum size (QuickJS's
 *    own runtime limit is also set, but this build cannot measure allocation
 *    sizes, so it only catches single oversized allocations).
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
import { newQuickJSWASMModule, newVariant, RELEASE_SYNC, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime, type QuickJSWASMModule } from "quickjs-emscripten";

export interface SandboxLimits {
  /** Wall-clock budget for running the code and its promise jobs. */
  timeLimitMs: number;
  /** Memory the code may use (the WebAssembly memory grows at most this much past its initial 16 MiB). */
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
/** The module's initial memory (its static data and a first heap), in pages: 16 MiB. */
const INITIAL_PAGES = 256;
/** The build declares a 2 GiB maximum; a larger memory could not be imported. */
const MAX_PAGES = 32_768;
/** Memory set aside in every context and released when the code has run out of memory. */
const RESERVE_BYTES = 1024 * 1024;

export function checkLimits(l: SandboxLimits): SandboxLimits {
  const positiveInt = (name: keyof SandboxLimits, min: number, max: number) => {
    const v = l[name];
    if (!(Number.isInteger(v) && v >= min && v <= max)) throw new RangeError(`javascript sandbox: ${name} must be an integer in [${min}, ${max}], got ${v}`);
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
  /** The memory's maximum size in bytes. */
  maxBytes: number;
}

/** A QuickJS module whose WebAssembly memory cannot grow past the memory limit. */
export async function loadQuickJS(memoryLimitBytes: number): Promise<QuickJSInstance> {
  const maximum = Math.min(MAX_PAGES, INITIAL_PAGES + Math.ceil(memoryLimitBytes / PAGE));
  const memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum });
  const module = await newQuickJSWASMModule(newVariant(RELEASE_SYNC, { wasmMemory: memory }));
  return { module, memory, maxBytes: maximum * PAGE };
}

/**
 * Evaluated first in every context. Installs `console` and returns
 * `inspect(value, mode)`: mode 0 shows a value, mode 1 describes a thrown
 * value. It keeps its own references to the built-ins it uses, so user code
 * that replaces them later changes nothing here, and it never builds strings
 * much longer than the output cap.
 */
const PRELUDE = String.raw`(function (hostWrite, limit) {
  "use strict";
  const apply = Reflect.apply, slice = String.prototype.slice, join = Array.prototype.join, push = Array.prototype.push;
  const isArray = Array.isArray, ownKeys = Object.keys, is = Object.is, quote = JSON.stringify;
  const symbolText = Symbol.prototype.toString, dateIso = Date.prototype.toISOString, dateTime = Date.prototype.getTime;
  const regexText = RegExp.prototype.toString, mapEntries = Map.prototype.entries, setValues = Set.prototype.values;
  const mapSize = Object.getOwnPropertyDescriptor(Map.prototype, "size").get, setSize = Object.getOwnPropertyDescriptor(Set.prototype, "size").get;
  const ErrorC = Error, DateC = Date, RegExpC = RegExp, MapC = Map, SetC = Set, PromiseC = Promise, ArrayBufferC = ArrayBuffer;
  const indexOf = Array.prototype.indexOf, arraySlice = Array.prototype.slice;
  const isView = ArrayBuffer.isView, IDENT = /^[A-Za-z_$][\w$]*$/;
  const clip = (s) => (s.length > limit ? apply(slice, s, [0, limit]) : s);
  const MAX_ITEMS = 100, MAX_DEPTH = 4;

  function list(open, close, items, more) {
    if (more > 0) apply(push, items, ["... " + more + " more"]);
    return items.length === 0 ? open + close : open + " " + apply(join, items, [", "]) + " " + close;
  }
  function show(v, depth, seen, top) {
    switch (typeof v) {
      case "string": return top ? v : quote(clip(v));
      case "number": return is(v, -0) ? "-0" : "" + v;
      case "bigint": return v + "n";
      case "boolean": return v ? "true" : "false";
      case "undefined": return "undefined";
      case "symbol": return apply(symbolText, v, []);
      case "function": return "[Function" + (v.name ? ": " + v.name : " (anonymous)") + "]";
    }
    if (v === null) return "null";
    if (apply(indexOf, seen, [v]) >= 0) return "[Circular]";
    if (v instanceof ErrorC) return v.name + ": " + v.message;
    if (v instanceof DateC) return is(apply(dateTime, v, []), NaN) ? "Invalid Date" : apply(dateIso, v, []);
    if (v instanceof RegExpC) return apply(regexText, v, []);
    if (v instanceof PromiseC) return "Promise {}";
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
    if (isArray(v) || isView(v)) {
      const n = v.length;
      for (let i = 0; i < n; i++) {
        if (i >= MAX_ITEMS) { more += n - i; break; }
        add(show(v[i], depth + 1, seen, false));
      }
      const prefix = isArray(v) ? "" : v.constructor.name + "(" + n + ") ";
      return prefix + list("[", "]", items, more);
    }
    if (v instanceof MapC) {
      const it = apply(mapEntries, v, []);
      for (let e = it.next(), i = 0; !e.done; e = it.next(), i++) {
        if (i >= MAX_ITEMS) { more++; continue; }
        add(show(e.value[0], depth + 1, seen, false) + " => " + show(e.value[1], depth + 1, seen, false));
      }
      return "Map(" + apply(mapSize, v, []) + ") " + list("{", "}", items, more);
    }
    if (v instanceof SetC) {
      const it = apply(setValues, v, []);
      for (let e = it.next(), i = 0; !e.done; e = it.next(), i++) {
        if (i >= MAX_ITEMS) { more++; continue; }
        add(show(e.value, depth + 1, seen, false));
      }
      return "Set(" + apply(setSize, v, []) + ") " + list("{", "}", items, more);
    }
    if (v instanceof ArrayBufferC) return "ArrayBuffer { byteLength: " + v.byteLength + " }";
    const keys = ownKeys(v);
    for (let i = 0; i < keys.length; i++) {
      if (i >= MAX_ITEMS) { more += keys.length - i; break; }
      const k = keys[i];
      add((IDENT.test(k) ? k : quote(k)) + ": " + show(v[k], depth + 1, seen, false));
    }
    return list("{", "}", items, more);
  }
  function describe(e) {
    if (e instanceof ErrorC || (e !== null && typeof e === "object" && typeof e.name === "string" && typeof e.message === "string")) {
      let text = e.name + ": " + e.message;
      if (typeof e.stack === "string" && e.stack !== "") text += "\n" + apply(slice, e.stack, [0, 2000]).replace(/\s+$/, "");
      return text;
    }
    return "Uncaught " + show(e, 0, [], false);
  }
  const print = function (...args) {
    const parts = [];
    for (let i = 0; i < args.length; i++) apply(push, parts, [typeof args[i] === "string" ? clip(args[i]) : show(args[i], 0, [], false)]);
    const text = apply(join, parts, [" "]);
    hostWrite(clip(text), text.length);
  };
  const console = {};
  for (const name of ["log", "info", "warn", "error", "debug", "trace"]) console[name] = print;
  Object.defineProperty(globalThis, "console", { value: console, writable: true, configurable: true, enumerable: false });
  return (v, mode) => clip(mode === 1 ? describe(v) : show(v, 0, [], false));
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
  if (/^InternalError: out of memory|^RangeError: out of memory|out of memory in regexp/.test(description)) return "memory";
  if (/^InternalError: stack overflow|^RangeError: Maximum call stack/.test(description) || /^SyntaxError: stack overflow/.test(description)) return "stack_overflow";
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

/** A fresh runtime with the memory, stack and time limits; no module can be imported. */
function limitedRuntime(qjs: QuickJSInstance, limits: SandboxLimits, deadline: () => number): QuickJSRuntime {
  const rt = qjs.module.newRuntime();
  rt.setInterruptHandler(() => Date.now() > deadline());
  rt.setMemoryLimit(limits.memoryLimitBytes);
  rt.setMaxStackSize(limits.maxStackBytes);
  rt.setModuleLoader(() => ({ error: new Error("modules cannot be imported in this sandbox") }));
  return rt;
}

/** Installs `console` (writing into `out`) from the prelude and returns its value inspector; handles go to `own`. */
function installPrelude(vm: QuickJSContext, out: OutputBuffer, limits: SandboxLimits, own: <T extends QuickJSHandle>(h: T) => T): QuickJSHandle {
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
 * Runs `code` as a global script in a fresh runtime and context of `qjs`'s module.
 * Returns `healthy: false` when the module must be discarded afterwards.
 */
export function runInQuickJS(qjs: QuickJSInstance, code: string, limits: SandboxLimits = SANDBOX_DEFAULTS): { result: SandboxResult; healthy: boolean } {
  const t0 = performance.now();
  const out = new OutputBuffer(limits.maxOutputChars);
  const displayBudgetMs = Math.min(250, limits.timeLimitMs);
  let deadline = Date.now() + limits.timeLimitMs;
  const rt = limitedRuntime(qjs, limits, () => deadline);
  const vm = rt.newContext();
  const owned: QuickJSHandle[] = [];
  const own = <T extends QuickJSHandle>(h: T): T => (owned.push(h), h);
  let healthy = true;
  const finish = (r: Omit<SandboxResult, "output" | "outputDropped" | "ms">) => ({
    result: { ...r, output: out.kept, outputDropped: out.dropped, ms: Math.round(performance.now() - t0) },
    healthy,
  });
  try {
    const inspect = installPrelude(vm, out, limits, own);
    const modes = [own(vm.newNumber(0)), own(vm.newNumber(1))];

    /** inspect() with a fresh short deadline; undefined when even that fails (e.g. no memory left). */
    const display = (h: QuickJSHandle, mode: 0 | 1): string | undefined => {
      deadline = Date.now() + displayBudgetMs;
      let r;
      try {
        r = vm.callFunction(inspect, vm.undefined, h, modes[mode]);
      } catch {
        healthy = false; // the bindings could not allocate: do not trust this module again
        return undefined;
      }
      if (r.error) {
        r.error.dispose();
        return undefined;
      }
      const s = vm.typeof(r.value) === "string" ? vm.getString(r.value) : undefined;
      r.value.dispose();
      return s;
    };
    // Held only by this handle: disposing it frees its memory at once, leaving room to describe an out-of-memory failure.
    const reserve = own(vm.newArrayBuffer(new ArrayBuffer(RESERVE_BYTES)));
    /** QuickJS's own count of the bytes its live objects use (it walks the heap). */
    const usedBytes = () => Number(/memory used\s+\d+\s+(\d+)/.exec(rt.dumpMemoryUsage())?.[1] ?? 0);
    const failure = (h: QuickJSHandle, timedOut: boolean, compile: boolean) => {
      // Out of memory with no room left even for the error object, QuickJS throws null; so does `throw null`.
      // What tells them apart is whether the heap is full.
      let memoryFull = false;
      if (vm.typeof(h) === "object" && vm.sameValue(h, vm.null)) {
        reserve.dispose();
        memoryFull = usedBytes() > limits.memoryLimitBytes / 2;
      }
      const shown = memoryFull ? "InternalError: out of memory" : display(h, 1);
      const description = shown ?? (timedOut ? "InternalError: interrupted" : "InternalError: out of memory");
      h.dispose();
      const kind = classify(description, timedOut, compile);
      return finish({ ok: false, error: { kind, message: explain(kind, description, limits) } });
    };

    // Compile first so that a syntax error is told apart from a SyntaxError the code throws.
    const compiled = vm.evalCode(code, "code.js", { type: "global", compileOnly: true });
    if (compiled.error) return failure(compiled.error, false, true);
    compiled.value.dispose();

    const evaluated = vm.evalCode(code, "code.js", { type: "global" });
    if (evaluated.error) return failure(evaluated.error, Date.now() > deadline, false);
    let value = own(evaluated.value);
    // Promise callbacks (then, async functions) run now, under the same deadline.
    const jobs = rt.executePendingJobs();
    if (jobs.error) return failure(jobs.error, Date.now() > deadline, false);
    jobs.dispose();
    const state = vm.getPromiseState(value);
    if (state.type === "rejected") return failure(state.error, false, false);
    if (state.type === "fulfilled" && !state.notAPromise) value = own(state.value);
    if (vm.typeof(value) === "undefined") return finish({ ok: true });
    const shown = state.type === "pending" ? "Promise { <pending> }" : display(value, 0);
    return finish({ ok: true, value: shown ?? "[value could not be displayed]" });
  } catch (err) {
    // The bindings threw: report it, leave the runtime undisposed (its state is unknown), retire the module.
    healthy = false;
    const why = err instanceof HostFailure ? err.message : `the sandbox failed (${(err as Error)?.message || String(err)}); it was reset`;
    return finish({ ok: false, error: { kind: "internal", message: `internal: ${why}` } });
  } finally {
    if (healthy) {
      for (const h of owned.reverse()) if (h.alive) h.dispose();
      vm.dispose();
      rt.dispose();
    }
  }
}
