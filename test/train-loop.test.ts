import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Trainer } from "../src/train/trainer.js";
import { toyTask } from "./fixtures/toy-task.js";
import { toyConfig, toyEngines } from "./fixtures/train-toy.js";
import { tempDir } from "./helpers.js";

const metrics = (out: string) =>
  readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);

test("two iterations end to end: metrics, samples, checkpoints", async () => {
  const out = tempDir();
  const t = await Trainer.open(toyConfig(2), { out, task: toyTask(), engines: toyEngines() });
  await t.run();
  await t.close();
  const m = metrics(out);
  assert.deepEqual(
    m.map((x) => x.iteration),
    [1, 2],
  );
  for (const key of [
    "reward",
    "em",
    "turns",
    "tool_calls",
    "response_tokens",
    "loss",
    "entropy",
    "grad_norm",
    "lr",
    "rollout_s",
    "train_s",
    "prefix_hit_rate",
  ]) {
    assert.equal(typeof m[1][key], "number", key);
  }
  assert.ok(existsSync(join(out, "samples", "iter-2.jsonl")));
  assert.deepEqual(readdirSync(join(out, "checkpoints")).sort(), ["step-1", "step-2"]);
  assert.ok(existsSync(join(out, "checkpoints", "step-2", "policy", "model.safetensors")));
  assert.ok(existsSync(join(out, "config.yaml")));
});

function runChild(out: string, iterations: number, resume: boolean, killAfterLines?: number): Promise<number | null> {
  const entry = fileURLToPath(new URL("./fixtures/train-toy.js", import.meta.url));
  const file = existsSync(entry) ? entry : entry.replace(/\.js$/, ".ts");
  const child = spawn(
    process.execPath,
    [...process.execArgv, file, out, String(iterations), ...(resume ? ["--resume"] : [])],
    { stdio: "inherit" },
  );
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    if (killAfterLines) {
      timer = setInterval(() => {
        const f = join(out, "metrics.jsonl");
        if (existsSync(f) && readFileSync(f, "utf8").trim().split("\n").length >= killAfterLines) {
          child.kill("SIGKILL");
          clearInterval(timer);
        }
      }, 20);
    }
    child.on("exit", (code) => {
      if (timer) clearInterval(timer);
      resolve(code);
    });
  });
}

test("a run killed with SIGKILL resumes with the same data and no lost or repeated iteration", async () => {
  const whole = tempDir(),
    broken = tempDir();
  assert.equal(await runChild(whole, 4, false), 0);
  await runChild(broken, 4, false, 2);
  assert.equal(await runChild(broken, 4, true), 0);
  const a = metrics(whole),
    b = metrics(broken);
  assert.deepEqual(
    b.map((x) => x.iteration),
    [1, 2, 3, 4],
  );
  // Same seeds, same data order, same weights at the checkpoint: the resumed run repeats the uninterrupted one.
  for (const key of ["reward", "response_tokens", "data_position"]) {
    assert.deepEqual(
      b.map((x) => x[key]),
      a.map((x) => x[key]),
      key,
    );
  }
  // Sampling logprobs can differ in the last float bits (which prompts shared a cached prefix depends on timing).
  b.forEach((x, i) =>
    assert.ok(Math.abs(x.loss - a[i].loss) < 1e-5, `loss at iteration ${i + 1}: ${x.loss} vs ${a[i].loss}`),
  );
});

test("export turns a checkpoint into a model directory the engine loads with the same weights", async () => {
  const { runCli } = await import("../src/cli/main.js");
  const { LocalEngine } = await import("../src/engine/local/local-engine.js");
  const { captureIO } = await import("./helpers.js");
  const out = tempDir();
  const t = await Trainer.open(toyConfig(1), { out, task: toyTask(), engines: toyEngines() });
  await t.run();
  await t.close();
  const dir = join(tempDir(), "exported");
  const io = captureIO();
  assert.equal(
    await runCli(["export", "--checkpoint", join(out, "checkpoints", "step-1"), "--out", dir], io),
    0,
    io.stderr.join("\n"),
  );
  assert.ok(!existsSync(join(dir, "optimizer.safetensors")));
  const a = await LocalEngine.load(dir, { workers: 0 }),
    b = await LocalEngine.load(join(out, "checkpoints", "step-1", "policy"), { workers: 0 });
  const seq = [[1, 5, 9, 14, 20]];
  assert.deepEqual(await a.computeLogprobs(seq), await b.computeLogprobs(seq));
  await a.dispose();
  await b.dispose();
  const bad = captureIO();
  assert.equal(await runCli(["export", "--checkpoint", join(out, "nope"), "--out", dir], bad), 1);
  assert.match(bad.stderr[0], /nope: not found/);
});

test("an adaptive KL (algorithm.kl.target) moves the coefficient as verl's controller does, and a resumed run goes on from the checkpoint's", async () => {
  const out = tempDir();
  const kl = { coef: 0.1, target: 0.05, horizon: 20, inReward: true };
  const cfg = (iterations: number) => {
    const c = toyConfig(iterations);
    return { ...c, algorithm: { ...c.algorithm, filterConstantGroups: false, kl: { ...c.algorithm.kl, ...kl } } };
  };
  const first = await Trainer.open(cfg(2), { out, task: toyTask(), engines: toyEngines() });
  await first.run();
  await first.close();
  const resumed = await Trainer.open(cfg(3), { out, task: toyTask(), engines: toyEngines(), resume: true });
  await resumed.run();
  await resumed.close();
  const m = metrics(out);
  assert.equal(m[0].kl_coef, 0.1);
  // Each iteration's batch is batchSize x n = 8 episodes (no group is dropped).
  for (const i of [1, 2]) {
    const error = Math.max(-0.2, Math.min(0.2, m[i - 1].kl_ref / kl.target - 1));
    const expected = m[i - 1].kl_coef * (1 + (error * 8) / kl.horizon);
    assert.ok(Math.abs(m[i].kl_coef - expected) < 1e-12, `iteration ${i + 1}: ${m[i].kl_coef} vs ${expected}`);
  }
  assert.notEqual(m[1].kl_coef, m[0].kl_coef);
  const state = JSON.parse(readFileSync(join(out, "checkpoints", "step-3", "state.json"), "utf8"));
  const last = m[2];
  const error = Math.max(-0.2, Math.min(0.2, last.kl_ref / kl.target - 1));
  assert.ok(Math.abs(state.klCoef - last.kl_coef * (1 + (error * 8) / kl.horizon)) < 1e-12);
});
