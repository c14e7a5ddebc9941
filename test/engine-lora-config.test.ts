/** engine.lora in a recipe: Tinker's switches become PEFT's targets; what we cannot do is refused by name. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadConfig } from "../src/train/load-config.js";
import { localEngineOptions } from "../src/engine/local/factory.js";

test("engine.lora: defaults, Tinker's switches as targets, alpha defaulting to the rank", () => {
  const none = localEngineOptions(loadConfig(undefined, []).engine);
  assert.equal(none.lora, undefined);
  const d = localEngineOptions(loadConfig(undefined, ["engine.lora.rank=8"]).engine);
  assert.deepEqual(d.lora, {
    spec: {
      rank: 8,
      alpha: 8,
      dropout: 0,
      targets: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
      rslora: false,
    },
    seed: 0,
  });
  const attn = localEngineOptions(
    loadConfig(undefined, ["engine.lora.trainMlp=false", "engine.lora.alpha=64", "engine.lora.adapter=/a"]).engine,
  );
  assert.deepEqual(attn.lora?.spec.targets, ["q_proj", "k_proj", "v_proj", "o_proj"]);
  assert.equal(attn.lora?.spec.alpha, 64);
  assert.equal(attn.lora?.spec.rank, 32);
  assert.equal(attn.lora?.adapter, "/a");
  assert.equal(localEngineOptions(loadConfig(undefined, ["engine.memoryGb=6"]).engine).memoryGb, 6);
});

test("engine.lora: dropout, nothing to train, unknown keys", () => {
  const drop = localEngineOptions(loadConfig(undefined, ["engine.lora.dropout=0.05"]).engine);
  assert.equal(drop.lora?.spec.dropout, 0.05);
  assert.throws(() => loadConfig(undefined, ["engine.lora.dropout=1"]), /engine\.lora\.dropout.*must be below 1/);
  assert.throws(
    () =>
      localEngineOptions(loadConfig(undefined, ["engine.lora.trainAttn=false", "engine.lora.trainMlp=false"]).engine),
    /engine\.lora: trainAttn, trainMlp and trainUnembed are all false/,
  );
  assert.throws(() => loadConfig(undefined, ["engine.lora.targets=q_proj"]), /engine\.lora/);
  assert.throws(() => loadConfig(undefined, ["engine.memoryGb=0"]), /engine\.memoryGb/);
});
