/**
 * Bad input through the real CLI (docs/reliability.md): malformed configs,
 * dataset rows with missing or wrong fields (and --skip-bad-rows), a
 * truncated safetensors file, a tokenizer.json of a model kind we do not
 * support. Each failure is one line naming the file (and the key, row or
 * field) with a non-zero exit, and leaves what was on disk byte-identical.
 * (The config messages themselves are unit-tested in train-config.test.ts.)
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../src/cli/main.js";
import { createCalcTask } from "../src/tasks/calc/task.js";
import { snapshot } from "./fixtures/snapshot.js";
import { captureIO, cliEntry, tempDir } from "./helpers.js";

const RECIPE = `# a tiny preset model (the default), one quick iteration on the calculator task
engine: { workers: 0 }
task: { name: calc, options: { train: 8, val: 0, test: 4 } }
rollout: { n: 2, maxTurns: 1, maxTokensPerTurn: 8, maxTotalTokens: 1024 }
train: { iterations: 1, batchSize: 2, valEvery: 0, checkpointEvery: 1, samplesPerIteration: 1 }
`;

let dir: string, model: string, recipe: string, rowsFile: string, run: string;
let runIO: ReturnType<typeof captureIO>;

before(async () => {
  dir = tempDir();
  model = join(dir, "model");
  const io = captureIO();
  assert.equal(await runCli(["init-model", "--preset", "tiny", "--out", model], io), 0, io.stderr.join("\n"));
  recipe = join(dir, "recipe.yaml");
  writeFileSync(recipe, RECIPE);
  // Lines 3, 5 and 6 are bad: no reward_model, a prompt that is not a list, torn JSON.
  const good = createCalcTask({ train: 4, val: 0, test: 0 }).rows("train");
  const { reward_model: _, ...noReward } = good[0];
  const lines = [good[0], good[1], noReward, good[2], { ...good[3], prompt: "What is 2+2?" }].map((r) =>
    JSON.stringify(r),
  );
  lines.push(JSON.stringify(good[3]).slice(0, 40), JSON.stringify(good[3]));
  rowsFile = join(dir, "rows.jsonl");
  writeFileSync(rowsFile, lines.join("\n") + "\n");
  // A finished run, trained on the good rows of that file.
  run = join(dir, "run");
  runIO = captureIO();
  assert.equal(
    await runCli(["train", "--config", recipe, "--out", run, `data.train=${rowsFile}`, "--skip-bad-rows"], runIO),
    0,
    runIO.stderr.join("\n"),
  );
});

/** Runs the CLI; asserts exit 1, exactly one stderr line, and that `unchanged` dirs are byte-identical and `absent` paths still absent. */
async function fails(args: string[], opts: { unchanged?: string[]; absent?: string[] } = {}): Promise<string> {
  const saved = (opts.unchanged ?? []).map(snapshot);
  const io = captureIO();
  const code = await runCli(args, io);
  assert.equal(code, 1, `exit code of ${args.join(" ")}: ${io.stderr.join("\n")}`);
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.match(io.stderr[0], /^error: /);
  (opts.unchanged ?? []).forEach((d, i) => assert.deepEqual(snapshot(d), saved[i], `${d} changed`));
  for (const p of opts.absent ?? []) assert.ok(!existsSync(p), `${p} was created`);
  return io.stderr[0];
}

/** The built CLI as a child process: exit code 1, one line on stderr, no stack trace. */
function binFails(args: string[]): string {
  const res = spawnSync(process.execPath, [...process.execArgv, cliEntry(), ...args], {
    encoding: "utf8",
    env: { ...process.env, AGENT_R1_DEBUG: "" },
    timeout: 120_000, // a command that spins instead of failing is killed, and fails the test here
  });
  assert.equal(res.status, 1, `${args.join(" ")}: ${res.error ?? ""} ${res.stderr}`);
  const lines = res.stderr.trim().split("\n");
  assert.equal(lines.length, 1, res.stderr);
  assert.doesNotMatch(res.stderr, /^\s+at /m);
  return lines[0];
}

test("malformed configs: one line naming the key, exit 1, no run directory created or changed", async () => {
  const cases: [string, string, RegExp][] = [
    [
      "unknown.yaml",
      "train:\n  iters: 3\n",
      /unknown\.yaml: unknown key 'train\.iters'; allowed here: iterations, batchSize/,
    ],
    ["type.yaml", "rollout:\n  n: four\n", /type\.yaml: rollout\.n: expected number, received string$/],
    ["range.yaml", "rollout:\n  topP: 1.5\n", /range\.yaml: rollout\.topP: Too big: expected number to be <=1$/],
    [
      "nested.yaml",
      "algorithm:\n  kl:\n    form: k9\n",
      /nested\.yaml: algorithm\.kl\.form: must be one of "k1", "k2", "k3"$/,
    ],
  ];
  for (const [name, text, want] of cases) {
    const f = join(dir, name);
    writeFileSync(f, text);
    const out = join(dir, `out-${name}`);
    assert.match(await fails(["train", "--config", f, "--out", out], { absent: [out] }), want);
  }
  // Overrides on the command line, for a new run and for resuming one.
  const out = join(dir, "out-override");
  assert.match(
    await fails(["train", "--config", recipe, "--out", out, "optim.lr=-1"], { absent: [out] }),
    /optim\.lr: Too small: expected number to be >0$/,
  );
  assert.match(
    await fails(["train", "--resume", run, "train.iterations=many"], { unchanged: [run] }),
    /train\.iterations: expected number, received string$/,
  );
  assert.match(
    await fails(["train", "--resume", run, "rollout.temprature=0.5"], { unchanged: [run] }),
    /unknown key 'rollout\.temprature'; allowed here: n, maxTurns/,
  );
  // A new run into a directory that holds one is refused before anything is written.
  assert.match(await fails(["train", "--config", recipe, "--out", run], { unchanged: [run] }), /already holds a run/);
  // The same through the built bin.
  assert.match(
    binFails(["train", "--config", join(dir, "range.yaml"), "--out", join(dir, "out-bin")]),
    /^error: .*range\.yaml: rollout\.topP: Too big/,
  );
  assert.ok(!existsSync(join(dir, "out-bin")));
});

test("dataset rows with missing or wrong fields: the error names the file and the line; --skip-bad-rows counts them and goes on", async () => {
  const wantLine3 = new RegExp(
    `^error: ${rowsFile.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}: line 3: reward_model: Invalid input: expected object, received undefined \\(hint: fix the row, or skip and count bad rows: --skip-bad-rows`,
  );
  // eval --data
  assert.match(
    await fails(["eval", "--model", model, "--task", "calc", "--data", rowsFile], { unchanged: [model] }),
    wantLine3,
  );
  const io = captureIO();
  const args = [
    "eval",
    "--model",
    model,
    "--task",
    "calc",
    "--data",
    rowsFile,
    "--skip-bad-rows",
    "--limit",
    "2",
    "--max-turns",
    "1",
    "--max-tokens-per-turn",
    "4",
    "--json",
  ];
  assert.equal(await runCli(args, io), 0, io.stderr.join("\n"));
  assert.deepEqual(io.stderr, [`eval: skipped 3 bad rows of ${rowsFile} (kept 4)`]);
  assert.equal(JSON.parse(io.stdout.at(-1)!).episodes, 2);
  // train: data.train
  const out = join(dir, "out-rows");
  assert.match(
    await fails(["train", "--config", recipe, "--out", out, `data.train=${rowsFile}`], { absent: [out] }),
    wantLine3,
  );
  assert.match(await fails(["train", "--resume", run, "data.skipBadRows=false"], { unchanged: [run] }), wantLine3);
  // The run made in before(): bad rows skipped, counted, and the iteration ran.
  assert.ok(runIO.stderr.includes(`skipped 3 bad rows of ${rowsFile} (kept 4)`), runIO.stderr.join("\n"));
  assert.equal(readFileSync(join(run, "metrics.jsonl"), "utf8").trim().split("\n").length, 1);
  // A file whose every row is bad leaves nothing to train on.
  const allBad = join(dir, "all-bad.jsonl");
  writeFileSync(allBad, '{"data_source": "x"}\n[1, 2]\n');
  assert.match(
    await fails(["train", "--config", recipe, "--out", out, `data.train=${allBad}`, "--skip-bad-rows"], {
      absent: [out],
    }),
    /all-bad\.jsonl: no rows left \(all 2 were bad and skipped\)$/,
  );
});

/** A copy of the model directory with one file replaced. */
function modelCopy(name: string, file: string, content: Buffer | string): string {
  const copy = join(dir, name);
  cpSync(model, copy, { recursive: true });
  writeFileSync(join(copy, file), content);
  return copy;
}

test("a truncated safetensors file: one line naming the file, and nothing changed on disk", async () => {
  const weights = readFileSync(join(model, "model.safetensors"));
  const half = modelCopy("half", "model.safetensors", weights.subarray(0, weights.length >> 1));
  const fileRe = (d: string) => `^error: ${join(d, "model.safetensors").replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}`;
  assert.match(
    await fails(["eval", "--model", half, "--task", "calc", "--limit", "1"], { unchanged: [half] }),
    new RegExp(
      `${fileRe(half)} \\(model\\.[a-z0-9_.]+\\): data_offsets \\[\\d+, \\d+\\] lie outside the \\d+-byte data section$`,
    ),
  );
  const out = join(dir, "out-half");
  assert.match(
    await fails(["train", "--config", recipe, "--out", out, `model.path=${half}`], {
      unchanged: [half],
      absent: [out],
    }),
    new RegExp(fileRe(half)),
  );
  // Cut inside the JSON header, through the built bin.
  const header = modelCopy("header", "model.safetensors", weights.subarray(0, 100));
  assert.match(
    binFails(["eval", "--model", header, "--task", "calc", "--limit", "1"]),
    new RegExp(`${fileRe(header)}: truncated: header length says \\d+ bytes but only 92 follow$`),
  );
  // A run whose only checkpoint lost the end of its weights: resume names the file and touches nothing.
  const damaged = join(dir, "run-damaged");
  cpSync(run, damaged, { recursive: true });
  const policy = join(damaged, "checkpoints", "step-1", "policy", "model.safetensors");
  writeFileSync(policy, readFileSync(policy).subarray(0, 1000));
  assert.equal(
    await fails(["train", "--resume", damaged], { unchanged: [damaged] }),
    `error: ${damaged}: no complete checkpoint to resume from (${join(damaged, "checkpoints", "step-1")}: policy/model.safetensors does not match its checksum)`,
  );
});

test("a tokenizer.json of an unsupported model kind: one line naming the file and the field", async () => {
  const tokenizer = JSON.parse(readFileSync(join(model, "tokenizer.json"), "utf8")) as Record<string, unknown>;
  const wordPiece = modelCopy(
    "wordpiece",
    "tokenizer.json",
    JSON.stringify({
      ...tokenizer,
      model: {
        type: "WordPiece",
        unk_token: "[UNK]",
        continuing_subword_prefix: "##",
        max_input_chars_per_word: 100,
        vocab: { "[UNK]": 0, "[CLS]": 1, hello: 2, "##s": 3 },
      },
    }),
  );
  const unigram = modelCopy(
    "unigram",
    "tokenizer.json",
    JSON.stringify({
      ...tokenizer,
      model: {
        type: "Unigram",
        unk_id: 0,
        vocab: [
          ["<unk>", 0],
          ["▁hello", -2.5],
          ["s", -3.1],
        ],
      },
    }),
  );
  const want = (d: string, kind: string) =>
    `error: ${join(d, "tokenizer.json")} (model.type): unsupported tokenizer model '${kind}'; supported: BPE`;
  assert.equal(
    await fails(["eval", "--model", wordPiece, "--task", "calc", "--limit", "1"], { unchanged: [wordPiece] }),
    want(wordPiece, "WordPiece"),
  );
  assert.equal(
    await fails(["generate", "--model", unigram, "--prompt", "hi"], { unchanged: [unigram] }),
    want(unigram, "Unigram"),
  );
  const out = join(dir, "out-wordpiece");
  assert.equal(
    await fails(["train", "--config", recipe, "--out", out, `model.path=${wordPiece}`], {
      unchanged: [wordPiece],
      absent: [out],
    }),
    want(wordPiece, "WordPiece"),
  );
  assert.equal(binFails(["tokenize", "--model", unigram, "--text", "hello"]), want(unigram, "Unigram"));
});

test("prototype keys in overrides, --option and recipes are refused at the parser; Object.prototype stays clean", async () => {
  const out = join(dir, "out-proto");
  for (const o of [
    "__proto__.polluted=1",
    "train.constructor.prototype.polluted=1",
    "train.prototype=1",
    "task.options={__proto__: {polluted: 1}}",
  ]) {
    assert.match(
      await fails(["train", "--config", recipe, "--out", out, o], { absent: [out] }),
      /the key '(__proto__|constructor|prototype)' is not allowed \(it would reach the object's prototype\)$/,
      o,
    );
  }
  assert.match(
    await fails(["eval", "--model", model, "--task", "calc", "--option", "__proto__=1"]),
    /^error: eval: --option '__proto__=1': the key '__proto__' is not allowed/,
  );
  assert.match(
    await fails([
      "data",
      "--task",
      "calc",
      "--split",
      "test",
      "--out",
      join(dir, "p.jsonl"),
      "--option",
      "constructor=1",
    ]),
    /--option 'constructor=1': the key 'constructor' is not allowed/,
  );
  const bad = join(dir, "proto.yaml");
  writeFileSync(bad, "train:\n  __proto__:\n    polluted: 1\n");
  assert.match(
    await fails(["train", "--config", bad, "--out", out], { absent: [out] }),
    /proto\.yaml: train\.__proto__: the key '__proto__' is not allowed/,
  );
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, "polluted"), false);
});

test("eval where every prompt is longer than the context window: exit 1 with the reason, not a table of 0 episodes", async () => {
  const short = join(dir, "short-context");
  cpSync(model, short, { recursive: true });
  const cfg = JSON.parse(readFileSync(join(short, "config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(short, "config.json"), JSON.stringify({ ...cfg, max_position_embeddings: 16 }));
  const line = await fails(["eval", "--model", short, "--task", "calc", "--limit", "2"]);
  assert.match(
    line,
    /^error: eval: all 2 episodes failed; first: row 1 \(synthetic\/calc #\d+\): env reset: the first observation is \d+ tokens, at or over maxTotalTokens 16 \(hint: the prompt does not fit/,
  );
});

test("a directory where a file belongs (or a file where a directory belongs): one line naming the path, never a bare EISDIR", async () => {
  const asDir = (name: string, file: string) => {
    const copy = join(dir, name);
    cpSync(model, copy, { recursive: true });
    rmSync(join(copy, file));
    mkdirSync(join(copy, file));
    return copy;
  };
  for (const file of ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]) {
    const m = asDir(`dir-${file}`, file);
    assert.equal(
      await fails(["generate", "--model", m, "--prompt", "hi"], { unchanged: [m] }),
      `error: ${join(m, file)}: is a directory, not a file`,
    );
  }
  const emptyDir = join(dir, "a-directory");
  mkdirSync(emptyDir, { recursive: true });
  assert.equal(
    await fails(["train", "--config", emptyDir, "--out", join(dir, "o")]),
    `error: ${emptyDir}: is a directory, not a file (hint: --config takes a YAML recipe file)`,
  );
  assert.equal(
    await fails(["eval", "--model", model, "--task", "calc", "--data", `${emptyDir}.jsonl`]),
    `error: ${emptyDir}.jsonl: file not found`,
  );
  mkdirSync(join(dir, "rows-dir.jsonl"), { recursive: true });
  assert.equal(
    await fails(["eval", "--model", model, "--task", "calc", "--data", join(dir, "rows-dir.jsonl")]),
    `error: ${join(dir, "rows-dir.jsonl")}: is a directory, not a file`,
  );
  assert.match(
    await fails(["eval", "--model", recipe, "--task", "calc"]),
    /recipe\.yaml: is a file, not a model directory \(hint: give the directory that holds config\.json\)$/,
  );
  const checkpoint = join(dir, "run", "checkpoints", "step-3");
  cpSync(model, join(checkpoint, "policy"), { recursive: true });
  writeFileSync(join(checkpoint, "manifest.json"), "{}");
  assert.equal(
    await fails(["eval", "--model", checkpoint, "--task", "calc"], { unchanged: [checkpoint] }),
    `error: ${checkpoint}: is a training checkpoint, not a model directory (hint: give ${join(checkpoint, "policy")}, or write a model with agent-r1 export --checkpoint ${checkpoint} --out DIR)`,
  );
  assert.equal(
    await fails(["train", "--resume", recipe]),
    `error: train: --resume ${recipe} is a file, not a run directory`,
  );
  assert.match(
    await fails(["init-model", "--out", join(recipe, "sub")]),
    /init-model: --out .*recipe\.yaml\/sub: .*recipe\.yaml is a file, not a directory$/,
  );
});

test("an --out or --state-dir under /proc: one line naming the path, never a spinning mkdir", () => {
  const at = "/proc/agent-r1-probe/sub";
  const checkpoint = join(run, "checkpoints", "step-1");
  for (const args of [
    ["init-model", "--preset", "tiny", "--out", at],
    ["train", "--config", recipe, "--out", at],
    ["export", "--checkpoint", checkpoint, "--out", at],
    ["serve", "--tinker", "--model", model, "--port", "0", "--state-dir", at],
  ]) {
    const line = binFails(args);
    assert.match(line, /^error: .*\/proc\/agent-r1-probe/, `${args[0]}: ${line}`);
  }
});
