/**
 * The Tinker client against `serve --tinker` on loopback, end to end: two iterations of the multihop
 * recipe trained through the protocol give the same rewards, losses, gradient norms and weights as
 * the same run in-process, once in each wire generation (SDK 0.24.1: JSON; 0.25.0: protobuf with
 * zstd bodies; 0.31.0, the newest: per-sequence sample ids and completions polled per sampling
 * session as well). Then eval of the remote checkpoint, and a remote run resumed from its checkpoint.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../src/cli/main.js";
import { startTinkerServer, type RunningTinkerServer } from "../src/serve/tinker/server.js";
import { loadModelWeights } from "../src/model/safetensors.js";
import { readRemoteState } from "../src/engine/remote/tinker-engine.js";
import { captureIO, tempDir } from "./helpers.js";
import { BASE, multihopRecipe } from "./fixtures/remote-recipes.js";

const root = tempDir("agent-r1-remote-");
let json: RunningTinkerServer, proto: RunningTinkerServer;

function recipe(name: string, engine: Parameters<typeof multihopRecipe>[0]): string {
  const p = join(root, `${name}.yaml`);
  writeFileSync(p, multihopRecipe(engine));
  return p;
}

async function train(config: string, out: string, extra: string[] = []): Promise<void> {
  const io = captureIO();
  const code = await runCli(["train", "--config", config, "--out", out, ...extra], io);
  assert.equal(code, 0, io.stderr.join("\n"));
}

const metrics = (out: string) =>
  readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);

const near = (a: number, b: number, rel: number, what: string) =>
  assert.ok(Math.abs(a - b) <= rel * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

before(async () => {
  const baseModels = new Map([["multihop", BASE]]);
  json = await startTinkerServer({ baseModels, stateDir: join(root, "state-json"), port: 0, log: () => {} });
  proto = await startTinkerServer({
    baseModels,
    stateDir: join(root, "state-proto"),
    port: 0,
    compress: true,
    log: () => {},
  });
});

after(async () => {
  await Promise.all([json?.close(), proto?.close()]);
});

test("two iterations through serve --tinker equal the in-process run, in each wire generation", async () => {
  const local = join(root, "local");
  await train(recipe("local", { local: true }), local);
  const want = metrics(local);
  assert.equal(want.length, 2);
  assert.ok(
    want.some((m) => m.grad_norm > 0),
    "the run trained (some group's rewards varied)",
  );
  const localWeights = loadModelWeights(join(local, "checkpoints", "step-2", "policy"));
  const baseWeights = loadModelWeights(BASE);
  for (const [label, server, sdk] of [
    ["JSON", json, "0.24.1"],
    ["protobuf", proto, "0.25.0"],
    ["newest", proto, "0.31.0"],
  ] as const) {
    const out = join(root, `remote-${label}`);
    await train(recipe(`remote-${label}`, { url: server.url, sdk }), out);
    const got = metrics(out);
    assert.equal(got.length, 2, label);
    got.forEach((m, i) => {
      assert.equal(m.reward, want[i].reward, `${label} iteration ${i + 1}: reward`);
      assert.equal(m.response_tokens, want[i].response_tokens, `${label} iteration ${i + 1}: response tokens`);
      near(m.loss, want[i].loss, 1e-5, `${label} iteration ${i + 1}: loss`);
      near(m.grad_norm, want[i].grad_norm, 1e-5, `${label} iteration ${i + 1}: grad norm`);
      assert.equal(m.entropy, undefined, "Tinker reports no entropy");
    });
    // The weights the server saved at the last checkpoint against the in-process ones.
    const state = readRemoteState(join(out, "checkpoints", "step-2", "policy"));
    const m = /^tinker:\/\/([^/]+)\/weights\/(.+)$/.exec(state.path)!;
    const stateDir = join(root, label === "JSON" ? "state-json" : "state-proto");
    const remoteWeights = loadModelWeights(join(stateDir, m[1], "weights", m[2]));
    assert.equal(remoteWeights.size, localWeights.size);
    // Float32 sums in another order move a few Adam updates of near-zero gradients, so the test is
    // the distance between the two runs' weights against the distance both moved from the base.
    let diff = 0,
      moved = 0,
      worst = 0;
    for (const [name, t] of localWeights) {
      const r = remoteWeights.get(name);
      assert.ok(r, `${label}: ${name} missing`);
      const a = t.data as Float32Array,
        b = r!.data as Float32Array,
        w0 = baseWeights.get(name)!.data as Float32Array;
      for (let i = 0; i < a.length; i++) {
        diff += (a[i] - b[i]) ** 2;
        moved += (a[i] - w0[i]) ** 2;
        worst = Math.max(worst, Math.abs(a[i] - b[i]));
      }
    }
    assert.ok(moved > 0, "training moved the weights");
    assert.ok(
      Math.sqrt(diff) < 0.01 * Math.sqrt(moved),
      `${label}: |Δ| ${Math.sqrt(diff)} against a move of ${Math.sqrt(moved)}`,
    );
    assert.ok(worst < 1e-4, `${label}: a weight differs by ${worst}, more than one update`);
  }
});

test("a remote checkpoint evaluates through the server, and a remote run resumes from it", async () => {
  const out = join(root, "remote-JSON");
  const policy = join(out, "checkpoints", "step-1", "policy");
  const io = captureIO();
  const code = await runCli(["eval", "--model", policy, "--task", "multihop", "--limit", "4"], io);
  assert.equal(code, 0, io.stderr.join("\n"));
  assert.match(io.stdout.join("\n"), /exact match/);
  // Resume a copy whose last checkpoint is step-1: iteration 2 is redone on the server and equals the first run's.
  const again = join(root, "remote-resume");
  const cfg = recipe("remote-resume", { url: json.url, sdk: "0.24.1" });
  await train(cfg, again, ["train.iterations=1"]);
  await train(cfg, again, ["--resume", again]);
  const first = metrics(out),
    resumed = metrics(again);
  assert.deepEqual(
    resumed.map((m) => m.iteration),
    [1, 2],
  );
  assert.equal(resumed[1].reward, first[1].reward);
  near(resumed[1].loss, first[1].loss, 1e-5, "resumed loss");
});
