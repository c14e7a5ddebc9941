import { test, before } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { runCli } from "../src/cli/main.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { captureIO, cliEntry, tempDir } from "./helpers.js";

let model: string;
before(async () => {
  model = join(tempDir(), "tiny");
  const io = captureIO();
  assert.equal(await runCli(["init-model", "--preset", "tiny", "--out", model], io), 0, io.stderr.join("\n"));
});

test("init-model without --tokenizer writes a complete Hugging Face directory", () => {
  for (const f of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"])
    assert.ok(existsSync(join(model, f)), f);
  const cfg = JSON.parse(readFileSync(join(model, "config.json"), "utf8"));
  assert.equal(cfg.model_type, "qwen2");
  assert.equal(cfg.hidden_size, 64);
});

test("score prints one logprobs line per input line, equal to computeLogprobs", async () => {
  const input = join(tempDir(), "in.jsonl");
  writeFileSync(input, '{"tokens":[1,2,3,4]}\n\n{"tokens":[7,8]}\n');
  const io = captureIO();
  assert.equal(await runCli(["score", "--model", model, "--input", input], io), 0, io.stderr.join("\n"));
  assert.equal(io.stdout.length, 2);
  const rows = io.stdout.map((l) => JSON.parse(l).logprobs as (number | null)[]);
  assert.equal(rows[0].length, 4);
  assert.equal(rows[0][0], null);
  const engine = await LocalEngine.load(model);
  const expected = await engine.computeLogprobs([
    [1, 2, 3, 4],
    [7, 8],
  ]);
  engine.dispose();
  rows.forEach((r, i) =>
    r.forEach((x, j) => (j === 0 ? assert.equal(x, null) : assert.ok(Math.abs(x! - expected[i][j]!) < 1e-6))),
  );
  assert.ok(rows[1][1]! < 0);
});

test("tokenize renders messages and tools through the chat template", async () => {
  const dir = tempDir();
  writeFileSync(join(dir, "m.json"), JSON.stringify([{ role: "user", content: "What is 2+3?" }]));
  writeFileSync(
    join(dir, "t.json"),
    JSON.stringify([
      {
        type: "function",
        function: {
          name: "calculator",
          description: "Evaluate arithmetic",
          parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
        },
      },
    ]),
  );
  const io = captureIO();
  assert.equal(
    await runCli(
      ["tokenize", "--model", model, "--messages", join(dir, "m.json"), "--tools", join(dir, "t.json"), "--show"],
      io,
    ),
    0,
    io.stderr.join("\n"),
  );
  const rendered = io.stdout.slice(0, -1).join("\n");
  assert.match(rendered, /<tools>\n\{"type": "function", "function": \{"name": "calculator"/);
  assert.ok(rendered.endsWith("<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"));
  const ids = JSON.parse(io.stdout.at(-1)!) as number[];
  assert.ok(Array.isArray(ids) && ids.length > 10 && ids.every(Number.isInteger));
  const io2 = captureIO();
  await runCli(["tokenize", "--model", model, "--text", "hello"], io2);
  assert.ok((JSON.parse(io2.stdout[0]) as number[]).length >= 1);
});

test("generate is deterministic for a seed", async () => {
  const a = captureIO(),
    b = captureIO();
  await runCli(["generate", "--model", model, "--prompt", "Hi", "--max-tokens", "8", "--seed", "3"], a);
  await runCli(["generate", "--model", model, "--prompt", "Hi", "--max-tokens", "8", "--seed", "3"], b);
  assert.equal(a.stderr.length, 0, a.stderr.join("\n"));
  assert.deepEqual(a.stdout, b.stdout);
});

/** Exit 1 for bad input files and models, 2 for a mistake in the command line. */
async function failsWith(args: string[], pattern: RegExp, code = 1): Promise<void> {
  const io = captureIO();
  assert.equal(await runCli(args, io), code, args.join(" "));
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.match(io.stderr[0], pattern);
}

test("bad model directories give one line naming the file and the field", async () => {
  const copy = (edit: (cfg: Record<string, unknown>) => void) => {
    const dir = tempDir();
    for (const f of ["model.safetensors", "tokenizer.json", "tokenizer_config.json"])
      writeFileSync(join(dir, f), readFileSync(join(model, f)));
    const cfg = JSON.parse(readFileSync(join(model, "config.json"), "utf8"));
    edit(cfg);
    writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
    return dir;
  };
  const input = join(tempDir(), "in.jsonl");
  writeFileSync(input, '{"tokens":[1,2]}\n');
  await failsWith(["score", "--model", join(model, "nope"), "--input", input], /nope.*not found/);
  await failsWith(
    ["score", "--model", copy((c) => (c.model_type = "gpt2")), "--input", input],
    /config\.json \(model_type\): unsupported model_type 'gpt2'; supported: qwen2, qwen3, llama/,
  );
  await failsWith(
    ["score", "--model", copy((c) => (c.intermediate_size = 100)), "--input", input],
    /model\.safetensors \(model\.layers\.0\.mlp\.gate_proj\.weight\): shape \[192,64\] disagrees with config\.json/,
  );
  const noWeights = copy(() => {});
  await failsWith(["score", "--model", noWeights + "-missing", "--input", input], /not found/);
  const missing = copy(() => {});
  writeFileSync(join(missing, "model.safetensors"), Buffer.alloc(4));
  await failsWith(["score", "--model", missing, "--input", input], /model\.safetensors.*truncated/);
});

test("bad input files and flags name the line or the flag", async () => {
  const input = join(tempDir(), "bad.jsonl");
  writeFileSync(input, '{"tokens":[1,2]}\n{"tokens":"x"}\n');
  await failsWith(["score", "--model", model, "--input", input], /bad\.jsonl:2: field 'tokens'/);
  await failsWith(
    ["init-model", "--preset", "huge", "--out", tempDir()],
    /unknown --preset 'huge'; choose one of: tiny, small, medium/,
    2,
  );
  await failsWith(["generate", "--model", model], /--prompt is required/, 2);
  await failsWith(
    ["generate", "--model", model, "--prompt", "x", "--max-tokens", "many"],
    /--max-tokens must be a number/,
    2,
  );
});

test("the installed bin exits non-zero with one line and no stack trace", () => {
  const res = spawnSync(
    process.execPath,
    [...process.execArgv, cliEntry(), "score", "--model", "/nonexistent/model", "--input", "x.jsonl"],
    { encoding: "utf8" },
  );
  assert.equal(res.status, 1);
  const lines = res.stderr.trim().split("\n");
  assert.equal(lines.length, 1, res.stderr);
  assert.match(lines[0], /^error: /);
});

test("a model loaded and saved back is byte-identical (fp32)", async () => {
  const engine = await LocalEngine.load(model);
  const out = join(tempDir(), "copy");
  await engine.save(out);
  engine.dispose();
  assert.ok(readFileSync(join(out, "model.safetensors")).equals(readFileSync(join(model, "model.safetensors"))));
  assert.deepEqual(
    JSON.parse(readFileSync(join(out, "config.json"), "utf8")),
    JSON.parse(readFileSync(join(model, "config.json"), "utf8")),
  );
  assert.ok(readFileSync(join(out, "tokenizer.json")).equals(readFileSync(join(model, "tokenizer.json"))));
});
