import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { applyOverride, loadConfig, parseConfig } from "../src/train/load-config.js";
import { InputError } from "../src/util/errors.js";
import { tempDir } from "./helpers.js";

test("defaults fill every field; a preset model is the default", () => {
  const c = parseConfig({});
  assert.equal(c.model.preset, "tiny");
  assert.equal(c.algorithm.estimator, "grpo");
  assert.equal(c.rollout.n, 8);
  assert.equal(c.optim.lr, 1e-3);
});

test("overrides set nested keys with YAML-typed values", () => {
  const raw: Record<string, unknown> = { optim: { lr: 0.1 } };
  applyOverride(raw, "optim.lr=3e-4");
  applyOverride(raw, "train.iterations=5");
  applyOverride(raw, "algorithm.kl.inReward=true");
  applyOverride(raw, "task.name=multihop");
  const c = parseConfig(raw);
  assert.equal(c.optim.lr, 3e-4);
  assert.equal(c.train.iterations, 5);
  assert.equal(c.algorithm.kl.inReward, true);
  assert.equal(c.task.name, "multihop");
});

test("recipes load from YAML and overrides win", () => {
  const f = join(tempDir(), "r.yaml");
  writeFileSync(f, "train:\n  iterations: 3\nrollout:\n  n: 4\n");
  const c = loadConfig(f, ["rollout.n=2"]);
  assert.equal(c.train.iterations, 3);
  assert.equal(c.rollout.n, 2);
});

function throwsLike(fn: () => unknown, re: RegExp) {
  assert.throws(fn, (e: unknown) => e instanceof InputError && re.test((e as Error).message));
}

test("unknown keys, wrong types and out-of-range values name the key and what is allowed", () => {
  throwsLike(() => parseConfig({ optim: { lrr: 1 } }), /unknown key 'optim\.lrr'; allowed here: lr, schedule/);
  throwsLike(() => parseConfig({ bogus: 1 }), /unknown key 'bogus'; allowed here: preset, model, engine, task/);
  throwsLike(
    () => parseConfig({ train: { iterations: "ten" } }),
    /train\.iterations: expected number, received string/,
  );
  throwsLike(() => parseConfig({ train: { iterations: -2 } }), /train\.iterations: Too small/);
  throwsLike(
    () => parseConfig({ algorithm: { estimator: "ppo2" } }),
    /algorithm\.estimator: must be one of "grpo", "dr-grpo"/,
  );
  throwsLike(() => parseConfig({ model: { path: "x", preset: "tiny" } }), /either path or preset/);
  throwsLike(
    () => parseConfig({ algorithm: { kl: { target: 0.01 } } }),
    /algorithm\.kl\.coef: an adaptive KL \(target\) needs a starting coef > 0/,
  );
  throwsLike(() => applyOverride({}, "novalue"), /key\.path=value/);
  throwsLike(() => loadConfig("/nonexistent.yaml"), /recipe not found/);
  const f = join(tempDir(), "bad.yaml");
  writeFileSync(f, "train: [1, 2\n");
  throwsLike(() => loadConfig(f), /bad\.yaml: not valid YAML/);
});

test("loss.offPolicy: absent by default; [lo, hi] ranges checked in one line naming the field", () => {
  assert.equal(parseConfig({}).loss.offPolicy, undefined);
  const raw: Record<string, unknown> = {};
  applyOverride(raw, "loss.offPolicy.tokenMask=[0.5, 2]");
  applyOverride(raw, "loss.offPolicy.seqMask=[0, 1.5]");
  assert.deepEqual(parseConfig(raw).loss.offPolicy, { tokenMask: [0.5, 2], seqMask: [0, 1.5] });
  const bad = (offPolicy: unknown) => () => parseConfig({ loss: { offPolicy } });
  throwsLike(
    bad({ seqMask: [2, 1] }),
    /^config: loss\.offPolicy\.seqMask: give \[lo, hi\] with lo < hi \(got \[2, 1\]\)$/,
  );
  throwsLike(bad({ tokenMask: [1, 1] }), /^config: loss\.offPolicy\.tokenMask: give \[lo, hi\] with lo < hi/);
  throwsLike(
    bad({ tokenMask: [-0.5, 2] }),
    /^config: loss\.offPolicy\.tokenMask: give \[lo, hi\] with lo ≥ 0 \(got lo -0\.5\)$/,
  );
  throwsLike(bad({ tokenMask: [1] }), /^config: loss\.offPolicy\.tokenMask: give \[lo, hi\]: two numbers$/);
  throwsLike(bad({ tokenMask: 2 }), /^config: loss\.offPolicy\.tokenMask: give \[lo, hi\]: two numbers$/);
  throwsLike(bad({}), /^config: loss\.offPolicy: give seqMask, tokenMask or both$/);
  throwsLike(bad({ seqmask: [0.5, 2] }), /unknown key 'loss\.offPolicy\.seqmask'; allowed here: seqMask, tokenMask/);
});

test("algorithm.distill: a teacher directory or server, checked in one line naming the field", () => {
  assert.equal(parseConfig({}).algorithm.distill, undefined);
  const raw: Record<string, unknown> = {};
  applyOverride(raw, "algorithm.distill.teacher=assets/base/multihop");
  assert.deepEqual(parseConfig(raw).algorithm.distill, { teacher: "assets/base/multihop", coef: 1, taskReward: true });
  const remote = { kind: "vllm", url: "http://127.0.0.1:8000", model: "teacher", tokenizer: "assets/base/multihop" };
  assert.deepEqual(parseConfig({ algorithm: { distill: { teacher: remote, coef: 0.5 } } }).algorithm.distill, {
    teacher: remote,
    coef: 0.5,
    taskReward: true,
  });
  const bad =
    (distill: unknown, more: Record<string, unknown> = {}) =>
    () =>
      parseConfig({ ...more, algorithm: { ...(more.algorithm as object), distill } });
  throwsLike(
    bad({}),
    /^config: algorithm\.distill\.teacher: give a model directory or \{ kind, url, model, tokenizer \}$/,
  );
  throwsLike(bad({ teacher: 7 }), /^config: algorithm\.distill\.teacher: give a model directory or/);
  throwsLike(bad({ teacher: "d", coef: 0 }), /^config: algorithm\.distill\.coef: Too small/);
  throwsLike(
    bad({ teacher: "d", tau: 1 }),
    /unknown key 'algorithm\.distill\.tau'; allowed here: teacher, coef, taskReward/,
  );
  const { tokenizer: _, ...noTokenizer } = remote;
  throwsLike(bad({ teacher: noTokenizer }), /^config: algorithm\.distill\.teacher\.tokenizer: expected string/);
  throwsLike(
    bad({ teacher: { ...remote, url: "127.0.0.1:8000" } }),
    /^config: algorithm\.distill\.teacher\.url: must be an http\(s\) URL/,
  );
  throwsLike(
    bad({ teacher: { ...remote, kind: "sglang" } }),
    /^config: algorithm\.distill\.teacher\.kind: sglang cannot be a teacher: this project's SGLang client reads no prompt logprobs; use vllm or tinker$/,
  );
  throwsLike(
    bad({ teacher: { ...remote, extra: 1 } }),
    /unknown key 'algorithm\.distill\.teacher\.extra'; allowed here: kind, url, model, tokenizer/,
  );
  throwsLike(
    bad({ teacher: "d", taskReward: false }, { algorithm: { estimator: "gae" } }),
    /^config: algorithm\.distill\.taskReward: false trains on the teacher alone, leaving the critic of estimator gae nothing to learn/,
  );
  throwsLike(
    bad("d", { model: { tokenizer: "t" }, engine: { kind: "tinker", tinker: { baseModel: "b" } } }),
    /^config: algorithm\.distill: expected object/,
  );
  throwsLike(
    bad({ teacher: "d" }, { model: { tokenizer: "t" }, engine: { kind: "tinker", tinker: { baseModel: "b" } } }),
    /^config: algorithm\.distill\.teacher: a model directory is scored by a local engine, and engine\.kind is tinker/,
  );
});
