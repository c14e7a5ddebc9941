/**
 * Asynchronous training on the local engine, with a real tiny model: the engine keeps its training
 * passes and optimizer steps apart from its decode steps (a pass waits for the sample calls in
 * flight; a sample call made during a pass waits for it), and two toy iterations with train.async
 * run end to end (versions, staleness metrics, checkpoints).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { initModel } from "../src/model/init-model.js";
import type { Datum } from "../src/engine/types.js";
import { Trainer } from "../src/train/trainer.js";
import { parseConfig } from "../src/train/load-config.js";
import { toyTask } from "./fixtures/toy-task.js";
import { toyConfig, toyEngines } from "./fixtures/train-toy.js";
import { tempDir } from "./helpers.js";

/** A datum over `tokens` that trains every position. */
function datum(tokens: number[]): Datum {
  return {
    tokens: tokens.slice(0, -1),
    targetTokens: tokens.slice(1),
    weights: tokens.slice(1).map(() => 1),
    advantages: tokens.slice(1).map(() => 1),
    logprobs: tokens.slice(1).map(() => -1),
  };
}

test("the local engine's training passes and optimizer steps never run beside a decode step", async () => {
  const dir = join(tempDir(), "tiny");
  await initModel({ preset: "tiny", out: dir, seed: 3 });
  const engine = await LocalEngine.load(dir, { workers: 0 });
  try {
    const prompt = engine.tokenizer.encode("Say a number.");
    const params = { maxTokens: 24, temperature: 1, seed: 5, stop: [] };
    const log: string[] = [];
    let tokens = 0;
    // A pass asked for while a sample is decoding starts only once the sample has finished ...
    const sampling = engine
      .sample(prompt, { ...params, onToken: () => void tokens++ })
      .then(() => log.push(`sample done after ${tokens} tokens`));
    const training = engine
      .forwardBackward([datum([...prompt, 5, 6, 7])], { type: "importance_sampling" })
      .then(() => log.push(`pass done, ${tokens} tokens sampled by then`));
    await Promise.all([sampling, training]);
    assert.deepEqual(log, ["sample done after 24 tokens", "pass done, 24 tokens sampled by then"]);
    // ... and a sample asked for during an optimizer step waits for it: it samples the new weights.
    const stepped = engine.optimStep({ lr: 0.5 });
    const after = engine.sample(prompt, params);
    const alone = await stepped.then(() => engine.sample(prompt, params));
    assert.deepEqual((await after).sequences[0].tokens, alone.sequences[0].tokens);
    assert.equal(engine.step, 1);
  } finally {
    await engine.dispose();
  }
});

test("two toy iterations with train.async on the local engine: versions, staleness and a checkpoint", async () => {
  const out = tempDir();
  const base = toyConfig(3);
  const cfg = parseConfig({
    model: { preset: "tiny" },
    engine: { workers: 0 },
    rollout: base.rollout,
    optim: { lr: 1e-2 },
    train: { ...base.train, async: { maxStaleness: 1, onStale: "wait" } },
  });
  const t = await Trainer.open(cfg, { out, task: toyTask(), engines: toyEngines() });
  await t.run();
  await t.close();
  const m = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);
  assert.deepEqual(
    m.map((x) => x.iteration),
    [1, 2, 3],
  );
  for (const x of m) {
    assert.ok(x.staleness_max <= 1, `iteration ${x.iteration}: ${x.staleness_max}`);
    assert.equal(x.stale_groups_dropped, 0);
    for (const k of ["learner_wait_s", "producer_wait_s", "iteration_s", "loss", "grad_norm"])
      assert.ok(Number.isFinite(x[k]), `${k}: ${x[k]}`);
  }
  assert.equal(m[0].policy_version, 0);
  assert.ok(existsSync(join(out, "checkpoints", "step-3", "policy", "model.safetensors")));
  const state = JSON.parse(readFileSync(join(out, "checkpoints", "step-3", "state.json"), "utf8")) as {
    cursor: { position: number };
  };
  assert.equal(state.cursor.position, 3 * 2, "the cursor counts only the batches that trained");
});
