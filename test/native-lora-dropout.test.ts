/**
 * LoRA dropout on the native decoder (engine.lora.dropout, PEFT's lora_dropout): a training pass
 * feeds each adapter x ⊙ keep / (1 - p) with a mask drawn from the pass's seed; scoring passes
 * never drop. The same seed draws the same masks (so the backward, which redraws them, is the
 * gradient of that forward: checked against central finite differences of it), another seed other
 * masks.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseModelConfig, presetConfigJson, type ModelConfig } from "../src/model/config.js";
import { randomHostWeights } from "../src/model/parameter-shapes.js";
import type { LoraSpec } from "../src/model/peft.js";
import { NativeDecoder } from "../src/engine/local/native/decoder.js";
import { Rng } from "../src/util/rng.js";
import { ENGINES } from "./engine-internals.js";
import { randomAdapters } from "./model-fixtures.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
const SEQS = [
  [3, 17, 5, 40, 22, 9, 11],
  [8, 1, 60, 33, 7],
];
const targets = Int32Array.from(SEQS.flatMap((s) => [...s.slice(1), 4]));

function setup(dropout: number) {
  const c: ModelConfig = parseModelConfig(presetConfigJson("tiny", 61));
  const spec: LoraSpec = {
    rank: 4,
    alpha: 8,
    dropout,
    targets: ["q_proj", "v_proj", "gate_proj", "down_proj"],
    rslora: false,
  };
  const adapters = randomAdapters(c, spec, 5, 0.5);
  return NativeDecoder.fromWeights(c, randomHostWeights(c, 9, "lm"), "(test)", { lora: { spec, adapters } });
}

function logp(nat: NativeDecoder, train: boolean, seed = 0): Float32Array {
  const p = nat.forward(SEQS, train, seed);
  try {
    return p.logprobs(targets, 1).logp;
  } finally {
    p.free();
  }
}

test(
  "LoRA dropout: scoring never drops; a training pass drops by its seed, the same seed the same masks",
  { skip },
  () => {
    const none = setup(0),
      half = setup(0.5);
    assert.deepEqual(logp(half, false), logp(none, false), "a scoring pass is the model without dropout");
    assert.deepEqual(logp(none, true, 3), logp(none, false), "p = 0: a training pass drops nothing");
    const a = logp(half, true, 3);
    assert.deepEqual(logp(half, true, 3), a, "the same seed, the same masks");
    assert.notDeepEqual(logp(half, true, 4), a, "another seed, other masks");
    assert.notDeepEqual(a, logp(half, false), "p = 0.5 changes a training pass");
  },
);

test("LoRA dropout: the backward is the gradient of the dropped forward (central finite differences)", { skip }, () => {
  const nat = setup(0.3);
  const rng = new Rng(8);
  const coef = Float32Array.from({ length: targets.length }, () => rng.normal());
  const seed = 11;
  const lossAt = () => {
    const lp = logp(nat, true, seed);
    let s = 0;
    for (let i = 0; i < lp.length; i++) s += coef[i] * lp[i];
    return s;
  };
  nat.zeroGrad();
  const pass = nat.forward(SEQS, true, seed);
  pass.logprobs(targets, 1);
  pass.backward(coef);
  pass.free();
  const tensors = new Map(nat.trainedTensors().map((t) => [t.name, t]));
  // A of adapters in both layers (their gradients also cross the later layers' dropped adapters), and B
  const probes: [string, number][] = [
    ["model.layers.0.self_attn.q_proj.lora_A", 7],
    ["model.layers.0.mlp.gate_proj.lora_A", 100],
    ["model.layers.0.mlp.down_proj.lora_A", 300],
    ["model.layers.1.self_attn.v_proj.lora_A", 33],
    ["model.layers.1.mlp.down_proj.lora_B", 21],
  ];
  for (const [name, i] of probes) {
    const t = tensors.get(name);
    assert.ok(t, `${name} trains`);
    const x0 = t.data[i],
      eps = 1e-2;
    t.data[i] = x0 + eps;
    const up = lossAt();
    t.data[i] = x0 - eps;
    const down = lossAt();
    t.data[i] = x0;
    const fd = (up - down) / (2 * eps),
      an = t.grad[i];
    assert.ok(
      Math.abs(fd - an) <= 2e-2 * Math.max(1e-2, Math.abs(an)),
      `${name}[${i}]: finite difference ${fd}, backward ${an}`,
    );
  }
});
