/**
 * The `javascript` tool's sandbox: ordinary code works; escape attempts find
 * nothing of the host; runaway code (loops, memory and stack bombs, floods of
 * output or of promise jobs) ends as an error the model reads, without costing
 * a worker; values and errors that resist being shown are still reported; the
 * host stays healthy; runs share no state; and 200 runs leak nothing (QuickJS
 * aborts when a runtime is freed with live objects, which would show as a
 * sandbox reset).
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { runToolCall, type ToolCallRecord } from "../src/agent/tool-runner.js";
import type { AnyTool } from "../src/agent/tool.js";
import { createJavaScriptTool, formatSandboxResult, type SandboxErrorKind } from "../src/tools/index.js";

const TIME_LIMIT_MS = 500;
const MAX_OUTPUT = 1_000;
const tool = createJavaScriptTool({
  timeLimitMs: TIME_LIMIT_MS,
  maxOutputChars: MAX_OUTPUT,
  memoryLimitBytes: 32 * 1024 * 1024,
  maxWorkers: 1,
});
const tools = new Map<string, AnyTool>([[tool.name, tool]]);
after(() => tool.sandbox.dispose());

/** One call the way ToolEnv makes it: what the model reads back is `text`. */
function call(code: string): Promise<ToolCallRecord> {
  return runToolCall({ ok: true, name: "javascript", arguments: { code }, raw: "" }, tools, {
    row: {},
    groundTruth: undefined,
    callIndex: 0,
    turn: 0,
    usage: "",
  });
}

async function ok(code: string): Promise<string> {
  const r = await call(code);
  assert.equal(r.ok, true, `expected success for ${code}, got ${r.text}`);
  return r.text;
}

async function fails(code: string, kind: SandboxErrorKind, pattern: RegExp): Promise<string> {
  const r = await tool.sandbox.run(code);
  assert.equal(r.ok, false, `expected a failure for ${code}`);
  assert.equal(r.error?.kind, kind, `${code}: ${r.error?.message}`);
  assert.match(r.error!.message, pattern);
  // Through the tool runner it is an error observation with the same text.
  const rec = await call(code);
  assert.equal(rec.ok, false);
  assert.equal(rec.error?.kind, "tool_error");
  assert.ok(rec.text.startsWith(`Error: tool 'javascript' failed: ${r.error!.message.split("\n")[0]}`), rec.text);
  return rec.text;
}

test("arithmetic, console output and the last expression's value", async () => {
  assert.equal(await ok("1 + 2 * 3"), "=> 7");
  assert.equal(
    await ok("console.log('sum', [1, 2, 3].reduce((a, b) => a + b)); console.log({ a: 1, b: [true, null] })"),
    "sum 6\n{ a: 1, b: [ true, null ] }",
  );
  assert.equal(await ok("const xs = [3, 4]; console.log('squares'); xs.map((x) => x * x)"), "squares\n=> [ 9, 16 ]");
  assert.equal(await ok("'text'"), '=> "text"');
  assert.equal(await ok("(async () => { await null; return 6 * 7 })()"), "=> 42");
  assert.equal(await ok("Promise.resolve(5).then((x) => console.log('then', x)); undefined"), "then 5");
  assert.match(await ok("let x = 1"), /^\(no output/);
  assert.match(
    await ok("[typeof Date.now(), new Date(0).toISOString(), Math.random() < 1, 2n ** 64n]"),
    /^=> \[ "number", "1970-01-01T00:00:00.000Z", true, 18446744073709551616n \]$/,
  );
});

test("code errors come back as text the model can read", async () => {
  await fails("let = ;", "syntax", /^SyntaxError: /);
  await fails("throw new TypeError('boom')", "exception", /^TypeError: boom\n\s+at .*code\.js:1/);
  await fails("null.x", "exception", /TypeError/);
  await fails("throw null", "exception", /^Uncaught null$/);
  await fails("Promise.reject(new Error('async boom'))", "exception", /Error: async boom/);
  const text = await fails(
    "console.log('before'); undefinedName",
    "exception",
    /ReferenceError: 'undefinedName' is not defined/,
  );
  assert.match(text, /Output before the error:\nbefore$/);
});

test("escape attempts find no host objects", async () => {
  await fails("process.exit(1)", "exception", /ReferenceError: 'process' is not defined/);
  await fails(
    "require('fs').readFileSync('/etc/passwd', 'utf8')",
    "exception",
    /ReferenceError: 'require' is not defined/,
  );
  await fails("import('fs')", "exception", /modules cannot be imported/);
  await fails(
    "(async () => (await import('node:child_process')).execSync('id'))()",
    "exception",
    /modules cannot be imported/,
  );
  await fails("import fs from 'fs'", "syntax", /SyntaxError/);
  await fails("globalThis.fetch('http://example.com')", "exception", /TypeError: not a function/);
  assert.equal(
    await ok(
      "[typeof fetch, typeof setTimeout, typeof WebAssembly, typeof Buffer, typeof module, typeof exports, typeof std, typeof os].join()",
    ),
    '=> "undefined,undefined,undefined,undefined,undefined,undefined,undefined,undefined"',
  );
  // The global object, however reached, holds the ECMAScript built-ins and `console`, nothing else.
  const ecmascript = new Set(
    (
      "AggregateError Array ArrayBuffer BigInt BigInt64Array BigUint64Array Boolean DataView Date Error EvalError FinalizationRegistry Float16Array " +
      "Float32Array Float64Array Function Infinity Int16Array Int32Array Int8Array InternalError Iterator JSON Map Math NaN Number Object Promise Proxy " +
      "RangeError ReferenceError Reflect RegExp Set SharedArrayBuffer String Symbol SyntaxError TypeError URIError Uint16Array Uint32Array Uint8Array " +
      "Uint8ClampedArray WeakMap WeakRef WeakSet decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis isFinite isNaN " +
      "parseFloat parseInt undefined unescape console"
    ).split(" "),
  );
  for (const reach of [
    "new Function('return this')()",
    "(0, eval)('this')",
    "console.log.constructor('return this')()",
    "(function () { return this })()",
  ]) {
    const r = await tool.sandbox.run(`JSON.stringify(Object.getOwnPropertyNames(${reach}))`);
    const names = JSON.parse(JSON.parse(r.value!)) as string[];
    assert.ok(names.includes("Array") && names.includes("console"), r.value);
    const extra = names.filter((n) => !ecmascript.has(n));
    assert.deepEqual(extra, [], `${reach} exposes ${extra.join(", ")}`);
  }
  assert.equal(await ok("Object.getOwnPropertyNames(console).join()"), '=> "log,info,warn,error,debug,trace"');
  // The host function behind console.log is not reachable: console.log is sandbox code.
  assert.match(await ok("console.log.toString()"), /^=> "function/);
  assert.equal(await ok("new Function('return typeof process')()"), '=> "undefined"');
});

test("runaway code is stopped: loops, memory, recursion, output floods", async () => {
  await tool.sandbox.run("1"); // the pool starts its worker on the first call
  const before = tool.sandbox.stats();
  // Stopped by the sandbox's own interrupt at the 500 ms limit: the pool's hard timeout (2 s
  // later) would say "could not be interrupted; the sandbox was reset" and replace the worker, and
  // the tool runner's own 30 s timeout would make a "timeout" record, not a "tool_error" (see fails).
  const stopped = /^timeout: the code ran longer than 500 ms and was stopped$/;
  await fails("while (true) {}", "timeout", stopped);
  await fails("try { for (;;) {} } catch (e) { 'caught' }", "timeout", stopped);
  await fails("Promise.resolve().then(() => { for (;;) {} })", "timeout", stopped);
  // Each timeout above ran twice (direct and through the runner), each on the same worker.
  assert.deepEqual(
    [tool.sandbox.stats().runs - before.runs, tool.sandbox.stats().resets, tool.sandbox.stats().workers],
    [6, before.resets, 1],
  );

  await fails("let a = []; for (;;) a.push(new Array(1e6).fill(1))", "memory", /out of memory/);
  await fails("var a = []; for (;;) a.push({ i: a.length })", "memory", /out of memory/);
  await fails("'x'.repeat(1e8)", "memory", /out of memory/);
  await fails("function f(n) { return f(n + 1) + 1 } f(0)", "stack_overflow", /stack overflow/);
  await fails("eval('('.repeat(1e5) + '1' + ')'.repeat(1e5))", "stack_overflow", /stack overflow/);
  await fails("JSON.parse('['.repeat(1e5) + ']'.repeat(1e5))", "stack_overflow", /stack overflow/);
  await fails("let a = []; for (let i = 0; i < 1e5; i++) a = [a]; String(a)", "stack_overflow", /stack overflow/);

  // Output is capped, with a marker saying how much was cut.
  const big = await ok("console.log('y'.repeat(1e6)); 'done'");
  assert.ok(big.length <= MAX_OUTPUT + 100, `output of ${big.length} characters`);
  assert.match(big, /\[truncated: \d+ more characters\]\n=> "done"$/);
  const flood = await call("for (let i = 0; ; i++) console.log('line', i)");
  assert.equal(flood.ok, false);
  // Stopped at the time limit by the interrupt, not by the hard timeout: no worker was replaced.
  assert.match(
    flood.text,
    /^Error: tool 'javascript' failed: timeout: the code ran longer than 500 ms and was stopped\nOutput before the error:\nline 0\nline 1\n[\s\S]*\[truncated: \d+ more characters\]$/,
  );
  assert.ok(flood.text.length <= MAX_OUTPUT + 200, `flood of ${flood.text.length} characters`);
  assert.equal(tool.sandbox.stats().resets, before.resets, "no runaway cost a worker");
});

test("a microtask flood is a timeout of the code, and the worker is not restarted", async () => {
  await tool.sandbox.run("1"); // the pool starts its worker on the first call
  const before = tool.sandbox.stats();
  // Each job schedules the next: an interrupted job only rejects its promise, so only the deadline between batches ends it.
  for (const code of ["function f() { Promise.resolve().then(f) } f()", "(async () => { for (;;) await null })()"]) {
    const r = await tool.sandbox.run(code);
    assert.equal(r.error?.kind, "timeout", `${code}: ${JSON.stringify(r.error)}`);
    assert.match(
      r.error!.message,
      /^timeout: the code kept scheduling promise jobs \(then\/await callbacks\) past the 500 ms limit \(\d+ jobs ran/,
    );
  }
  // An interrupt that QuickJS turned into a rejection (an async function's loop) is still a timeout.
  const swallowed = await tool.sandbox.run("(async () => { for (;;) {} })(); 1");
  assert.equal(swallowed.error?.kind, "timeout", JSON.stringify(swallowed));
  // Each job schedules two: the queue grows until the deadline or the memory stops it, whichever comes first.
  const doubling = await tool.sandbox.run("async function f() { await null; f(); f() } f()");
  assert.ok(doubling.error?.kind === "timeout" || doubling.error?.kind === "memory", JSON.stringify(doubling.error));
  // Memory running out inside a job rejects a promise nobody handles; it is still reported.
  await fails(
    "const a = []; function f() { a.push(new Array(1e4).fill(0)); Promise.resolve().then(f) } f()",
    "memory",
    /^out of memory: .*in a promise job/,
  );
  // 60,000 jobs that end, growing the memory on the way, are just a run. On a sandbox of its own
  // with a deadline far past what they take on any machine, so the assertion counts jobs, not speed.
  const roomy = createJavaScriptTool({ timeLimitMs: 60_000, maxOutputChars: MAX_OUTPUT, maxWorkers: 1 });
  try {
    const r = await roomy.sandbox.run(
      "let n = 0; function f() { if (++n < 3e4) { Promise.resolve().then(f); Promise.resolve().then(f) } else if (n === 3e4) console.log('reached', n) } f()",
    );
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    assert.match(formatSandboxResult(r, MAX_OUTPUT), /reached 30000/);
  } finally {
    await roomy.sandbox.dispose();
  }
  assert.equal(tool.sandbox.stats().resets, before.resets, "no flood cost a worker");
  assert.equal(tool.sandbox.stats().workers, before.workers);
});

test("an exception whose message cannot be shown is an exception, not out of memory", async () => {
  const before = tool.sandbox.stats().resets;
  await fails(
    "throw new Proxy({}, { getPrototypeOf() { throw new TypeError('trap') } })",
    "exception",
    /^Uncaught exception \(its message could not be shown: TypeError: trap\)$/,
  );
  await fails(
    "const r = Proxy.revocable({}, {}); r.revoke(); throw r.proxy",
    "exception",
    /^Uncaught exception \(its message could not be shown: TypeError: revoked proxy\)$/,
  );
  await fails(
    "throw new Proxy({}, { getPrototypeOf() { throw null } })",
    "exception",
    /could not be shown: it threw null\)$/,
  );
  await fails(
    "throw new Proxy({}, { getPrototypeOf() { for (;;); } })",
    "exception",
    /could not be shown: showing it took longer than 250 ms\)$/,
  );
  await fails(
    "const e = new Error('x'); Object.defineProperty(e, 'message', { get() { throw 1 } }); throw e",
    "exception",
    /^Error: \[message not shown: it is a getter\]\n\s+at /,
  );
  // Showing a thrown value runs none of its code.
  await fails("throw { toString() { throw 1 } }", "exception", /^Uncaught \{ toString: \[Function: toString\] \}$/);
  await fails("throw new Proxy({}, { get() { throw 1 } })", "exception", /^Uncaught \{\}$/);
  await fails("throw Symbol('s')", "exception", /^Uncaught Symbol\(s\)$/);
  // Real exhaustion still is memory, also when QuickJS had no room left for the error and threw null.
  await fails("new Map(Array.from({ length: 1e6 }, (_, i) => [i, i]))", "memory", /^out of memory/);
  assert.equal(tool.sandbox.stats().resets, before);
});

test("showing a value runs none of its code and never fails the run", async () => {
  assert.equal(await ok("({ get x() { throw 1 }, y: 2 })"), "=> { x: [Getter], y: 2 }");
  assert.equal(
    await ok("const r = Proxy.revocable({}, {}); r.revoke(); r.proxy"),
    "=> [the value could not be shown: TypeError: revoked proxy]",
  );
  assert.equal(
    await ok("console.log(new Proxy({}, { ownKeys() { throw new Error('trap') } }), 'after'); 1"),
    "[could not be shown: Error: trap] after\n=> 1",
  );
  assert.match(
    await ok("(async () => { await new Promise(() => {}) })()"),
    /^=> Promise \{ <pending> \} \(it never settled: /,
  );
});

test("after all that the host is healthy and the tool still answers", async () => {
  assert.equal(typeof process.exit, "function");
  assert.equal(typeof (globalThis as Record<string, unknown>).console, "object");
  assert.equal(await ok("6 * 7"), "=> 42");
  assert.equal(tool.sandbox.stats().resets, 0, "no run left the sandbox in an unknown state");
});

test("runs share no state", async () => {
  assert.equal(await ok("globalThis.leak = 41; var v = 1; Object.prototype.polluted = true; leak + 1"), "=> 42");
  assert.equal(await ok("[typeof leak, typeof v, ({}).polluted].join()"), '=> "undefined,undefined,"');
  assert.equal(await ok("JSON.stringify = () => 'hacked'; Array.prototype.join = null; 1"), "=> 1");
  assert.equal(await ok("JSON.stringify({ a: 1 })"), '=> "{\\"a\\":1}"');
});

test("an aborted call ends its thread; the next call gets a fresh one", async () => {
  const controller = new AbortController();
  const run = tool.sandbox.run("while (true) {}", controller.signal);
  setTimeout(() => controller.abort(new Error("stop")), 100);
  await assert.rejects(run, /stop/);
  assert.equal(await ok("'alive'"), '=> "alive"');
  assert.equal(tool.sandbox.stats().resets, 1);
});

test("200 sequential calls leak nothing", async () => {
  const before = tool.sandbox.stats().resets;
  for (let i = 0; i < 20; i++) await tool.sandbox.run(`${i} + 1`); // warm up
  const rss0 = process.memoryUsage().rss;
  for (let i = 0; i < 200; i++) {
    const kind = i % 4;
    const code = [
      "[1, 2, 3].map((x) => x * " + i + ")",
      "console.log('i', " + i + "); ({ i: " + i + " })",
      "throw new Error('e" + i + "')",
      "} syntax error " + i,
    ][kind];
    const r = await tool.sandbox.run(code);
    assert.equal(r.ok, kind < 2, `${code}: ${JSON.stringify(r)}`);
  }
  const growthMb = (process.memoryUsage().rss - rss0) / (1024 * 1024);
  assert.ok(growthMb < 64, `rss grew ${growthMb.toFixed(1)} MiB over 200 calls`);
  // A handle left alive would make QuickJS abort when the runtime is freed, which resets the sandbox.
  assert.equal(tool.sandbox.stats().resets, before);
  assert.equal(tool.sandbox.stats().workers, 1);
});

test("formatSandboxResult keeps the error and the value whole and cuts the printed output", () => {
  const r = { ok: true, output: "z".repeat(500), outputDropped: 20, value: "42", ms: 1 };
  const text = formatSandboxResult(r, 100);
  assert.match(text, /^z+\n\[truncated: 426 more characters\]\n=> 42$/);
  assert.equal(
    formatSandboxResult(
      { ok: false, output: "", outputDropped: 0, error: { kind: "timeout", message: "timeout: x" }, ms: 1 },
      100,
    ),
    "timeout: x",
  );
});
