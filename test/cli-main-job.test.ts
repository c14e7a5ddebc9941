/** The task commands (tokenizer, eval, data, main) in-process on a tiny random model: outputs, round trips, one-line errors. */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "../src/cli/command.js";
import { runCommand } from "../src/cli/main.js";
import { dataCommand } from "../src/cli/commands/data.js";
import { evalCommand, worldsToPlay } from "../src/cli/commands/eval.js";
import { mainJobCommand, MAIN_JOB_DEFAULTS } from "../src/cli/commands/main-job.js";
import { tokenizerCommand } from "../src/cli/commands/tokenizer.js";
import { pretrainCommand } from "../src/cli/commands/pretrain.js";
import { initModel } from "../src/model/init-model.js";
import { readTaskRowsJsonl, readTaskRowsParquet } from "../src/data/index.js";
import { getTask } from "../src/tasks/index.js";
import { captureIO, tempDir } from "./helpers.js";
import { playDemo } from "./task-helpers.js";

/** What runCli does for a registered command: run it, or print one error line and return 1 (2 for a usage error). */
async function run(cmd: Command, argv: string[]) {
  const io = captureIO();
  const code = await runCommand(cmd, argv, io);
  return { code, ...io };
}

const SMALL = ["--option", "train=9", "--option", "val=9", "--option", "test=4"];
const FAST = ["--max-turns", "2", "--max-tokens-per-turn", "6"];
let model: string;
before(async () => {
  model = join(tempDir(), "tiny");
  await initModel({ preset: "tiny", out: model, seed: 2 });
});

test("eval --json prints a table and ends with a JSON line holding em, f1, turns, tool_calls", async () => {
  const r = await run(evalCommand, [
    "--model",
    model,
    "--task",
    "multihop",
    "--split",
    "test",
    "--json",
    ...SMALL,
    ...FAST,
  ]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  assert.match(r.stdout.join("\n"), /exact match\s+F1\s+turns\s+tool calls\s+tool errors\s+tokens/);
  const last = JSON.parse(r.stdout.at(-1)!) as Record<string, number>;
  for (const k of ["em", "f1", "turns", "tool_calls"]) assert.equal(typeof last[k], "number", k);
  assert.equal(last.episodes, 4);
  const calc = await run(evalCommand, ["--model", model, "--task", "calc", "--limit", "2", "--json", ...FAST]);
  assert.equal(calc.code, 0, calc.stderr.join("\n"));
  assert.match(calc.stdout.join("\n"), /success/);
});

test("eval --temperature --samples plays each row K times sampled; --samples without a temperature is a usage error", async () => {
  const base = ["--model", model, "--task", "multihop", "--split", "test", "--limit", "3", "--json", ...SMALL, ...FAST];
  const r = await run(evalCommand, [...base, "--temperature", "1", "--samples", "2"]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  assert.match(r.stdout[0], /\(3 rows, 2 sampled a row at temperature 1\)$/);
  assert.equal((JSON.parse(r.stdout.at(-1)!) as { episodes: number }).episodes, 6);
  const file = join(tempDir(), "episodes.jsonl");
  const again = await run(evalCommand, [...base, "--temperature", "1", "--samples", "2", "--episodes", file]);
  assert.equal(again.code, 0, again.stderr.join("\n"));
  const episodes = readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    episodes.map((e) => [e.row, e.sample]),
    [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
      [2, 0],
      [2, 1],
    ],
  );
  const summary = JSON.parse(again.stdout.at(-1)!) as { em: number; turns: number };
  const mean = (k: string) => episodes.reduce((a, e) => a + Number(e[k]), 0) / episodes.length;
  assert.equal(mean("em"), summary.em);
  assert.equal(mean("turns"), summary.turns);
  for (const e of episodes) assert.equal(typeof e.end_reason, "string");
  const unwritable = await run(evalCommand, [...base, "--episodes", join(tempDir(), "no", "such", "dir.jsonl")]);
  assert.equal(unwritable.code, 1);
  assert.match(unwritable.stderr.join("\n"), /^error: eval: --episodes .*dir\.jsonl: cannot write/);
  const greedy = await run(evalCommand, [...base, "--samples", "2"]);
  assert.equal(greedy.code, 2);
  assert.match(greedy.stderr.join("\n"), /--samples 2 needs --temperature above 0/);
  const negative = await run(evalCommand, [...base, "--temperature=-1"]);
  assert.equal(negative.code, 2);
  assert.match(negative.stderr.join("\n"), /--temperature must be 0 \(greedy\) or more, got -1/);
});

test("eval --compact-at plays with compaction; a bad --compact-at or a lone --keep-last is one line", async () => {
  const base = ["--model", model, "--task", "multihop", "--split", "test", "--limit", "2", "--json", ...SMALL, ...FAST];
  const r = await run(evalCommand, [...base, "--compact-at", "600", "--keep-last", "1"]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  assert.match(r.stdout[0], /\(2 rows, greedy, compacting past 600 tokens\)$/);
  assert.equal((JSON.parse(r.stdout.at(-1)!) as { episodes: number }).episodes, 2);
  const over = await run(evalCommand, [...base, "--compact-at", "5000"]);
  assert.equal(over.code, 2);
  assert.match(over.stderr.join("\n"), /^error: eval: --compact-at 5000 must be below the episode's token limit, \d+/);
  const lone = await run(evalCommand, [...base, "--keep-last", "1"]);
  assert.equal(lone.code, 2);
  assert.match(lone.stderr.join("\n"), /--keep-last applies with --compact-at N only/);
});

test("eval --worlds plays the train questions of other worlds, as task.worlds draws them; misuse is one line", async () => {
  const base = ["--model", model, "--task", "multihop", "--json", ...SMALL, ...FAST];
  const r = await run(evalCommand, [...base, "--worlds", "3", "--first-world", "5", "--limit", "4"]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  assert.match(r.stdout[0], /on 'multihop' train questions of worlds 5-7 \(4 rows, greedy\)$/);
  assert.equal((JSON.parse(r.stdout.at(-1)!) as { episodes: number }).episodes, 4);
  const all = await run(evalCommand, [...base, "--worlds", "1"]);
  assert.equal(all.code, 0, all.stderr.join("\n"));
  assert.match(all.stdout[0], /train questions of world 0 \(9 rows, greedy\)$/); // --option train=9: all in one world
  for (const [extra, message] of [
    [["--first-world", "2"], /--first-world applies with --worlds N only/],
    [
      ["--worlds", "2", "--split", "test"],
      /--worlds plays the worlds' train questions: give it without --split or --data/,
    ],
    [["--worlds", "0"], /--worlds/],
  ] as const) {
    const bad = await run(evalCommand, [...base, ...extra]);
    assert.equal(bad.code, 2, extra.join(" "));
    assert.match(bad.stderr.join("\n"), message);
    assert.equal(bad.stderr.length, 1);
  }
});

test("worldsToPlay: each world's row is played in its own world, where the expert's demonstration scores 1", async () => {
  const options = { train: 6, val: 2, test: 2 };
  const given = getTask("multihop", options);
  const { task, rows, label } = worldsToPlay(given, options, 3, 4);
  assert.equal(label, "train questions of worlds 4-6");
  assert.deepEqual(
    rows.map((r) => r.extra_info.world),
    [0, 1, 2, 0, 1, 2],
  );
  const demos = task.demonstrations(rows, { seed: 0, quality: 1 });
  for (const [i, row] of rows.entries()) assert.equal((await playDemo(task, row, demos[i])).reward, 1, `row ${i}`);
  // The task as given would search its own world's documents for these questions: the tool answers differ.
  await assert.rejects(() => playDemo(given, rows[0], demos[0]), /observation after turn 0/);
});

test("data writes a split as JSONL and parquet that read back equal, and eval --data accepts both", async () => {
  const dir = tempDir();
  const task = getTask("multihop", { train: 9, val: 9, test: 4 });
  for (const file of [join(dir, "test.jsonl"), join(dir, "test.parquet")]) {
    const w = await run(dataCommand, ["--task", "multihop", "--split", "test", "--out", file, ...SMALL]);
    assert.equal(w.code, 0, w.stderr.join("\n"));
    const rows = file.endsWith(".jsonl") ? readTaskRowsJsonl(file).rows : (await readTaskRowsParquet(file)).rows;
    assert.deepEqual(rows, task.rows("test"));
    const e = await run(evalCommand, [
      "--model",
      model,
      "--task",
      "multihop",
      "--data",
      file,
      "--limit",
      "2",
      "--json",
      ...SMALL,
      ...FAST,
    ]);
    assert.equal(e.code, 0, e.stderr.join("\n"));
    assert.equal((JSON.parse(e.stdout.at(-1)!) as { episodes: number }).episodes, 2);
  }
});

test("tokenizer writes tokenizer.json and tokenizer_config.json", async () => {
  const out = join(tempDir(), "tok");
  const r = await run(tokenizerCommand, ["--task", "multihop", "--vocab", "512", "--out", out, ...SMALL]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  for (const f of ["tokenizer.json", "tokenizer_config.json"]) assert.ok(existsSync(join(out, f)), f);
  const w = await run(tokenizerCommand, [
    "--task",
    "multihop",
    "--vocab",
    "512",
    "--worlds",
    "3",
    "--out",
    join(tempDir(), "tok3"),
    ...SMALL,
  ]);
  assert.equal(w.code, 0, w.stderr.join("\n"));
  assert.match(w.stdout.join("\n"), /trained on task 'multihop', 3 worlds\)$/);
});

test("pretrain: copying curriculum, SFT, a loadable base without optimizer state; --init continues from it", async () => {
  const out = join(tempDir(), "base");
  const r = await run(pretrainCommand, [
    "--task",
    "multihop",
    ...SMALL,
    "--preset",
    "tiny",
    "--vocab",
    "400",
    "--copy-steps",
    "3",
    "--steps",
    "3",
    "--batch",
    "2",
    "--worlds",
    "4",
    "--out",
    out,
  ]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  assert.match(r.stdout.join("\n"), /quality 0\.3, 4 worlds\)/);
  // train=9 questions shared by 4 worlds: ceil(9 / 4) = 3 each
  assert.match(
    r.stdout.join("\n"),
    /wrote .*base: 0\.\d+M parameters, 12 demonstrations, cross-entropy \d+\.\d+ → \d+\.\d+ nats\/token/,
  );
  for (const f of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"])
    assert.ok(existsSync(join(out, f)), f);
  assert.ok(!existsSync(join(out, "optimizer.safetensors")));
  const again = join(tempDir(), "base2");
  const r2 = await run(pretrainCommand, [
    "--task",
    "multihop",
    ...SMALL,
    "--init",
    out,
    "--copy-steps",
    "0",
    "--steps",
    "2",
    "--batch",
    "2",
    "--worlds",
    "1",
    "--out",
    again,
  ]);
  assert.equal(r2.code, 0, r2.stderr.join("\n"));
  assert.match(r2.stdout.join("\n"), /1 world\), .* 9 demonstrations/s, "--worlds 1: the task's own train split");
  assert.equal(
    readFileSync(join(again, "tokenizer.json"), "utf8"),
    readFileSync(join(out, "tokenizer.json"), "utf8"),
    "--init keeps the model's tokenizer",
  );
});

test("bad input gives one-line errors: exit 2 for the command line, 1 for files, models and task options", async () => {
  const cases: [Command, string[], RegExp, number][] = [
    [
      evalCommand,
      ["--model", model, "--task", "nope"],
      /^error: unknown task 'nope'; tasks: multihop, calc, shop, household$/,
      2,
    ],
    [
      evalCommand,
      ["--model", join(model, "missing"), "--task", "multihop", ...SMALL],
      /^error: .*missing.*model directory not found/,
      1,
    ],
    [
      evalCommand,
      ["--model", model, "--task", "multihop", "--split", "dev"],
      /^error: eval: unknown --split 'dev'; splits: train, val, test$/,
      2,
    ],
    [evalCommand, ["--task", "multihop"], /^error: eval: --model is required/, 2],
    [
      evalCommand,
      ["--model", model, "--task", "multihop", "--data", "rows.csv"],
      /^error: rows.csv: unknown data file type '.csv'/,
      1,
    ],
    [
      dataCommand,
      ["--task", "multihop", "--split", "test", "--out", "x.txt"],
      /^error: data: --out x.txt: unknown file type '.txt'/,
      2,
    ],
    [
      dataCommand,
      ["--task", "multihop", "--option", "sizes=3", "--split", "test", "--out", "x.jsonl"],
      /^error: task 'multihop': unknown option 'sizes'/,
      1,
    ],
    [mainJobCommand, ["--base", join(model, "missing")], /^error: main: base checkpoint not found/, 1],
    [
      tokenizerCommand,
      ["--task", "multihop", "--out", "t", "--split", "bytes"],
      /^error: tokenizer: --split must be one of words, gpt, got 'bytes'$/,
      2,
    ],
    [
      pretrainCommand,
      ["--task", "multihop", ...SMALL, "--copy-blend", "1.5", "--out", join(tempDir(), "c")],
      /^error: pretrain: --copy-blend must be in \[0, 1\], got 1.5$/,
      2,
    ],
    [
      pretrainCommand,
      ["--task", "multihop", ...SMALL, "--worlds", "0", "--out", join(tempDir(), "w")],
      /^error: pretrain: --worlds must be a whole number >= 1, got 0$/,
      2,
    ],
    [
      pretrainCommand,
      ["--task", "multihop", ...SMALL, "--init", join(model, "missing"), "--steps", "1", "--out", join(tempDir(), "b")],
      /^error: .*missing.*model directory not found/,
      1,
    ],
  ];
  for (const [cmd, argv, re, code] of cases) {
    const r = await run(cmd, argv);
    assert.equal(r.code, code, argv.join(" "));
    assert.equal(r.stderr.length, 1, r.stderr.join("\n"));
    assert.doesNotMatch(r.stderr[0], /\n/);
    assert.match(r.stderr[0], re);
  }
});

/** The main job on the tiny model with a few short rows: its flags before the iteration settings. */
const tinyRun = (out: string) => [
  "--base",
  model,
  "--out",
  out,
  "task.options.train=4",
  "task.options.val=4",
  "task.options.test=2",
  "rollout.n=2",
  "rollout.maxTurns=2",
  "rollout.maxTokensPerTurn=6",
];

test("main: evaluates, trains, evaluates again and leaves a run directory with eval.json", async () => {
  assert.ok(existsSync(MAIN_JOB_DEFAULTS.recipe()), "the recipe ships with the package");
  const out = join(tempDir(), "run");
  const r = await run(mainJobCommand, [...tinyRun(out), "train.iterations=1", "train.batchSize=2", "train.valEvery=0"]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  const text = r.stdout.join("\n");
  assert.match(text, /held-out exact match: \d+\.\d% → \d+\.\d%/);
  assert.match(text, /tool calls per episode: /);
  assert.match(text, /response length \(tokens per episode\): /);
  const saved = JSON.parse(readFileSync(join(out, "eval.json"), "utf8"));
  assert.equal(saved.iterations, 1);
  assert.equal(saved.before.episodes, 2);
  for (const f of ["config.yaml", "metrics.jsonl"]) assert.ok(existsSync(join(out, f)), f);
});

test("main: the policy with the best validation exact match is kept as best/ and is the one evaluated after", async () => {
  const out = join(tempDir(), "run");
  const r = await run(mainJobCommand, [...tinyRun(out), "train.iterations=3", "train.batchSize=2", "train.valEvery=1"]);
  assert.equal(r.code, 0, r.stderr.join("\n"));
  const metrics = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { iteration: number; "val/em": number });
  assert.equal(metrics.length, 3);
  // the first iteration with the highest validation exact match
  const top = Math.max(...metrics.map((m) => m["val/em"]));
  const want = metrics.find((m) => m["val/em"] === top)!.iteration;
  const saved = JSON.parse(readFileSync(join(out, "eval.json"), "utf8"));
  assert.deepEqual(saved.best, { iteration: want, valEm: top });
  assert.ok(existsSync(join(out, "best", "config.json")), "best/ holds the policy");
  assert.equal(saved.final.episodes, 2, "the final policy is evaluated too");
  if (want !== 3) assert.match(r.stdout.join("\n"), /the final policy \(iteration 3\) on the test split/);
  assert.match(r.stdout.join("\n"), new RegExp(`the best policy on validation: iteration ${want}`));
});
