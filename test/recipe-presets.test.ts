/** Recipe presets (src/train/presets.ts): steppo fills in what the recipe leaves unset; the recipe and overrides win. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadConfig, parseConfig } from "../src/train/load-config.js";
import { InputError } from "../src/util/errors.js";

test("preset steppo: gae-step, the gspo loss with StepPO's clips, dual clip 10, seq-mean-token-mean, k3 KL 0.001", () => {
  const c = parseConfig({ preset: "steppo" });
  assert.equal(c.algorithm.estimator, "gae-step");
  assert.deepEqual(
    [c.loss.type, c.loss.clipLow, c.loss.clipHigh, c.loss.dualClip, c.loss.aggregation],
    ["gspo", 3e-4, 4e-4, 10, "seq-mean-token-mean"],
  );
  assert.deepEqual([c.algorithm.kl.coef, c.algorithm.kl.form, c.algorithm.kl.inReward], [0.001, "k3", false]);
  // without the preset, the defaults
  const plain = parseConfig({});
  assert.deepEqual([plain.algorithm.estimator, plain.loss.type], ["grpo", "ppo"]);
});

test("preset steppo: the recipe's own values and the overrides win, key by key", () => {
  const c = parseConfig({ preset: "steppo", loss: { clipHigh: 0.01 }, algorithm: { kl: { coef: 0.05 } } });
  assert.deepEqual([c.loss.clipLow, c.loss.clipHigh, c.loss.type], [3e-4, 0.01, "gspo"]);
  assert.deepEqual([c.algorithm.kl.coef, c.algorithm.kl.form, c.algorithm.estimator], [0.05, "k3", "gae-step"]);
  const o = loadConfig(undefined, ["preset=steppo", "algorithm.estimator=gigpo"]);
  assert.deepEqual([o.algorithm.estimator, o.loss.type], ["gigpo", "gspo"]);
});

test("an unknown preset is one line naming the presets", () => {
  assert.throws(
    () => parseConfig({ preset: "stepo" }, "r.yaml"),
    (e: unknown) =>
      e instanceof InputError &&
      /^r\.yaml: preset: unknown preset "stepo"; presets: steppo$/.test((e as Error).message),
  );
});
