/**
 * On-policy distillation through the trainer (algorithm.distill): a toy run with a local teacher
 * directory, the same run with the teacher behind `agent-r1 serve`'s vLLM API and behind a
 * Tinker-protocol server (the same numbers), and the tokenizer check refusing a teacher before the
 * run directory is touched.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Trainer } from "../src/train/trainer.js";
import { parseConfig } from "../src/train/load-config.js";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { checkTeacherTokenizer, openTeacher } from "../src/engine/teacher.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { InputError } from "../src/util/errors.js";
import { toyTask } from "./fixtures/toy-task.js";
import { toyEngines } from "./fixtures/train-toy.js";
import { repoRoot } from "./repo-root.js";
import { tempDir } from "./helpers.js";

const root = tempDir("agent-r1-distill-");
const teacherDir = join(root, "teacher");
let served: LocalEngine, vllm: RunningServer, tinker: RunningTinkerServer;

before(async () => {
  // A teacher of its own (another seed of the tiny preset) with the student's tokenizer, the shipped one.
  await initModel({ preset: "tiny", out: teacherDir, seed: 11 });
  served = await LocalEngine.load(teacherDir, { workers: 0 });
  vllm = await startServer({ engine: served, port: 0, name: "teacher", log: () => {} });
  tinker = await startTinkerServer({
    baseModels: new Map([["teacher", teacherDir]]),
    stateDir: join(root, "tinker-state"),
    port: 0,
    log: () => {},
  });
});

after(async () => {
  await Promise.all([vllm?.close(), tinker?.close()]);
  await served?.dispose();
});

function distillConfig(teacher: unknown, iterations = 2) {
  return parseConfig({
    model: { preset: "tiny" },
    engine: { workers: 0 },
    rollout: { n: 4, maxTurns: 2, maxTokensPerTurn: 8, maxTotalTokens: 256 },
    algorithm: { distill: { teacher, coef: 0.5 } },
    train: { iterations, batchSize: 2, checkpointEvery: 0, valEvery: 0, samplesPerIteration: 0 },
    optim: { lr: 1e-2 },
  });
}

async function run(
  teacher: unknown,
  out: string,
  iterations = 2,
): Promise<{ m: Record<string, number>[]; log: string[] }> {
  const log: string[] = [];
  const t = await Trainer.open(distillConfig(teacher, iterations), {
    out,
    task: toyTask(),
    engines: toyEngines(),
    log: (l) => log.push(l),
  });
  try {
    await t.run();
  } finally {
    await t.close();
  }
  const m = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);
  return { m, log };
}

test("a toy run distils from a local teacher directory: the teacher's metrics in every line", async () => {
  const { m, log } = await run(teacherDir, join(root, "local"));
  assert.equal(m.length, 2);
  for (const line of m) {
    assert.ok(Number.isFinite(line.distill_teacher_logprob) && line.distill_teacher_logprob < 0);
    assert.ok(Number.isFinite(line.distill_reverse_kl));
    assert.ok(line.distill_teacher_s >= 0);
    assert.equal(line.groups_dropped, 0, "every group trains under distillation");
  }
  assert.ok(
    log.some((l) => l.startsWith(`distilling from ${teacherDir} (`)),
    log.join("\n"),
  );
});

test("the same run with the teacher behind the vLLM API (agent-r1 serve) and a Tinker server gives the same numbers", async () => {
  const local = await run(teacherDir, join(root, "local-1"), 1);
  const common = { model: "teacher", tokenizer: teacherDir };
  const viaVllm = await run({ kind: "vllm", url: vllm.url, ...common }, join(root, "vllm"), 1);
  const viaTinker = await run({ kind: "tinker", url: tinker.url, ...common }, join(root, "tinker"), 1);
  for (const [name, r] of [
    ["vllm", viaVllm],
    ["tinker", viaTinker],
  ] as const) {
    for (const key of ["distill_teacher_logprob", "distill_reverse_kl", "loss", "reward"]) {
      const [a, b] = [r.m[0][key], local.m[0][key]];
      assert.ok(Math.abs(a - b) <= 1e-5 * Math.max(1, Math.abs(b)), `${name} ${key}: ${a} vs ${b}`);
    }
  }
  assert.ok(
    viaVllm.log.some((l) => l === `distilling from teacher on vllm at ${vllm.url}`),
    viaVllm.log.join("\n"),
  );
});

test("the vLLM and Tinker teachers score exactly what the local engine scores", async () => {
  const seqs = [
    [1, 2, 3, 4, 5],
    [7, 8],
    [9, 10, 11, 12, 13, 14, 15, 16],
  ];
  const want = await served.computeLogprobs(seqs);
  const engines = toyEngines();
  for (const kind of ["vllm", "tinker"] as const) {
    const url = kind === "vllm" ? vllm.url : tinker.url;
    const t = await openTeacher({ kind, url, model: "teacher", tokenizer: teacherDir }, { engines });
    try {
      const got = await t.computeLogprobs(seqs);
      got.forEach((row, i) =>
        row.forEach((x, p) =>
          p === 0 ? assert.equal(x, null) : assert.ok(Math.abs(x! - want[i][p]!) < 1e-6, `${kind} ${i} ${p}`),
        ),
      );
    } finally {
      await t.dispose();
    }
  }
  // A model name the server does not serve is its error, naming the server.
  const wrong = await openTeacher({ kind: "vllm", url: vllm.url, model: "other", tokenizer: teacherDir }, { engines });
  await assert.rejects(wrong.computeLogprobs(seqs), /completions \(echo, scoring\) failed: HTTP 404/);
});

test("a teacher with another tokenizer is refused in one line before the run directory is written", async () => {
  const out = join(root, "refused");
  await assert.rejects(
    Trainer.open(distillConfig(join(repoRoot(), "assets", "base", "multihop")), {
      out,
      task: toyTask(),
      engines: toyEngines(),
    }),
    (e: unknown) =>
      e instanceof InputError &&
      /^algorithm\.distill\.teacher: the teacher's tokenizer \(.*multihop\/tokenizer\.json, sha256 [0-9a-f]{12}\) is not the student's \(.*tokenizer\.json, sha256 [0-9a-f]{12}\); distillation needs one tokenizer for both$/.test(
        (e as Error).message,
      ),
  );
  assert.equal(existsSync(out), false);
  // Key order and spacing do not count: the same tokenizer written another way is the same tokenizer.
  const copy = join(root, "tok-reordered");
  const json = JSON.parse(readFileSync(join(defaultTokenizerDir(), "tokenizer.json"), "utf8")) as Record<
    string,
    unknown
  >;
  const reordered = Object.fromEntries(Object.entries(json).reverse());
  mkdirSync(copy, { recursive: true });
  writeFileSync(join(copy, "tokenizer.json"), JSON.stringify(reordered, null, 1));
  checkTeacherTokenizer(copy, defaultTokenizerDir());
  assert.throws(
    () => checkTeacherTokenizer(join(root, "nowhere"), defaultTokenizerDir()),
    /nowhere\/tokenizer\.json: file not found/,
  );
});
