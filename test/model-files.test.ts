/**
 * Model files come from strangers (hubs): a chat template or a config.json must never crash the
 * process or spend seconds and gigabytes before failing. Each probe ends in a one-line
 * ModelFormatError naming the file and field, in bounded time.
 */
import { mock, test } from "node:test";
import assert from "node:assert/strict";
import fs, { closeSync, openSync, readFileSync, rmSync, writeFileSync, ftruncateSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import {
  COMPACT_CHAT_TEMPLATE,
  DEFAULT_CHAT_TEMPLATE,
  renderChatTemplate,
  type ChatMessage,
  type ToolSchema,
} from "../src/model/chat-template.js";
import { boundedRange, strftime } from "../src/model/template-limits.js";
import { parseModelConfig, presetConfigJson, type ModelConfig } from "../src/model/config.js";
import { checkModelFits } from "../src/model/model-limits.js";
import { loadModelDir } from "../src/model/model-dir.js";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { startServer } from "../src/serve/server.js";
import { runCli } from "../src/cli/main.js";
import { ModelFormatError } from "../src/util/errors.js";
import { LLAMA3_TEST_TEMPLATE } from "../src/testing/index.js";
import { loadAddon } from "../src/engine/local/addon.js";
import { captureIO, tempDir } from "./helpers.js";

const user: ChatMessage[] = [{ role: "user", content: "hi" }];

/**
 * Runs `f`, which must throw a ModelFormatError on tokenizer_config.json (chat_template); returns it
 * and how often the render read the clock. The clock is a counter: each read is one virtual
 * millisecond later than the last, so a time limit is counted in deadline checks (one every few
 * hundred evaluation steps), the same on every machine. A render that read it 100,000 times is
 * stopped as runaway.
 */
function templateError(f: () => unknown): { message: string; clockReads: number } {
  let clockReads = 0;
  const clock = mock.method(performance, "now", () => {
    if (++clockReads > 100_000) throw new Error("runaway render: the clock was read 100000 times");
    return clockReads;
  });
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  } finally {
    clock.mock.restore();
  }
  assert.ok(err instanceof ModelFormatError, `expected a ModelFormatError, got ${String(err)}`);
  assert.equal(err.file, "tokenizer_config.json");
  assert.equal(err.field, "chat_template");
  assert.ok(!err.message.includes("\n"), "one line");
  return { message: err.message, clockReads };
}

test("a template looping over range(1e9) fails at once instead of running the heap out", () => {
  const { message, clockReads } = templateError(() =>
    renderChatTemplate("{% for i in range(1000000000) %}x{% endfor %}", { messages: user }),
  );
  assert.match(message, /range\(\) of 1000000000 items is over the 1048576-item limit/);
  // At once: the clock was read when the render began and never again, so the render stopped
  // before its first deadline check, i.e. before a single loop pass (the loop body alone would be
  // a billion steps).
  assert.equal(clockReads, 1, "deadline checks before the refusal");
  assert.equal(
    renderChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", { messages: user }),
    "hi",
    "the process renders on",
  );
});

test("nested loops stop at the time limit", () => {
  const nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
  const { message, clockReads } = templateError(() =>
    renderChatTemplate(nested, { messages: user, limits: { timeMs: 100 } }),
  );
  assert.match(message, /rendering ran past the 100 ms limit \(\d+ steps\)/);
  // Stopped at the first deadline check past the limit: one read at the start, then 101 checks
  // (each a virtual millisecond), the 101st past 100 ms.
  assert.equal(clockReads, 1 + 101);
  // And checked often, inside the inner loop: at most 1,000 steps between checks (checked only
  // per outer pass, it would be 100,000 steps and more).
  const steps = Number(/\((\d+) steps\)/.exec(message)![1]);
  assert.ok(steps <= 1000 * 101, `${steps} steps for 101 deadline checks`);
});

test("output growth stops at the size limits: a loop's output, a doubled string, kept copies", () => {
  const hundred = "x".repeat(100);
  const loop = templateError(() =>
    renderChatTemplate(`{% for i in range(100000) %}${hundred}{% endfor %}`, { messages: user }),
  );
  assert.match(loop.message, /a for loop's output passed the 4194304-character limit/);
  const doubled = templateError(() =>
    renderChatTemplate(
      '{% set ns = namespace(s="x") %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}',
      { messages: user },
    ),
  );
  assert.match(doubled.message, /a string of 8388608 characters is over the 4194304-character limit/);
  // 1000 distinct 4 MiB strings kept in a list would hold 4 GB; the build budget stops it at 128 Mi characters.
  const kept = templateError(() =>
    renderChatTemplate(
      '{% set ns = namespace(s="ab", l=[]) %}{% for i in range(21) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}' +
        "{% for i in range(1000) %}{% set ns.l = ns.l + [ns.s | upper] %}{% endfor %}{{ ns.l | length }}",
      { messages: user },
    ),
  );
  assert.match(kept.message, /string operations built over 134217728 characters in one render/);
  // Each stopped at a size limit, long before the default 2 s time limit could stop it: counted
  // in deadline checks (virtual milliseconds, one per few hundred steps), not in time.
  assert.deepEqual(
    [loop, doubled, kept].map((e) => e.clockReads < 1000),
    [true, true, true],
    `deadline checks: ${[loop, doubled, kept].map((e) => e.clockReads).join(", ")}`,
  );
});

test("every limit is enforced where it claims (the interpreter's overrides are called)", () => {
  const small = (limits: object, tpl: string) =>
    templateError(() => renderChatTemplate(tpl, { messages: user, limits })).message;
  assert.match(
    small({ maxChars: 5 }, "{% for i in range(3) %}ab{% endfor %}"),
    /for loop's output passed the 5-character limit/,
  );
  assert.match(small({ maxChars: 5 }, '{{ "abc" ~ "def" }}'), /a string of 6 characters/);
  assert.match(small({ maxItems: 3 }, "{{ [1, 2] + [3, 4] }}"), /a list of 4 items is over the 3-item limit/);
  assert.match(small({ maxItems: 3 }, "{{ range(4) }}"), /range\(\) of 4 items/);
  assert.match(small({ maxBuiltChars: 10 }, '{{ "abcdef" ~ "ghijkl" }}'), /built over 10 characters/);
  assert.match(small({ timeMs: 0 }, "{% for i in range(1000) %}{{ i }}{% endfor %}"), /past the 0 ms limit/);
  assert.equal(
    renderChatTemplate("{% for i in range(3) %}ab{% endfor %}", { messages: user, limits: { maxChars: 6 } }),
    "ababab",
    "at the limit is fine",
  );
});

const TOOLS: ToolSchema[] = [
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the wiki.",
      parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
    },
  },
  {
    type: "function",
    function: {
      name: "calculator",
      description: "Evaluate arithmetic",
      parameters: { type: "object", properties: { expression: { type: "string" } } },
    },
  },
];

/** System prompt, then user / assistant-with-tool-call / tool turns: 20 messages. */
function conversation(): ChatMessage[] {
  const m: ChatMessage[] = [{ role: "system", content: "You are a helpful assistant." }];
  for (let i = 0; m.length < 20; i++) {
    m.push({ role: "user", content: `Question ${i}: how many people live in city ${i}?` });
    const args = i % 2 ? { query: `city ${i} population` } : `{"query": "city ${i}"}`;
    m.push({
      role: "assistant",
      content: `<think>search city ${i}</think>`,
      tool_calls: [{ type: "function", function: { name: "search", arguments: args } }],
    });
    m.push({ role: "tool", name: "search", content: `City ${i} has ${1000 * i} people.` });
  }
  return m;
}

test("default, compact and test templates render byte-identically to Template.render", () => {
  const messages = conversation();
  const rangeTemplate =
    "{% for i in range(messages | length - 1, -1, -3) %}{{ messages[i].role }},{% endfor %}" +
    "{% for x in range(0, 1, 0.1) %}{{ x }};{% endfor %}{{ range(4) | join('-') }}{{ range(2, 5) }}";
  for (const src of [DEFAULT_CHAT_TEMPLATE, COMPACT_CHAT_TEMPLATE, LLAMA3_TEST_TEMPLATE, rangeTemplate]) {
    for (const tools of [TOOLS, undefined]) {
      const ours = renderChatTemplate(src, {
        messages,
        tools,
        addGenerationPrompt: true,
        bosToken: "<s>",
        eosToken: "</s>",
      });
      const ctx = {
        messages,
        ...(tools ? { tools } : {}),
        add_generation_prompt: true,
        bos_token: "<s>",
        eos_token: "</s>",
      };
      assert.equal(ours, new Template(src).render(ctx));
    }
  }
  assert.equal(strftime(new Date(2024, 2, 5, 7, 4), "%d %b %Y|%B %H:%M|%m|%%Y %q"), "05 Mar 2024|March 07:04|03|%Y %q");
  assert.deepEqual(boundedRange(5, undefined, 1, 10), [0, 1, 2, 3, 4]);
  assert.deepEqual(boundedRange(10, 0, -4, 10), [10, 6, 2]);
});

test("a server whose template loops answers with an error and keeps serving", async () => {
  const dir = join(tempDir("agent-r1-model-files-"), "tiny");
  await initModel({ preset: "tiny", out: dir });
  const configPath = join(dir, "tokenizer_config.json");
  const tokConfig = JSON.parse(readFileSync(configPath, "utf8")) as Record<string, unknown>;
  writeFileSync(
    configPath,
    JSON.stringify({ ...tokConfig, chat_template: "{% for i in range(1000000000) %}x{% endfor %}" }),
  );
  const engine = await LocalEngine.load(dir, { workers: 0 });
  const server = await startServer({ engine, port: 0, log: () => {} });
  try {
    const json = { "Content-Type": "application/json" };
    const chat = async () => {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ messages: user, max_tokens: 2 }),
      });
      return { status: res.status, body: (await res.json()) as { error: { message: string } } };
    };
    const first = await chat();
    assert.equal(first.status, 400);
    assert.match(
      first.body.error.message,
      /tokenizer_config\.json \(chat_template\): chat template stopped: range\(\) of 1000000000 items/,
    );
    const completion = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ prompt: "hi", max_tokens: 2 }),
    });
    assert.equal(completion.status, 200, "requests without the template still work");
    assert.equal((await chat()).status, 400, "and the next chat request gets the same answer");
  } finally {
    await server.close();
    await engine.dispose();
  }
});

/** A tiny model directory whose config.json has `patch` applied. */
async function modelWithConfig(patch: Record<string, unknown>): Promise<string> {
  const dir = join(tempDir("agent-r1-model-files-"), "m");
  await initModel({ preset: "tiny", out: dir });
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(dir, "config.json"), JSON.stringify({ ...config, ...patch }));
  return dir;
}

/**
 * `agent-r1 generate` on `dir`, which must fail with one line on stderr. The directory's tokenizer
 * and weights are removed first: loading reads config.json, then the tokenizer, then the weights,
 * so an error about config.json proves the refusal came before anything else was read (reading
 * either would have failed with "file not found" instead), in this process or in a worker.
 */
async function generateError(dir: string): Promise<{ line: string }> {
  for (const f of ["tokenizer.json", "model.safetensors"]) rmSync(join(dir, f));
  const io = captureIO();
  const code = await runCli(["generate", "--model", dir, "--prompt", "hi", "--max-tokens", "2"], io);
  assert.equal(code, 1);
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.ok(!io.stderr[0].includes("\n"), "one line");
  assert.doesNotMatch(io.stderr[0], /tokenizer|safetensors|not found/);
  return { line: io.stderr[0] };
}

test("absurd sizes in config.json: one line naming the file and field, in well under a second", async () => {
  const cases: [string, number][] = [
    ["num_hidden_layers", 1e9],
    ["hidden_size", 1e7],
    ["vocab_size", 1e10],
    ["max_position_embeddings", 1e12],
  ];
  for (const [field, value] of cases) {
    assert.throws(
      () => parseModelConfig(presetConfigJson("tiny", 1024, { [field]: value })),
      (e: unknown) =>
        e instanceof ModelFormatError &&
        e.file === "config.json" &&
        e.field === field &&
        new RegExp(`^config\\.json \\(${field}\\): ${value} is out of range: at most \\d+ is accepted \\(`).test(
          e.message,
        ),
    );
    // In well under a second, counted as work not time: refused from config.json alone, before the
    // tokenizer or any weight is read (see generateError).
    const { line } = await generateError(await modelWithConfig({ [field]: value }));
    assert.match(line, new RegExp(`^error: \\S+config\\.json \\(${field}\\): ${value} is out of range`));
  }
});

/** checkModelFits's one-line message for a config too large to load. */
function fitsError(c: ModelConfig): string {
  try {
    checkModelFits(c);
  } catch (e) {
    assert.ok(e instanceof ModelFormatError && !e.message.includes("\n"));
    return e.message;
  }
  return assert.fail("the model was accepted");
}

test("a model too large for a replica's 4 GiB is refused before loading, naming the field that makes it so", async () => {
  // Llama 3.1 405B's shape: every field is real, the whole is not for this engine.
  const llama405b = {
    num_hidden_layers: 126,
    hidden_size: 16384,
    num_attention_heads: 128,
    num_key_value_heads: 8,
    intermediate_size: 53248,
    vocab_size: 128256,
    max_position_embeddings: 131072,
    tie_word_embeddings: false,
  };
  const config = parseModelConfig(presetConfigJson("tiny", 1024, llama405b));
  assert.equal(config.numLayers, 126, "reading a config does not check its size");
  assert.match(
    fitsError(config),
    /^config\.json \(hidden_size\): 126 layers of hidden_size 16384, intermediate_size 53248 make 4\.1e11 parameters \(1\.62 TB in float32\); this engine holds at most 4 GiB of weights per replica$/,
  );
  const deep = parseModelConfig(
    presetConfigJson("tiny", 1024, {
      num_hidden_layers: 1000,
      hidden_size: 4096,
      num_attention_heads: 32,
      intermediate_size: 11008,
    }),
  );
  assert.match(fitsError(deep), /^config\.json \(num_hidden_layers\): 1000 layers/);
  const wide = parseModelConfig(presetConfigJson("tiny", 2 ** 24, { hidden_size: 1024, num_attention_heads: 8 }));
  assert.match(
    fitsError(wide),
    /^config\.json \(vocab_size\): 16777216 tokens of hidden_size 1024 make 1\.7e10 parameters/,
  );
  checkModelFits(parseModelConfig(presetConfigJson("medium", 32000)));

  // The TF.js engine: its 4 GiB heap per replica.
  for (const workers of ["0", "2"]) {
    process.env.AGENT_R1_WORKERS = workers;
    process.env.AGENT_R1_BACKEND = "tfjs";
    try {
      // Before loading: before the tokenizer or any weight is read, and (with workers) before a
      // worker starts, since the main thread reads the tokenizer before it starts them.
      const { line } = await generateError(await modelWithConfig(llama405b));
      assert.match(
        line,
        /config\.json \(hidden_size\): .* this engine holds at most 4 GiB of weights per replica \(hint: /,
      );
    } finally {
      delete process.env.AGENT_R1_WORKERS;
      delete process.env.AGENT_R1_BACKEND;
    }
  }
  // The native engine (the default where the addon loads): the memory plan against its budget.
  if (loadAddon().ok) {
    const { line } = await generateError(await modelWithConfig(llama405b));
    assert.match(
      line,
      /^error: \S+: loading needs \d+\.\d GiB \(weights .*\), over the budget of .*; use a smaller model/,
    );
  }
});

/**
 * Runs `f` (synchronous) and returns the weight files (*.safetensors) it opened or read through
 * node:fs. The product imports fs functions by name, so the wrappers go on the module object and
 * syncBuiltinESMExports() hands them to those imports; both are undone before returning.
 */
function weightFileOpens(f: () => void): string[] {
  const seen: string[] = [];
  const fsObject = fs as unknown as Record<string, (...args: unknown[]) => unknown>;
  const names = ["openSync", "readFileSync", "createReadStream"];
  const originals = names.map((n) => fsObject[n]);
  names.forEach((n, i) => {
    fsObject[n] = function (this: unknown, ...args: unknown[]) {
      if (/\.safetensors$/.test(String(args[0]))) seen.push(`${n} ${String(args[0]).split("/").at(-1)}`);
      return originals[i].apply(this, args);
    };
  });
  syncBuiltinESMExports();
  try {
    f();
  } finally {
    names.forEach((n, i) => (fsObject[n] = originals[i]));
    syncBuiltinESMExports();
  }
  return seen;
}

test("weight files far larger than config.json describes are refused before they are read", async () => {
  const dir = await modelWithConfig({});
  // A sparse 256 MiB model.safetensors: the tiny config describes under 1 MB.
  const fd = openSync(join(dir, "model.safetensors"), "w");
  ftruncateSync(fd, 256 * 2 ** 20);
  closeSync(fd);
  const refused = (label: string) => (e: unknown) =>
    e instanceof ModelFormatError &&
    e.file.endsWith(label) &&
    /268 MB of weights on disk, but config\.json describes at most/.test(e.message);
  // Before they are read, counted: no weight file is opened or read (their sizes come from stat).
  const opened = weightFileOpens(() => assert.throws(() => loadModelDir(dir), refused("model.safetensors")));
  assert.deepEqual(opened, []);
  // The same as shards named by an index.
  rmSync(join(dir, "model.safetensors"));
  for (const shard of ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]) {
    const f = openSync(join(dir, shard), "w");
    ftruncateSync(f, 128 * 2 ** 20);
    closeSync(f);
  }
  const index = {
    weight_map: {
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.norm.weight": "model-00002-of-00002.safetensors",
    },
  };
  writeFileSync(join(dir, "model.safetensors.index.json"), JSON.stringify(index));
  const openedShards = weightFileOpens(() =>
    assert.throws(() => loadModelDir(dir), refused("model.safetensors.index.json")),
  );
  assert.deepEqual(openedShards, []);
});
