/**
 * Nothing a command did not create is deleted or overwritten unless the user passes --force
 * (docs/reliability.md, "Data loss"). Every writing command (export, init-model, tokenizer, data,
 * pretrain, train, main) is pointed at an existing foreign directory, at a checkpoint's own
 * directory (and the run holding it) and at the working directory `.`; each is refused with one
 * line and exit 1, and what was there is byte-identical afterwards. --force replaces a foreign
 * directory, but never what the command reads, nor the working directory.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../src/cli/main.js";
import { listCheckpoints, writeCheckpoint } from "../src/train/checkpoint.js";
import { snapshot } from "./fixtures/snapshot.js";
import { captureIO, tempDir } from "./helpers.js";

const RECIPE = `engine: { workers: 0 }
task: { name: calc, options: { train: 8, val: 0, test: 4 } }
rollout: { n: 2, maxTurns: 1, maxTokensPerTurn: 8, maxTotalTokens: 1024 }
train: { iterations: 2, batchSize: 2, valEvery: 0, checkpointEvery: 1, keepCheckpoints: 2, samplesPerIteration: 1 }
`;

let root: string, model: string, recipe: string, run: string;

before(async () => {
  root = tempDir();
  model = join(root, "model");
  const io = captureIO();
  assert.equal(await runCli(["init-model", "--preset", "tiny", "--out", model], io), 0, io.stderr.join("\n"));
  recipe = join(root, "recipe.yaml");
  writeFileSync(recipe, RECIPE);
  run = join(root, "run");
  const t = captureIO();
  assert.equal(
    await runCli(["train", "--config", recipe, "--out", run, `model.path=${model}`], t),
    0,
    t.stderr.join("\n"),
  );
});

/** A directory of someone else's files. */
function foreign(): string {
  const dir = join(tempDir(), "mine");
  mkdirSync(join(dir, "checkpoints", "step-100"), { recursive: true });
  writeFileSync(join(dir, "notes.txt"), "my notes\n");
  writeFileSync(join(dir, "config.yaml"), "mine: true\n");
  writeFileSync(join(dir, "checkpoints", "step-100", "weights.bin"), "precious");
  return dir;
}

/** Runs the CLI (optionally in another working directory); asserts exit 1 and one line, and that `keep` is byte-identical. */
async function refused(args: string[], keep: string[], opts: { cwd?: string; match?: RegExp } = {}): Promise<string> {
  const saved = keep.map(snapshot);
  const io = captureIO();
  const here = process.cwd();
  if (opts.cwd) process.chdir(opts.cwd);
  let code: number;
  try {
    code = await runCli(args, io);
  } finally {
    process.chdir(here);
  }
  assert.equal(code, 1, `${args.join(" ")} should fail: ${io.stdout.join("\n")}`);
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  if (opts.match) assert.match(io.stderr[0], opts.match);
  keep.forEach((d, i) => assert.deepEqual(snapshot(d), saved[i], `${d} changed`));
  return io.stderr[0];
}

async function ok(args: string[], cwd?: string): Promise<string[]> {
  const io = captureIO();
  const here = process.cwd();
  if (cwd) process.chdir(cwd);
  try {
    assert.equal(await runCli(args, io), 0, io.stderr.join("\n"));
  } finally {
    process.chdir(here);
  }
  return io.stdout;
}

const step1 = () => join(run, "checkpoints", "step-1");

test("export into the run that holds the checkpoint, into the checkpoint, or into its policy/: refused, even with --force", async () => {
  for (const out of [run, step1(), join(step1(), "policy"), join(run, "checkpoints")]) {
    for (const force of [[], ["--force"]]) {
      const line = await refused(["export", "--checkpoint", step1(), "--out", out, ...force], [run]);
      assert.match(
        line,
        /export: --out .* (contains|is|lies inside) the checkpoint it reads .*writing there would destroy it/,
      );
    }
  }
});

test("export into a foreign non-empty directory is refused; --force replaces it and the result loads", async () => {
  const dir = foreign();
  const line = await refused(["export", "--checkpoint", step1(), "--out", dir], [dir]);
  assert.match(line, /export: --out .*mine is not empty \(checkpoints, config\.yaml, notes\.txt\) \(hint: .*--force/);
  await ok(["export", "--checkpoint", step1(), "--out", dir, "--force"]);
  assert.deepEqual(readdirSync(dir).sort(), [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
  ]);
  await ok(["generate", "--model", dir, "--prompt", "hi", "--max-tokens", "2"]);
  assert.ok(
    !readdirSync(join(dir, "..")).some((n) => n.includes(".tmp-") || n.includes(".old-")),
    "no temporary directory left",
  );
});

test("every writing command refuses a foreign non-empty --out, a checkpoint's own directory and a non-empty `.`, leaving each byte-identical", async () => {
  const dir = foreign();
  const commands = (out: string): string[][] => [
    ["init-model", "--preset", "tiny", "--out", out],
    ["tokenizer", "--task", "calc", "--vocab", "300", "--out", out],
    ["pretrain", "--task", "calc", "--preset", "tiny", "--out", out],
    ["train", "--config", recipe, "--out", out],
    ["main", "--config", recipe, "--base", model, "--out", out],
    ["export", "--checkpoint", step1(), "--out", out],
    ["demo", "--out", out, "--iterations", "1"],
  ];
  for (const args of commands(dir)) {
    const line = await refused(args, [dir]);
    assert.match(line, /mine is not empty/, args[0]);
    assert.match(line, /--force/, args[0]);
  }
  for (const args of commands(step1()))
    assert.match(await refused(args, [run]), /step-1 (is not empty|is the checkpoint it reads)/, args[0]);
  for (const args of commands("."))
    assert.match(
      await refused(args, [dir], { cwd: dir }),
      /(--out|:) \. (is the current directory and is not empty|is not empty)/,
      args[0],
    );
});

test("demo reuses an earlier demo's directory (its model), and refuses any other non-empty one", async () => {
  const dir = join(tempDir(), "demo");
  const args = ["demo", "--out", dir, "--iterations", "1", "--group", "2"];
  await ok(args);
  await ok(args);
  assert.deepEqual(readdirSync(dir).sort(), ["final", "model"]);
  writeFileSync(join(dir, "notes.txt"), "mine\n");
  assert.match(await refused(args, [dir]), /demo: --out .*demo is not empty/);
});

test("train into a run of ours without --resume says so; --force starts over there", async () => {
  const copy = join(tempDir(), "run");
  await ok(["train", "--config", recipe, "--out", copy, `model.path=${model}`, "train.iterations=1"]);
  const line = await refused(["train", "--config", recipe, "--out", copy, `model.path=${model}`], [copy]);
  assert.match(line, /already holds a run \(hint: continue it with --resume, start it over with --force/);
  writeFileSync(join(copy, "stray.txt"), "left by the old run\n");
  await ok(["train", "--config", recipe, "--out", copy, `model.path=${model}`, "--force"]);
  const metrics = readFileSync(join(copy, "metrics.jsonl"), "utf8").trim().split("\n");
  assert.equal(metrics.length, 2, "the old run's metrics are gone, the new run's two iterations are there");
  assert.ok(!existsSync(join(copy, "stray.txt")));
  assert.deepEqual(listCheckpoints(copy), [2, 1]);
});

test("train --force over a foreign directory: what was there goes, and the new run's checkpoints are pruned correctly", async () => {
  const dir = foreign();
  await ok(["train", "--config", recipe, "--out", dir, `model.path=${model}`, "--force", "train.keepCheckpoints=1"]);
  assert.ok(!existsSync(join(dir, "notes.txt")));
  assert.deepEqual(listCheckpoints(dir), [2], "the newest of ours is kept, no foreign one");
});

test("train and export refuse a --out that contains what they read, even with --force", async () => {
  const rowsDir = foreign();
  const rows = join(rowsDir, "rows.jsonl");
  await ok(["data", "--task", "calc", "--split", "train", "--out", rows, "--option", "train=4"]);
  const line = await refused(
    ["train", "--config", recipe, "--out", rowsDir, `data.train=${rows}`, "--force"],
    [rowsDir],
  );
  assert.match(line, /contains the data file it reads/);
  const line2 = await refused(["train", "--config", recipe, "--out", root, `model.path=${model}`, "--force"], [model]);
  assert.match(line2, /contains the model it reads/);
});

test("--out . : a non-empty working directory is refused even with --force; an empty one receives the files, with no temporary directory left", async () => {
  const busy = foreign();
  for (const args of [
    ["init-model", "--preset", "tiny", "--out", "."],
    ["init-model", "--preset", "tiny", "--out", ".", "--force"],
    ["train", "--config", recipe, "--out", ".", "--force"],
    ["tokenizer", "--task", "calc", "--vocab", "300", "--out", ".", "--force"],
  ]) {
    const line = await refused(args, [busy], { cwd: busy });
    assert.match(line, /--out \. is (the current directory and is not empty|not empty)/, args.join(" "));
  }
  const parent = tempDir(),
    empty = join(parent, "empty");
  mkdirSync(empty);
  await ok(["init-model", "--preset", "tiny", "--out", "."], empty);
  assert.ok(existsSync(join(empty, "config.json")) && existsSync(join(empty, "model.safetensors")));
  assert.deepEqual(readdirSync(parent), ["empty"], "no temporary directory beside it");
  // A parent of the working directory is never replaced either.
  const line = await refused(["init-model", "--preset", "tiny", "--out", "..", "--force"], [parent], { cwd: empty });
  assert.match(line, /is a parent of the current directory/);
});

test("data --out: an existing file is refused without --force and replaced with it; a directory is refused", async () => {
  const dir = tempDir(),
    file = join(dir, "rows.jsonl");
  writeFileSync(file, "mine\n");
  const line = await refused(["data", "--task", "calc", "--split", "test", "--out", file], [dir]);
  assert.match(line, /rows\.jsonl already exists \(hint: pick a new --out, or pass --force to replace it\)/);
  await ok(["data", "--task", "calc", "--split", "test", "--out", file, "--force"]);
  assert.notEqual(readFileSync(file, "utf8"), "mine\n");
  mkdirSync(join(dir, "d.jsonl"));
  assert.match(
    await refused(["data", "--task", "calc", "--split", "test", "--out", join(dir, "d.jsonl"), "--force"], [dir]),
    /is a directory; the output is a file/,
  );
});

test("checkpoint pruning deletes only older checkpoints: a newer step-N is left alone", async () => {
  const dir = tempDir();
  const fill = (text: string) => async (d: string) => writeFileSync(join(d, "w.bin"), text);
  await writeCheckpoint(dir, 9, { iteration: 9 }, fill("nine"), 2);
  for (let step = 1; step <= 3; step++) await writeCheckpoint(dir, step, { iteration: step }, fill(`w${step}`), 2);
  assert.deepEqual(listCheckpoints(dir), [9, 3, 2]);
});
