/**
 * The critic of a LoRA run on the native engine: a value head and its own adapters over the
 * policy's base weights, which it shares (the same arrays, never a copy, never changed). Its
 * gradient agrees with finite differences; it learns the returns; it saves as adapters plus
 * value_head.safetensors and reloads to the same values and moments; a saved LoRA critic needs a
 * LoRA policy on its base.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { initAdapters, type LoraSpec } from "../src/model/peft.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { NativeDecoder } from "../src/engine/local/native/decoder.js";
import { criticSpec } from "../src/engine/local/native/native-backend.js";
import type { ValueDatum } from "../src/engine/types.js";
import { InputError } from "../src/util/errors.js";
import { Rng } from "../src/util/rng.js";
import { tempDir } from "./helpers.js";
import { SMALL_LORA } from "./model-fixtures.js";
import { ENGINES } from "./engine-internals.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
let root: string, base: string;
const spec: LoraSpec = SMALL_LORA;

before(async () => {
  root = tempDir("agent-r1-lora-critic-");
  base = path.join(root, "base");
  await initModel({ preset: "tiny", out: base, seed: 8 });
});

after(() => fs.rmSync(root, { recursive: true, force: true }));

const SEQS = [
  [5, 90, 17, 300, 44, 8, 1021, 9],
  [12, 600, 3, 3, 250],
];

/** Datums whose returns are 0.5 on the first sequence and -0.25 on the second, every position weighted. */
const valueData = (): ValueDatum[] =>
  SEQS.map((s, i) => ({ tokens: s, weights: s.map(() => 1), returns: s.map(() => (i === 0 ? 0.5 : -0.25)) }));

const snapshot = (d: NativeDecoder) => new Map([...d.params].map(([n, p]) => [n, p.data.slice()]));

test("the critic's spec drops lm_head: a value model has no LM head", () => {
  assert.deepEqual(criticSpec({ ...spec, targets: [...spec.targets, "lm_head"] }).targets, spec.targets);
});

test(
  "a LoRA run's critic shares the policy's base arrays; only its adapters and value head train",
  { skip },
  async () => {
    const e = await LocalEngine.load(base, { workers: 0, backend: "native", lora: { spec, seed: 1 } });
    try {
      const critic = await e.createCritic();
      const ct = e.nativeCriticTrainable!;
      const policy = e.nativeTrainable.model;
      assert.equal(ct.model.head, "value");
      assert.equal(ct.model.mode, "lora");
      for (const [name, p] of ct.model.params)
        if (name !== "score.weight") assert.equal(p.data, policy.params.get(name)!.data, `${name} is not shared`);
      const trained = ct.model.trainedTensors().map((t) => t.name);
      assert.ok(trained.includes("score.weight"));
      assert.equal(trained.filter((n) => /lora_[AB]$/.test(n)).length, 2 * 7 * e.config.numLayers);
      assert.equal(trained.length, 2 * 7 * e.config.numLayers + 1, trained.join(", "));
      // a zero value head: every value starts at 0
      for (const row of await critic.values(SEQS)) for (const v of row) assert.equal(v, 0);
      const before = snapshot(policy);
      const first = await critic.forwardBackward(valueData());
      for (let i = 0; i < 30; i++) {
        await critic.optimStep({ lr: 2e-2 });
        await critic.forwardBackward(valueData());
      }
      const last = await critic.forwardBackward(valueData());
      assert.ok(last.metrics.loss < 0.2 * first.metrics.loss, `loss ${first.metrics.loss} -> ${last.metrics.loss}`);
      const v = await critic.values(SEQS);
      assert.ok(v[0].at(-1)! > 0.3 && v[1].at(-1)! < -0.1, `values ${v[0].at(-1)}, ${v[1].at(-1)}`);
      for (const [name, data] of before)
        assert.ok(
          Buffer.from(data.buffer).equals(Buffer.from(policy.params.get(name)!.data.buffer)),
          `${name} changed`,
        );
    } finally {
      await e.dispose();
    }
  },
);

test("the LoRA critic's gradient agrees with finite differences of its values", { skip }, async () => {
  const e = await LocalEngine.load(base, { workers: 0, backend: "native", lora: { spec, seed: 1 } });
  try {
    const policy = e.nativeTrainable.model;
    // adapters with non-zero B, and a non-zero value head, so every path carries a gradient
    const adapters = initAdapters(policy.config, spec, 5);
    const rng = new Rng(4);
    for (const ad of adapters.values()) for (let i = 0; i < ad.b.length; i++) ad.b[i] = 0.2 * rng.normal();
    const score = Float32Array.from({ length: policy.config.hiddenSize }, () => rng.normal());
    const d = NativeDecoder.valueSharingBase(policy, { spec, adapters }, "(test)", score);
    const coef = Float32Array.from({ length: SEQS.flat().length }, () => rng.normal());
    const lossAt = () => {
      const p = d.forward(SEQS, false);
      const v = p.values();
      p.free();
      return v.reduce((s, x, i) => s + coef[i] * x, 0);
    };
    const pass = d.forward(SEQS, true);
    pass.values();
    pass.backwardValues(coef);
    pass.free();
    const probes: [string, number][] = [
      ["model.layers.0.self_attn.q_proj.lora_A", 3],
      ["model.layers.1.mlp.down_proj.lora_B", 40],
      ["model.layers.0.self_attn.v_proj.lora_B", 7],
      ["score.weight", 11],
    ];
    const tensors = new Map(d.trainedTensors().map((t) => [t.name, t]));
    for (const [name, i] of probes) {
      const t = tensors.get(name)!;
      const x0 = t.data[i],
        eps = 1e-2;
      t.data[i] = x0 + eps;
      const up = lossAt();
      t.data[i] = x0 - eps;
      const down = lossAt();
      t.data[i] = x0;
      const fd = (up - down) / (2 * eps);
      assert.ok(
        Math.abs(fd - t.grad[i]) <= 2e-2 * Math.max(1e-2, Math.abs(t.grad[i])),
        `${name}[${i}]: finite difference ${fd}, backward ${t.grad[i]}`,
      );
    }
  } finally {
    await e.dispose();
  }
});

test(
  "a LoRA critic saves as adapters plus its value head and reloads to the same values and moments",
  { skip },
  async () => {
    const a = await LocalEngine.load(base, { workers: 0, backend: "native", lora: { spec, seed: 1 } });
    const b = await LocalEngine.load(base, { workers: 0, backend: "native", lora: { spec, seed: 1 } });
    const plain = await LocalEngine.load(base, { workers: 0, backend: "native" });
    try {
      const critic = await a.createCritic();
      for (let i = 0; i < 3; i++) {
        await critic.forwardBackward(valueData());
        await critic.optimStep({ lr: 2e-2 });
      }
      const dir = path.join(root, "critic");
      await critic.save(dir);
      const files = fs.readdirSync(dir);
      for (const f of ["adapter_config.json", "adapter_model.safetensors", "value_head.safetensors"])
        assert.ok(files.includes(f), `${f} missing from ${files.join(", ")}`);
      assert.ok(!files.includes("model.safetensors"), "the base weights are not copied");
      const again = await b.createCritic();
      await again.load(dir);
      assert.deepEqual(await again.values(SEQS), await critic.values(SEQS));
      const ma = a.nativeCriticTrainable!.optimizerState(),
        mb = b.nativeCriticTrainable!.optimizerState();
      assert.deepEqual([...ma.keys()].sort(), [...mb.keys()].sort());
      for (const [k, t] of ma) assert.deepEqual(t.data, mb.get(k)!.data, k);
      // the next step is the same on both
      const la = await critic.forwardBackward(valueData()),
        lb = await again.forwardBackward(valueData());
      assert.equal(la.metrics.loss, lb.metrics.loss);
      // a saved LoRA critic shares a LoRA policy's base; a full-weight policy cannot host it
      const c = await plain.createCritic();
      await assert.rejects(
        () => c.load(dir),
        (e: unknown) =>
          e instanceof InputError && /holds LoRA adapters over .*not a LoRA policy/.test((e as Error).message),
      );
    } finally {
      for (const e of [a, b, plain]) await e.dispose();
    }
  },
);
