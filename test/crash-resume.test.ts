/**
 * Crash and resume (docs/reliability.md): a tiny training run in a child
 * process is killed with SIGKILL while it is paused (a fault plan pause:..., test/fixtures/faulty-engines.ts)
 * during a rollout, during the update, and in the middle of a checkpoint
 * write; `--resume` continues from the last complete checkpoint with every
 * iteration recorded exactly once and the same numbers as a run never
 * killed. Checkpoints carry checksums: a damaged newest checkpoint is skipped
 * (named in the log) in favour of the previous one; with none left, resume
 * fails with one line naming the files and leaves the run directory as it was.
 * (train-loop.test.ts kills a run between iterations, at a metrics line.)
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runCli } from "../src/cli/main.js";
import { listCheckpoints, verifyCheckpoint } from "../src/train/checkpoint.js";
import { PAUSE_MARKER } from "./fixtures/faulty-engines.js";
import { snapshot } from "./fixtures/snapshot.js";
import { captureIO, tempDir } from "./helpers.js";

const ITERATIONS = 3;

interface Child {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** The pause marker line, when the child reached it (and was killed there). */
  paused?: string;
}

/** node train-toy OUT ITERATIONS [--resume] [--faults PLAN]; killed with SIGKILL as soon as it reports a pause. */
function runToy(out: string, iterations: number, opts: { resume?: boolean; fault?: string } = {}): Promise<Child> {
  const entry = fileURLToPath(new URL("./fixtures/train-toy.js", import.meta.url));
  const file = existsSync(entry) ? entry : entry.replace(/\.js$/, ".ts");
  const args = [
    ...process.execArgv,
    file,
    out,
    String(iterations),
    ...(opts.resume ? ["--resume"] : []),
    ...(opts.fault ? ["--faults", opts.fault] : []),
  ];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "",
    paused: string | undefined;
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderr += chunk;
    const line = stderr.split("\n").find((l) => l.startsWith(PAUSE_MARKER));
    if (line && !paused) {
      paused = line;
      child.kill("SIGKILL");
    }
  });
  const guard = setTimeout(() => child.kill("SIGKILL"), 90_000);
  return new Promise((resolve) =>
    child.on("exit", (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stderr, paused });
    }),
  );
}

type Metrics = Record<string, number>;
const metrics = (out: string): Metrics[] =>
  readFileSync(join(out, "metrics.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Metrics);

/** Iterations 1..n, each once, in order. */
function assertContiguous(m: Metrics[], n: number): void {
  assert.deepEqual(
    m.map((x) => x.iteration),
    Array.from({ length: n }, (_, i) => i + 1),
  );
}

/** The resumed run repeats the uninterrupted one: same data order, same rewards, same losses (to float noise). */
function assertSameRun(m: Metrics[], reference: Metrics[]): void {
  for (const key of ["data_position", "reward", "response_tokens"])
    assert.deepEqual(
      m.map((x) => x[key]),
      reference.slice(0, m.length).map((x) => x[key]),
      key,
    );
  m.forEach((x, i) =>
    assert.ok(
      Math.abs(x.loss - reference[i].loss) < 1e-5,
      `loss at iteration ${i + 1}: ${x.loss} vs ${reference[i].loss}`,
    ),
  );
}

function assertCheckpointsClean(out: string, newest: number): void {
  const names = readdirSync(join(out, "checkpoints"));
  assert.deepEqual(
    names.filter((n) => !/^step-\d+$/.test(n)),
    [],
    "no temporary directories left",
  );
  assert.equal(listCheckpoints(out)[0], newest);
  for (const s of listCheckpoints(out))
    assert.equal(verifyCheckpoint(join(out, "checkpoints", `step-${s}`)), undefined, `step-${s}`);
}

let reference: Metrics[];
before(async () => {
  const whole = tempDir();
  const r = await runToy(whole, ITERATIONS + 1);
  assert.equal(r.code, 0, r.stderr);
  reference = metrics(whole);
  assertContiguous(reference, ITERATIONS + 1);
});

for (const phase of ["rollout", "update"] as const) {
  test(`killed during the ${phase} of iteration 2: resumes from step-1, redoes iteration 2, loses and repeats nothing`, async () => {
    const out = tempDir();
    const killed = await runToy(out, ITERATIONS, { fault: `pause:${phase}:2` });
    assert.equal(killed.signal, "SIGKILL", killed.stderr);
    assert.equal(killed.paused, `${PAUSE_MARKER} ${phase} 2`);
    assertContiguous(metrics(out), 1);
    assert.deepEqual(listCheckpoints(out), [1]);

    const resumed = await runToy(out, ITERATIONS, { resume: true });
    assert.equal(resumed.code, 0, resumed.stderr);
    const m = metrics(out);
    assertContiguous(m, ITERATIONS);
    assertSameRun(m, reference);
    assertCheckpointsClean(out, ITERATIONS);
  });
}

test("killed in the middle of a checkpoint write: the half-written checkpoint is ignored and removed, metrics after step-1 are dropped and redone", async () => {
  const out = tempDir();
  const killed = await runToy(out, ITERATIONS, { fault: "pause:checkpoint:2" });
  assert.equal(killed.signal, "SIGKILL", killed.stderr);
  assert.equal(killed.paused, `${PAUSE_MARKER} checkpoint 2`);
  // Iteration 2 was recorded, its checkpoint was not finished: policy files in a temporary directory, no manifest.
  assertContiguous(metrics(out), 2);
  const names = readdirSync(join(out, "checkpoints")).sort();
  assert.equal(names.length, 2, names.join());
  assert.match(names[0], /^\.tmp-step-2-\d+$/);
  assert.equal(names[1], "step-1");
  assert.ok(existsSync(join(out, "checkpoints", names[0], "policy", "model.safetensors")));
  assert.ok(!existsSync(join(out, "checkpoints", names[0], "manifest.json")));
  // As if the kill had also torn a metrics line being appended.
  appendFileSync(join(out, "metrics.jsonl"), '{"iteration":3,"data_pos');

  const resumed = await runToy(out, ITERATIONS, { resume: true });
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stderr, new RegExp(`removed .*${names[0]} \\(a checkpoint write that never finished\\)`));
  const m = metrics(out);
  assertContiguous(m, ITERATIONS);
  assertSameRun(m, reference);
  assertCheckpointsClean(out, ITERATIONS);
});

function flipByte(file: string): void {
  const bytes = readFileSync(file);
  bytes[bytes.length >> 1] ^= 0xff;
  writeFileSync(file, bytes);
}

test("a corrupted newest checkpoint is skipped for the previous one, named in the log; with none intact, resume fails and changes nothing", async () => {
  const out = tempDir();
  const first = await runToy(out, ITERATIONS);
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(listCheckpoints(out), [3, 2]);
  flipByte(join(out, "checkpoints", "step-3", "policy", "model.safetensors"));

  const resumed = await runToy(out, ITERATIONS + 1, { resume: true });
  assert.equal(resumed.code, 0, resumed.stderr);
  const skip = join(out, "checkpoints", "step-3");
  assert.ok(
    resumed.stderr.includes(
      `skipping checkpoint ${skip}: policy/model.safetensors does not match its checksum; resuming from step-2`,
    ),
    resumed.stderr,
  );
  const m = metrics(out);
  assertContiguous(m, ITERATIONS + 1);
  assertSameRun(m, reference);
  assertCheckpointsClean(out, ITERATIONS + 1);

  // Now damage both kept checkpoints (4 and 3): nothing to resume from.
  flipByte(join(out, "checkpoints", "step-4", "policy", "model.safetensors"));
  writeFileSync(join(out, "checkpoints", "step-3", "manifest.json"), "{ torn");
  const saved = snapshot(out);
  const io = captureIO();
  assert.equal(await runCli(["train", "--resume", out], io), 1);
  assert.deepEqual(io.stderr, [
    `error: ${out}: no complete checkpoint to resume from (${join(out, "checkpoints", "step-4")}: policy/model.safetensors does not match its checksum; ${join(out, "checkpoints", "step-3")}: manifest.json is not valid JSON)`,
  ]);
  assert.deepEqual(snapshot(out), saved, "the run directory is untouched");
});
