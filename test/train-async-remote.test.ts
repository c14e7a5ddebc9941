/**
 * Asynchronous training (train.async) on the remote engine kinds, on loopback: the multihop recipe
 * through `serve --tinker` (the producer samples while the server runs forward_backward; each
 * optim_step waits for the samples in flight, so no sampling session is ever used after its
 * weights changed), and with `engine.sampler` (rollouts on `agent-r1 serve`'s SGLang API while the
 * local engine trains, weights pushed after each step). Runs from dist/ (the base model's path).
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../src/cli/main.js";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { startServer, type RunningServer } from "../src/serve/server.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { captureIO, tempDir } from "./helpers.js";
import { BASE, multihopRecipe } from "./fixtures/remote-recipes.js";

const root = tempDir("agent-r1-async-remote-");
const weights = join(root, "weights");
let tinker: RunningTinkerServer, sampler: RunningServer, samplerEngine: LocalEngine;

before(async () => {
  mkdirSync(weights, { recursive: true });
  tinker = await startTinkerServer({
    baseModels: new Map([["multihop", BASE]]),
    stateDir: join(root, "state"),
    port: 0,
    log: () => {},
  });
  samplerEngine = await LocalEngine.load(BASE, { workers: 0 });
  sampler = await startServer({ engine: samplerEngine, port: 0, weightsFrom: weights, log: () => {} });
});

after(async () => {
  await Promise.all([tinker?.close(), sampler?.close()]);
  await samplerEngine?.dispose();
});

/** Three iterations of `yaml` with train.async (k = 1, wait); the metrics lines. */
async function trainAsync(name: string, yaml: string): Promise<Record<string, number>[]> {
  const cfg = join(root, `${name}.yaml`),
    out = join(root, name);
  writeFileSync(cfg, yaml);
  const io = captureIO();
  const code = await runCli(
    ["train", "--config", cfg, "--out", out, "train.iterations=3", "train.async.maxStaleness=1"],
    io,
  );
  assert.equal(code, 0, io.stderr.join("\n"));
  assert.ok(existsSync(join(out, "checkpoints", "step-3", "state.json")));
  return readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);
}

function checkBounded(m: Record<string, number>[]): void {
  assert.deepEqual(
    m.map((x) => x.iteration),
    [1, 2, 3],
  );
  for (const x of m) {
    assert.ok(x.staleness_max <= 1, `iteration ${x.iteration}: staleness ${x.staleness_max}`);
    assert.equal(x.stale_groups_dropped, 0);
    assert.ok(Number.isFinite(x.loss) && Number.isFinite(x.learner_wait_s) && Number.isFinite(x.producer_wait_s));
  }
  assert.equal(m[0].policy_version, 0);
  assert.ok(m[2].policy_version > 0, "the weights moved");
}

test("train.async through serve --tinker: three iterations, staleness within the bound", async () => {
  checkBounded(await trainAsync("tinker", multihopRecipe({ url: tinker.url, sdk: "0.25.0" })));
});

test("train.async with engine.sampler: rollouts on the inference server, staleness within the bound", async () => {
  const yaml =
    multihopRecipe({ local: true }).replace(
      "loss: { type: ppo, dualClip: 0 }",
      "loss: { type: ppo, dualClip: 0, tis: { cap: 2 } }",
    ) +
    `engine:\n  sampler: { kind: sglang, url: ${JSON.stringify(sampler.url)}, weightsDir: ${JSON.stringify(join(weights, "run"))} }\n`;
  const m = await trainAsync("split", yaml);
  checkBounded(m);
  for (const x of m) assert.ok(Number.isFinite(x.sampler_drift) && x.tis_weight > 0, `tis: ${x.tis_weight}`);
});
