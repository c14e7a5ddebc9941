/**
 * Tools from strangers (docs/reliability.md): JSON Schemas whose patterns backtrack
 * catastrophically or need backtracking at all, MCP servers whose tool listing never ends, that
 * answer with more than the message limit (over stdio and streamable HTTP), or that log without
 * end to stderr. Each only ever fails its own tool or call, with one line naming it; the process
 * is never blocked and the connection is never lost.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { defineTool, type AnyTool } from "../src/agent/tool.js";
import { runToolCall } from "../src/agent/tool-runner.js";
import { compileJsonSchema } from "../src/agent/tool-schema.js";
import {
  connectMcp,
  MAX_MCP_TOOL_PAGES,
  MAX_MCP_TOOLS,
  mcpTools,
  type McpClientLike,
  type McpToolInfo,
} from "../src/tools/ecosystem.js";
import { InputError } from "../src/util/errors.js";

const ctx = { row: {}, groundTruth: undefined, callIndex: 0, turn: 0, usage: "" };
const run = (tools: AnyTool[], name: string, args: Record<string, unknown>) =>
  runToolCall({ ok: true, name, arguments: args, raw: "" }, new Map(tools.map((t) => [t.name, t])), ctx);

/** A tool whose string argument `s` must match `pattern`; counts its executions. */
function patternTool(pattern: string, timeoutMs = 30_000) {
  const tool = {
    executed: 0,
    tool: defineTool({
      name: "lookup",
      description: "Looks a key up.",
      inputSchema: { type: "object", properties: { s: { type: "string", pattern } }, required: ["s"] },
      timeoutMs,
      execute: () => {
        tool.executed++;
        return "found";
      },
    }),
  };
  return tool;
}

const EVIL = ["^(a+)+$", "(a|aa)+$", "(x+x+)+y"];

test(
  "catastrophic patterns (^(a+)+$, (a|aa)+$, (x+x+)+y) are checked in linear time: a 41-character argument is refused at once, through the tool runner",
  { timeout: 60_000 },
  async () => {
    // A backtracking RegExp takes minutes (2^40 paths) on each of these; this test would time out.
    for (const pattern of EVIL) {
      const t = patternTool(pattern);
      for (const s of ["a".repeat(40) + "!", "x".repeat(40)]) {
        const r = await run([t.tool], "lookup", { s });
        assert.equal(r.error?.kind, "invalid_arguments", `${pattern} on ${s}`);
        assert.ok(r.text.includes(`s: must match pattern "${pattern}"`), r.text);
      }
      assert.equal(t.executed, 0);
    }
    // patternProperties and propertyNames run patterns on keys the model writes.
    const keys = compileJsonSchema(
      {
        type: "object",
        patternProperties: { "^(a+)+$": { type: "number" } },
        propertyNames: { pattern: "^(b|bb)+$|^(a+)+$" },
      },
      "tool 'keys'",
    );
    assert.match(keys({ ["a".repeat(40) + "!"]: 1 }) ?? "", /property name must be valid/);
    assert.match(keys({ ["a".repeat(40)]: "x" }) ?? "", /must be number/);
    assert.equal(keys({ ["a".repeat(40)]: 1, ["b".repeat(40)]: 2 }), null);
  },
);

test(
  "a tool with a catastrophic pattern still times out at its timeoutMs when its arguments pass",
  { timeout: 60_000 },
  async () => {
    const hang = defineTool({
      name: "hang",
      description: "Never answers.",
      inputSchema: { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } },
      timeoutMs: 200,
      execute: () => new Promise<string>(() => {}),
    });
    const ok = await run([hang], "hang", { s: "a".repeat(10_000) });
    assert.equal(ok.error?.kind, "timeout");
    assert.match(ok.text, /tool 'hang' timed out after 200 ms/);
    const bad = await run([hang], "hang", { s: "a".repeat(10_000) + "!" });
    assert.equal(bad.error?.kind, "invalid_arguments");
  },
);

test("a pattern RE2 cannot run (a backreference, a lookaround) is refused when the tool is defined, naming the tool and the pattern", () => {
  const cases: [string, RegExp][] = [
    ["^(a)\\1$", /it has a backreference, \\1/],
    ["^(?<q>a)\\k<q>$", /it has a backreference, \\k<\.\.\.>/],
    ["^(?=a)\\w+$", /it has a lookaround, \(\?=\.\.\.\)/],
    ["^\\w+(?<!x)$", /it has a lookaround, \(\?<!\.\.\.\)/],
    ["^a{2000}$", /RE2: invalid repeat count/],
    ["^(a", /is not a valid regular expression/],
  ];
  for (const [pattern, why] of cases) {
    assert.throws(
      () => patternTool(pattern),
      (err: Error) => {
        assert.ok(err instanceof InputError, String(err));
        assert.ok(err.message.startsWith("tool 'lookup': the JSON Schema of its arguments is refused: "), err.message);
        assert.ok(err.message.includes(`pattern ${JSON.stringify(pattern)}`), err.message);
        assert.match(err.message, why);
        assert.equal(err.message.split("\n").length, 1);
        return true;
      },
    );
  }
});

test("ordinary patterns validate as ECMAScript does, both ways (classes, Unicode properties, white space, dot, unicode escapes, named groups)", async () => {
  const patterns = [
    "^[a-z]+$",
    "^\\p{L}+$",
    "^\\p{Lu}",
    "^\\p{Script=Greek}+$",
    "^\\s+$",
    "^\\S+$",
    "^[\\s\\d]+$",
    "^.$",
    "\\bfoo\\b",
    "^\\u00e9$",
    "^\\u{1F600}$",
    "^\\uD83D\\uDE00$",
    "^[\\u4e00-\\u9fa5]+$",
    "^(?<year>\\d{4})-\\d\\d$",
    "^[^]$",
    "^\\d{3}-\\d{4}$",
    "^https?://[^/]+/",
    "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
  ];
  const samples = ["abc", "Abc", "é", "αβγ", " ", "\u00a0", "\u2028", "\n", "\r", "\t", "x y", "a foo b", "éfooé"];
  samples.push("😀", "中文", "2024-01", "", "555-1234", "https://x.org/a", "a.b@c.io", "a..b@c", "ABC");
  let checked = 0;
  for (const pattern of patterns) {
    const check = compileJsonSchema({ type: "object", properties: { s: { type: "string", pattern } } }, "tool 'p'");
    const js = new RegExp(pattern, "u");
    for (const s of samples) {
      assert.equal(check({ s }) === null, js.test(s), `${JSON.stringify(pattern)} on ${JSON.stringify(s)}`);
      checked++;
    }
  }
  assert.equal(checked, patterns.length * samples.length);
  // And through the tool runner, both ways.
  const t = patternTool("^[a-z]+$");
  assert.equal((await run([t.tool], "lookup", { s: "abc" })).text, "found");
  assert.equal((await run([t.tool], "lookup", { s: "ab1" })).error?.kind, "invalid_arguments");
});

test("two tools whose JSON Schemas carry the same $id are both defined, each with its own schema", async () => {
  const make = (name: string, type: string) =>
    defineTool({
      name,
      description: name,
      inputSchema: { $id: "arguments", type: "object", properties: { x: { type } }, required: ["x"] },
      execute: () => "ok",
    });
  const a = make("a", "string");
  const b = make("b", "number"); // used to be refused: schema with key or id "arguments" already exists
  assert.equal((await run([a, b], "a", { x: "s" })).text, "ok");
  assert.equal((await run([a, b], "b", { x: 1 })).text, "ok");
  assert.equal((await run([a, b], "b", { x: "s" })).error?.kind, "invalid_arguments");
});

test("a JSON Schema's formats (email, regex) compile without a warning on the console and run nothing", async (t) => {
  const warn = t.mock.method(console, "warn", () => {});
  const log = t.mock.method(console, "log", () => {});
  const check = compileJsonSchema(
    {
      type: "object",
      properties: { to: { type: "string", format: "email" }, rule: { type: "string", format: "regex" } },
    },
    "tool 'mail'",
  );
  // An unknown format used to print "unknown format ... ignored in schema" at every compile.
  assert.equal(warn.mock.callCount() + log.mock.callCount(), 0);
  assert.equal(check({ to: "not an address", rule: "(a+)+$" }), null);
  assert.match(check({ to: 1 }) ?? "", /^to: must be string$/);
});

// ---- MCP tool listings ----

const tool = (name: string): McpToolInfo => ({ name, description: name, inputSchema: { type: "object" } });

/** An MCP client whose tools/list answers with `page(n)` for the n-th call (from 1). */
function scriptedClient(page: (n: number) => { tools: McpToolInfo[]; nextCursor?: string }) {
  const client = {
    calls: 0,
    getServerVersion: () => ({ name: "pager", version: "1" }),
    async listTools() {
      return page(++client.calls);
    },
    async callTool() {
      return { content: [{ type: "text", text: "ok" }] };
    },
  };
  return client satisfies McpClientLike & { calls: number };
}

test("an MCP server whose tools/list pages forever is refused after 100 pages, naming the server", async () => {
  const client = scriptedClient((n) => ({ tools: [tool(`t${n}`)], nextCursor: `page-${n + 1}` }));
  await assert.rejects(mcpTools(client), (err: Error) => {
    assert.ok(err instanceof InputError);
    assert.equal(err.message, "MCP server 'pager': tools/list goes on past 100 pages (MAX_MCP_TOOL_PAGES)");
    return true;
  });
  assert.equal(client.calls, MAX_MCP_TOOL_PAGES);
  // A listing of 99 pages is fine.
  const finite = scriptedClient((n) => ({ tools: [tool(`t${n}`)], ...(n < 99 ? { nextCursor: `c${n}` } : {}) }));
  assert.equal((await mcpTools(finite)).length, 99);
});

test("an MCP server whose tools/list repeats a cursor is refused at once, naming the server and the cursor", async () => {
  const client = scriptedClient((n) => ({ tools: [tool(`t${n}`)], nextCursor: n % 2 ? "a" : "b" }));
  await assert.rejects(
    mcpTools(client),
    /^InputError: MCP server 'pager': page 3 of tools\/list gives a cursor it gave before \("a"\); the listing would never end$/,
  );
  assert.equal(client.calls, 3);
});

test("an MCP server that lists more than 10,000 tools is refused, naming the server", async () => {
  const client = scriptedClient((n) => ({
    tools: Array.from({ length: 6000 }, (_, i) => tool(`t${n}_${i}`)),
    nextCursor: `c${n}`,
  }));
  await assert.rejects(mcpTools(client), /^InputError: MCP server 'pager': lists more than 10000 tools \(by page 2/);
  assert.equal(client.calls, 2);
  assert.equal(MAX_MCP_TOOLS, 10_000);
});

test("an MCP tool whose input or output schema has a pattern RE2 cannot run is refused, naming the tool", async () => {
  const input = scriptedClient(() => ({
    tools: [{ name: "find", inputSchema: { type: "object", properties: { q: { type: "string", pattern: "(?!x)" } } } }],
  }));
  await assert.rejects(
    mcpTools(input),
    /^InputError: tool 'find': the JSON Schema of its arguments is refused: pattern/,
  );
  const output = scriptedClient(() => ({
    tools: [
      {
        name: "find",
        inputSchema: { type: "object" },
        outputSchema: { type: "object", properties: { r: { type: "string", pattern: "(a)\\1" } } },
      },
    ],
  }));
  await assert.rejects(
    mcpTools(output),
    /^InputError: tool 'find': the JSON Schema of its output is refused: pattern "\(a\)\\\\1" .*backreference/,
  );
});

// ---- MCP answers over the limit ----

/** test/fixtures/mcp-big-server.ts (its .js when the tests run built): big, echo, chatty. */
function bigServer() {
  const js = fileURLToPath(new URL("./fixtures/mcp-big-server.js", import.meta.url));
  const file = existsSync(js) ? js : js.replace(/\.js$/, ".ts");
  return { command: process.execPath, args: [...process.execArgv, file, "stdio"] };
}

test(
  "an MCP answer over 10 MiB (stdio) fails only its call; the next call to the same server works",
  { timeout: 60_000 },
  async () => {
    const client = await connectMcp(bigServer());
    try {
      const tools = await mcpTools(client, { timeoutMs: 30_000 });
      const big = await run(tools, "big", { mib: 11 });
      assert.equal(big.error?.kind, "tool_error");
      assert.match(
        big.text,
        /^Error: tool 'big' failed: MCP error -32603: MCP server 'test-big': its answer was dropped: a message of 11,534,\d{3} bytes is over the limit of 10,485,760 bytes \(maxMessageBytes\)$/,
      );
      assert.equal((await run(tools, "echo", { text: "still here" })).text, "still here");
      // Just under the limit is read whole (and cut to maxResponseChars for the model).
      const under = await run(tools, "big", { mib: 9.9 });
      assert.equal(under.ok, true);
      assert.match(under.text, /\[truncated: \d+ more characters\]$/);
    } finally {
      await client.close();
    }
  },
);

/**
 * A bare JSON-RPC server (no SDK) that writes each answer with its id first, as other SDKs do;
 * `big` answers with `kib` KiB of text full of braces, brackets, quotes and backslashes; `shaped`
 * has an output schema whose pattern backtracks catastrophically, and answers what sets it off.
 */
const RAW_SERVER = `
const rl = require("node:readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
rl.on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === "initialize")
    return send({ id: m.id, jsonrpc: "2.0", result: { protocolVersion: m.params.protocolVersion,
      capabilities: { tools: {} }, serverInfo: { name: "raw", version: "1" } } });
  if (m.method === "tools/list")
    return send({ id: m.id, jsonrpc: "2.0", result: { tools: [{ name: "big", inputSchema: { type: "object" } },
      { name: "shaped", inputSchema: { type: "object" },
        outputSchema: { type: "object", properties: { code: { type: "string", pattern: "^(a+)+$" } } } }] } });
  if (m.params.name === "shaped")
    return send({ id: m.id, jsonrpc: "2.0", result: { content: [{ type: "text", text: "done" }],
      structuredContent: { code: "a".repeat(40) + "!" } } });
  const kib = m.params.arguments.kib;
  send({ id: m.id, jsonrpc: "2.0", result: { content: [{ type: "text", text: '{"id": 7, [}\\\\"'.repeat(kib * 64) }] } });
});`;

test("an oversized answer whose id comes first, its text full of braces, quotes and backslashes, fails only its call", async () => {
  const client = await connectMcp({ command: process.execPath, args: ["-e", RAW_SERVER], maxMessageBytes: 64 * 1024 });
  try {
    const tools = await mcpTools(client, { timeoutMs: 20_000 });
    const big = await run(tools, "big", { kib: 1024 });
    assert.match(
      big.text,
      /^Error: tool 'big' failed: MCP error -32603: MCP server 'raw': its answer was dropped: a message of 1,179,7\d\d bytes is over the limit of 65,536 bytes/,
    );
    assert.equal((await run(tools, "big", { kib: 1 })).text, '{"id": 7, [}\\"'.repeat(64));
  } finally {
    await client.close();
  }
});

test("an MCP server that writes 1 MiB to stderr keeps answering (stdio)", { timeout: 60_000 }, async () => {
  const client = await connectMcp(bigServer());
  try {
    // The SDK's transport piped stderr into a stream nobody read: the server blocked, every call timed out.
    const tools = await mcpTools(client, { timeoutMs: 20_000 });
    assert.equal((await run(tools, "chatty", { kib: 1024 })).text, "logged 1024 KiB");
    assert.equal((await run(tools, "echo", { text: "after" })).text, "after");
  } finally {
    await client.close();
  }
});

/** An MCP server over streamable HTTP on loopback (stateless: a server per request), JSON or SSE answers. */
async function httpServer(json: boolean): Promise<{ url: string; server: Server }> {
  const server = createServer(async (req, res) => {
    const mcp = new McpServer({ name: "test-http", version: "1.0.0" });
    mcp.registerTool("big", { description: "Big.", inputSchema: { mib: z.number() } }, async ({ mib }) => ({
      content: [{ type: "text", text: "x".repeat(Math.round(mib * 1024 * 1024)) }],
    }));
    mcp.registerTool("echo", { description: "Echo.", inputSchema: { text: z.string() } }, async ({ text }) => ({
      content: [{ type: "text", text }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
    res.on("close", () => void transport.close().then(() => mcp.close()));
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, server };
}

test(
  "an MCP answer over maxMessageBytes (streamable HTTP, JSON and SSE) fails only its call; the next call works",
  { timeout: 60_000 },
  async () => {
    for (const json of [true, false]) {
      const { url, server } = await httpServer(json);
      const client = await connectMcp({ url, maxMessageBytes: 1024 * 1024 });
      try {
        const tools = await mcpTools(client, { timeoutMs: 20_000 });
        const big = await run(tools, "big", { mib: 2 });
        assert.equal(big.error?.kind, "tool_error", `${json ? "JSON" : "SSE"}: ${big.text}`);
        assert.match(
          big.text,
          /^Error: tool 'big' failed: (MCP error -32603: )?MCP server 'test-http': its answer was dropped: (the answer|an event) is over the limit of 1,048,576 bytes \(maxMessageBytes\)$/,
        );
        assert.equal((await run(tools, "echo", { text: "still here" })).text, "still here");
        assert.equal((await run(tools, "big", { mib: 0.5 })).ok, true);
      } finally {
        await client.close();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    }
  },
);

test(
  "an MCP tool's output schema with a catastrophic pattern is checked in linear time by connectMcp's client",
  { timeout: 60_000 },
  async () => {
    // The SDK's own validator (a backtracking RegExp) would block the process for minutes here.
    const client = await connectMcp({ command: process.execPath, args: ["-e", RAW_SERVER] });
    try {
      const tools = await mcpTools(client, { timeoutMs: 20_000 });
      const shaped = await run(tools, "shaped", {});
      assert.equal(shaped.error?.kind, "tool_error");
      assert.match(shaped.text, /does not match the tool's output schema: code: must match pattern "\^\(a\+\)\+\$"/);
    } finally {
      await client.close();
    }
  },
);

test("an MCP server over HTTP that redirects elsewhere: not followed, the other server never sees the key", async () => {
  let seen = 0;
  const other = createServer((req, res) => {
    seen++;
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  const elsewhere = `http://127.0.0.1:${(other.address() as AddressInfo).port}/mcp`;
  const redirecting = createServer((_req, res) => res.writeHead(307, { Location: elsewhere }).end());
  await new Promise<void>((resolve) => redirecting.listen(0, "127.0.0.1", resolve));
  try {
    await assert.rejects(
      connectMcp({
        url: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/mcp`,
        headers: { Authorization: "Bearer s3cret" },
      }),
      (e: Error) => /redirect \(HTTP 307\) to http:\/\/127\.0\.0\.1:\d+\/mcp; not followed/.test(e.message),
    );
    assert.equal(seen, 0, "the redirect was followed");
  } finally {
    for (const s of [other, redirecting]) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
  }
});
