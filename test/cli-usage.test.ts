/** The command line itself: --version, --help with one described line per flag, and exit 2 for usage errors. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { COMMANDS, EXIT, runCli } from "../src/cli/main.js";
import { InputError, UsageError, formatError } from "../src/util/errors.js";
import { captureIO, cliEntry, tempDir } from "./helpers.js";

// package.json is one level up from test/ under tsx, two from dist/test/.
const packageFile = [new URL("../package.json", import.meta.url), new URL("../../package.json", import.meta.url)].find(
  (u) => existsSync(u),
)!;
const version = (JSON.parse(readFileSync(packageFile, "utf8")) as { version: string }).version;

/** The CLI as a child process, the way a user runs it. */
function bin(args: string[]) {
  return spawnSync(process.execPath, [...process.execArgv, cliEntry(), ...args], {
    encoding: "utf8",
    env: { ...process.env, AGENT_R1_DEBUG: "" },
  });
}

test("--version, -v and version print package.json's version and exit 0", async () => {
  for (const flag of ["--version", "-v", "version"]) {
    const io = captureIO();
    assert.equal(await runCli([flag], io), EXIT.ok);
    assert.deepEqual(io.stdout, [version]);
    assert.deepEqual(io.stderr, []);
  }
  const res = bin(["--version"]);
  assert.equal(res.status, 0, res.stderr);
  assert.equal(res.stdout, `${version}\n`);
});

test("--help lists every command and the --version line; no command at all is a usage error", async () => {
  const io = captureIO();
  assert.equal(await runCli(["--help"], io), EXIT.ok);
  const text = io.stdout.join("\n");
  for (const c of COMMANDS)
    assert.match(text, new RegExp(`^  ${c.name} +${c.summary.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"), c.name);
  assert.match(text, /^agent-r1 --version prints the version\.$/m);
  const none = captureIO();
  assert.equal(await runCli([], none), EXIT.usage);
  assert.deepEqual(none.stdout, []);
  assert.match(none.stderr.join("\n"), /^usage: agent-r1 <command>/);
});

test("every flag of every command has a one-line description, and CMD --help lists each with its value and default", async () => {
  for (const cmd of COMMANDS) {
    const io = captureIO();
    assert.equal(await runCli([cmd.name, "--help"], io), EXIT.ok, cmd.name);
    const viaHelp = captureIO();
    assert.equal(await runCli(["help", cmd.name], viaHelp), EXIT.ok);
    assert.deepEqual(viaHelp.stdout, io.stdout, "agent-r1 help CMD is CMD --help");
    const [summary, usage, blank, heading, ...lines] = io.stdout.join("\n").split("\n");
    assert.equal(summary, cmd.summary);
    assert.equal(usage, `usage: ${cmd.usage}`);
    assert.deepEqual([blank, heading], ["", "flags:"]);
    const names = Object.keys(cmd.flags);
    assert.ok(names.length > 0, cmd.name);
    assert.equal(lines.length, names.length, `${cmd.name}: one line per flag`);
    names.forEach((name, i) => {
      const f = cmd.flags[name];
      assert.ok(
        f.description.trim().length > 0 && !f.description.includes("\n"),
        `${cmd.name} --${name}: a one-line description`,
      );
      const head = f.type === "string" ? `--${name} ${f.value}` : `--${name}`;
      assert.ok(lines[i].trimStart().startsWith(head), `${cmd.name}: line ${i} is ${lines[i]}`);
      assert.ok(lines[i].includes(f.description), `${cmd.name} --${name}: its description is printed`);
      const shown = f.type === "string" ? (f.default ?? f.fallback) : undefined;
      if (shown !== undefined)
        assert.ok(lines[i].includes(`default: ${shown}`), `${cmd.name} --${name}: its default is printed`);
    });
  }
});

test("a UsageError is an InputError: library callers and the one-line format do not change", () => {
  const e = new UsageError("eval: --model is required", "run 'agent-r1 eval --help'");
  assert.ok(e instanceof InputError);
  assert.equal(e.name, "UsageError");
  assert.equal(formatError(e), "error: eval: --model is required (hint: run 'agent-r1 eval --help')");
});

/** Runs the CLI in-process; asserts the exit code, one stderr line, and returns it. */
async function failsWith(code: number, args: string[]): Promise<string> {
  const io = captureIO();
  assert.equal(await runCli(args, io), code, `${args.join(" ")}: ${io.stderr.join("\n")}`);
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.deepEqual(io.stdout, []);
  return io.stderr[0];
}

test("usage errors exit 2 with one line naming the flag; nothing is read or written first", async () => {
  const dir = tempDir();
  const out = join(dir, "out");
  const cases: [string[], RegExp][] = [
    [["unknown-command"], /^error: unknown command 'unknown-command'; commands: demo, main, /],
    [
      ["eval", "--model", out, "--task", "calc", "--verbose"],
      /^error: eval: unknown flag '--verbose' \(hint: run 'agent-r1 eval --help'\)$/,
    ],
    [["init-model", "--out"], /^error: init-model: Option '--out <value>' argument missing/],
    [["export", "--out", out], /^error: export: --checkpoint is required \(hint: run 'agent-r1 export --help'\)$/],
    [
      ["data", "--task", "calc", "--out", join(dir, "rows.jsonl"), "extra"],
      /^error: data: unexpected argument 'extra'/,
    ],
    [
      ["train", "--out", out, "iterations"],
      /^error: train: unexpected argument 'iterations' \(hint: overrides look like key\.path=value\)$/,
    ],
    [
      ["generate", "--model", out, "--prompt", "hi", "--top-k", "many"],
      /^error: generate: --top-k must be a number, got 'many'$/,
    ],
    [["serve", "--model", out, "--port", "70000"], /^error: serve: --port must be an integer in \[0, 65535\]/],
    [
      ["export", "--checkpoint", out, "--out", out, "--dtype", "f8"],
      /^error: export: --dtype must be one of f32, bf16, f16, got 'f8'$/,
    ],
    [
      ["score", "--model", out, "--input", "x.jsonl", "--backend", "gpu"],
      /^error: score: --backend: unknown backend 'gpu'; choose one of: auto, native, tfjs$/,
    ],
    [
      ["data", "--task", "poetry", "--out", join(dir, "rows.jsonl")],
      /^error: unknown task 'poetry'; tasks: multihop, calc, shop, household$/,
    ],
    [
      ["data", "--task", "calc", "--out", join(dir, "rows.jsonl"), "--option", "train"],
      /^error: data: --option 'train' must look like name=value/,
    ],
    [
      ["train", "--resume", out, "--force"],
      /^error: train: give --resume \(continue the run\) or --force \(start over\), not both$/,
    ],
    [
      ["tokenize", "--model", out, "--text", "a", "--messages", "m.json"],
      /^error: tokenize: give --text or --messages, not both$/,
    ],
    [["demo", "--out", out, "--iterations", "0"], /^error: demo: --iterations must be a whole number >= 1, got 0$/],
  ];
  for (const [args, re] of cases) assert.match(await failsWith(EXIT.usage, args), re, args.join(" "));
  assert.deepEqual(readdirSync(dir), [], "a usage error writes nothing");
});

test("other errors still exit 1: a missing file, a bad recipe value or key=value override, a task option", async () => {
  const dir = tempDir();
  await failsWith(EXIT.error, ["score", "--model", join(dir, "missing"), "--input", join(dir, "x.jsonl")]);
  await failsWith(EXIT.error, ["train", "--out", join(dir, "run"), "rollout.topP=1.5"]);
  await failsWith(EXIT.error, ["data", "--task", "calc", "--out", join(dir, "rows.jsonl"), "--option", "sizes=3"]);
});

test("the built bin exits 2 for a usage error, with one line and no stack trace", () => {
  const res = bin(["eval", "--task", "calc"]);
  assert.equal(res.status, 2, res.stderr);
  assert.equal(res.stdout, "");
  const lines = res.stderr.trim().split("\n");
  assert.equal(lines.length, 1, res.stderr);
  assert.match(lines[0], /^error: eval: --model is required/);
});
