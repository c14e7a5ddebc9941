/**
 * LoRA on the native engine: adapters written by the test in PEFT's layout give the logits of
 * the merged model; two LoRA steps move only the adapters; a LoRA checkpoint (PEFT files plus
 * optimizer state) saves and reloads to identical adapters and identical further training; the
 * refusals say what to do instead.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { loadModelDir, writeModelDir } from "../src/model/model-dir.js";
import {
  ADAPTER_WEIGHTS_FILE,
  mergeAdapters,
  readPeftAdapter,
  writePeftAdapter,
  type LoraSpec,
} from "../src/model/peft.js";
import { readSafetensorsFile } from "../src/model/safetensors.js";
import type { Datum } from "../src/engine/types.js";
import { InputError } from "../src/util/errors.js";
import { Rng } from "../src/util/rng.js";
import { ENGINES, weights } from "./engine-internals.js";
import { randomAdapters, SMALL_LORA } from "./model-fixtures.js";

const skip = !ENGINES.includes("native") && "the native addon is not built";
let root: string, base: string, adapterDir: string, mergedDir: string;
const spec: LoraSpec = SMALL_LORA;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-lora-"));
  base = path.join(root, "base");
  await initModel({ preset: "tiny", out: base, seed: 4 });
  const m = loadModelDir(base);
  // Adapters as PEFT writes them, both non-zero so they change the model.
  const adapters = randomAdapters(m.config, spec, 17, 0.3);
  adapterDir = path.join(root, "adapter");
  writePeftAdapter(adapterDir, spec, adapters, { baseModel: base });
  mergedDir = path.join(root, "merged");
  writeModelDir(mergedDir, {
    config: m.config.raw,
    weights: mergeAdapters(m.weights, spec, adapters),
    tokenizerFrom: base,
  });
});

after(() => fs.rmSync(root, { recursive: true, force: true }));

function datums(V: number): Datum[] {
  const rng = new Rng(2);
  return [9, 14, 6].map((n, i) => {
    const t = Array.from({ length: n + 1 }, () => 3 + rng.int(V - 3));
    return {
      tokens: t.slice(0, -1),
      targetTokens: t.slice(1),
      weights: t.slice(1).map(() => 1),
      advantages: t.slice(1).map(() => (i === 1 ? -1 : 1)),
      logprobs: t.slice(1).map(() => -Math.log(V)),
    };
  });
}

const sameBits = (a: Float32Array, b: Float32Array) =>
  a.length === b.length &&
  Buffer.compare(
    Buffer.from(a.buffer, a.byteOffset, a.byteLength),
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  ) === 0;

test(
  "PEFT adapters on the native engine give the merged model's logprobs (both ways of loading them)",
  { skip },
  async () => {
    const merged = await LocalEngine.load(mergedDir, { workers: 0, backend: "tfjs" });
    const withFlag = await LocalEngine.load(base, {
      workers: 0,
      backend: "native",
      lora: { spec, adapter: adapterDir },
    });
    const direct = await LocalEngine.load(adapterDir, { workers: 0, backend: "native" });
    const plain = await LocalEngine.load(base, { workers: 0, backend: "native" });
    try {
      const seqs = datums(merged.config.vocabSize).map((d) => [...d.tokens, d.targetTokens.at(-1)!]);
      const want = await merged.computeLogprobs(seqs);
      const without = await plain.computeLogprobs(seqs);
      let moved = 0;
      for (const e of [withFlag, direct]) {
        const got = await e.computeLogprobs(seqs);
        got.forEach((row, i) =>
          row.forEach((x, j) => {
            if (x === null) return;
            assert.ok(Math.abs(x - want[i][j]!) < 1e-4, `sequence ${i} token ${j}: ${x} vs merged ${want[i][j]}`);
            moved = Math.max(moved, Math.abs(x - without[i][j]!));
          }),
        );
      }
      assert.ok(moved > 0.05, `the adapters barely change the model (${moved})`);
      // sampling applies them too: a greedy continuation equals the merged model's
      const prompt = seqs[0].slice(0, 5);
      const g = await direct.sample(prompt, { maxTokens: 8, temperature: 0, stop: [] });
      const gm = await merged.sample(prompt, { maxTokens: 8, temperature: 0, stop: [] });
      assert.deepEqual(g.sequences[0].tokens, gm.sequences[0].tokens);
    } finally {
      for (const e of [merged, withFlag, direct, plain]) await e.dispose();
    }
  },
);

test(
  "two LoRA steps move only the adapters; save and reload give identical adapters, moments and training",
  { skip },
  async () => {
    const a = await LocalEngine.load(adapterDir, { workers: 0, backend: "native" });
    let b: LocalEngine | undefined;
    try {
      const data = datums(a.config.vocabSize);
      const baseBefore = weights(a);
      const adaptersBefore = a.nativeTrainable.model.loraAdapters();
      const adam = { lr: 1e-2, weightDecay: 0.01 };
      for (let i = 0; i < 2; i++) {
        await a.forwardBackward(data, { type: "ppo" });
        const r = await a.optimStep(adam);
        assert.equal(r.skipped, false);
      }
      // the base is frozen: bit for bit; the adapters moved (B and A both)
      for (const [name, t] of weights(a)) assert.ok(sameBits(t.data, baseBefore.get(name)!.data), `${name} changed`);
      const after = a.nativeTrainable.model.loraAdapters();
      for (const [mod, ad] of after) {
        assert.ok(!sameBits(ad.a, adaptersBefore.get(mod)!.a), `${mod} A did not move`);
        assert.ok(!sameBits(ad.b, adaptersBefore.get(mod)!.b), `${mod} B did not move`);
      }
      // a LoRA checkpoint: PEFT's files (no base weights), read back by the PEFT reader
      const dir = path.join(root, "ckpt");
      await a.save(dir);
      assert.ok(!fs.existsSync(path.join(dir, "model.safetensors")));
      const names = [...readSafetensorsFile(path.join(dir, ADAPTER_WEIGHTS_FILE)).tensors.keys()];
      assert.ok(names.includes("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"), names.join(", "));
      const peft = readPeftAdapter(dir, a.config);
      assert.deepEqual(peft.spec, spec);
      b = await LocalEngine.load(dir, { workers: 0, backend: "native" });
      assert.equal(b.step, 2);
      const reloaded = b.nativeTrainable.model.loraAdapters();
      for (const [mod, ad] of after) {
        assert.ok(
          sameBits(ad.a, reloaded.get(mod)!.a) && sameBits(ad.b, reloaded.get(mod)!.b),
          `${mod} differs after reload`,
        );
        assert.ok(sameBits(ad.a, peft.adapters.get(mod)!.a), `${mod}: the PEFT reader disagrees`);
      }
      const ma = a.nativeTrainable.optimizerState(),
        mb = b.nativeTrainable.optimizerState();
      assert.deepEqual([...ma.keys()].sort(), [...mb.keys()].sort());
      assert.ok(ma.size > 0 && [...ma.keys()].every((k) => /lora_[AB]$/.test(k)), "only the adapters have moments");
      for (const [k, t] of ma) assert.ok(sameBits(t.data, mb.get(k)!.data), `moment ${k} differs`);
      const again = b;
      for (let i = 0; i < 2; i++) {
        const la = await a.forwardBackward(data, { type: "ppo" });
        const lb = await again.forwardBackward(data, { type: "ppo" });
        assert.equal(la.metrics.loss, lb.metrics.loss);
        await a.optimStep(adam);
        await again.optimStep(adam);
      }
    } finally {
      await a.dispose();
      await b?.dispose();
    }
  },
);

test("new adapters (engine.lora) start as the base model: B is zero", { skip }, async () => {
  const plain = await LocalEngine.load(base, { workers: 0, backend: "native" });
  const fresh = await LocalEngine.load(base, { workers: 0, backend: "native", lora: { spec, seed: 3 } });
  try {
    const seqs = datums(plain.config.vocabSize).map((d) => d.tokens);
    const [x, y] = [await plain.computeLogprobs(seqs), await fresh.computeLogprobs(seqs)];
    assert.deepEqual(x, y);
    assert.equal(
      fresh.nativeTrainable.size,
      [...fresh.nativeTrainable.model.adapters.values()].reduce((n, a) => n + a.a.length + a.b.length, 0),
    );
  } finally {
    await plain.dispose();
    await fresh.dispose();
  }
});

test("refusals: LoRA on the TF.js engine, and adapters that disagree with engine.lora", { skip }, async () => {
  await assert.rejects(
    () => LocalEngine.load(base, { workers: 0, backend: "tfjs", lora: { spec } }),
    (e: unknown) => e instanceof InputError && /engine\.lora needs the native engine/.test((e as Error).message),
  );
  await assert.rejects(
    () => LocalEngine.load(adapterDir, { workers: 0, backend: "tfjs" }),
    (e: unknown) =>
      e instanceof InputError && /holds LoRA adapters, which only the native engine runs/.test((e as Error).message),
  );
  await assert.rejects(
    () => LocalEngine.load(adapterDir, { workers: 0, backend: "native", lora: { spec: { ...spec, rank: 8 } } }),
    (e: unknown) =>
      e instanceof InputError &&
      /its LoRA adapters \(rank 4, .*\) differ from engine\.lora \(rank 8/.test((e as Error).message),
  );
});
