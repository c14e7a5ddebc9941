/**
 * What comes from outside into the native engine, at its worst: the addon's functions handed
 * handles of the wrong kind, freed passes and values that are no handles at all (each a
 * TypeError / Error naming the argument, never a crash); weights, adapters, adapter scales and
 * optimizer settings that are not finite or out of range (refused by name before they are used);
 * and logits with NaN or +Infinity (an error naming the row or the sequence, never token 0 with
 * logprob 0), in the addon's draw, the JavaScript draw and the scheduler around both.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { initModel } from "../src/model/init-model.js";
import { parseModelConfig, presetConfigJson } from "../src/model/config.js";
import { readModelConfig } from "../src/model/model-dir.js";
import { randomHostWeights } from "../src/model/parameter-shapes.js";
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, writePeftAdapter, type LoraSpec } from "../src/model/peft.js";
import { readSafetensorsFile, writeSafetensorsFile, type DType, type HostTensor } from "../src/model/safetensors.js";
import { NativeDecoder } from "../src/engine/local/native/decoder.js";
import { modelAddon, type ModelAddon, type NativeHandle } from "../src/engine/local/native/model-addon.js";
import { loadAddon, type Addon } from "../src/engine/local/addon.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { Scheduler } from "../src/engine/local/scheduler.js";
import type { DecodeBatch, DecodeCompute } from "../src/engine/local/decode-compute.js";
import { NonFiniteLogitsError, drawToken } from "../src/engine/sampling.js";
import { checkAdamParams } from "../src/engine/optim-params.js";
import type { AdamParams, Datum } from "../src/engine/types.js";
import type { Tokenizer } from "../src/model/tokenizer.js";
import { runCli } from "../src/cli/main.js";
import { Rng } from "../src/util/rng.js";
import { captureIO, tempDir } from "./helpers.js";
import { randomAdapters } from "./model-fixtures.js";
import { native } from "./native-helpers.js";

let root: string, modelDir: string;

/** `s` as a regular expression matching it literally. */
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

before(async () => {
  root = tempDir("agent-r1-native-hostile-");
  modelDir = join(root, "model");
  await initModel({ preset: "tiny", out: modelDir, seed: 5 });
});

after(() => rmSync(root, { recursive: true, force: true }));

function addonOrFail(): Addon {
  const st = loadAddon();
  assert.ok(st.ok, `the native addon did not load: ${st.ok ? "" : st.reason}`);
  return st.addon;
}

// ---------------------------------------------------------------------------------------------
// Handles

test(
  "every addon function that takes a handle refuses one of the wrong kind, a freed pass, {} and 42 by argument, and the process goes on",
  native,
  () => {
    const config = parseModelConfig(presetConfigJson("tiny", 64), "(tiny)");
    const decoder = NativeDecoder.fromWeights(config, randomHostWeights(config, 1), "(random)");
    const a = modelAddon() as unknown as Record<keyof ModelAddon, (...args: unknown[]) => unknown>;
    const model = (decoder as unknown as { handle: NativeHandle }).handle;
    const tokens = Int32Array.of(1, 2, 3),
      lens = Int32Array.of(3);
    const pass = a.modelPass(model, tokens, lens, false);
    const f = (n: number) => new Float32Array(n);
    // each function with its arguments after the handle
    const takesModel: [string, unknown[]][] = [
      ["modelPassBytes", [3, 1, false]],
      ["modelPass", [tokens, lens, false]],
    ];
    const takesPass: [string, unknown[]][] = [
      ["passLogprobs", [Int32Array.of(1, 2, 3), 1, f(3), f(3)]],
      ["passLogits", [Int32Array.of(0), f(64)]],
      ["passValues", [f(3)]],
      ["passBackward", [f(3)]],
      ["passBackwardValues", [f(3)]],
      ["passFree", []],
    ];
    const strangers: [unknown, string][] = [
      [{}, "an object"],
      [42, "a number"],
      [null, "null"],
      [undefined, "undefined"],
      ["model", "a string"],
      [new Float32Array(4), "an object"],
    ];
    let refused = 0;
    for (const [fns, want, wrong] of [
      [takesModel, "a model handle", [pass, "a pass handle"]],
      [takesPass, "a pass handle", [model, "a model handle"]],
    ] as const) {
      for (const [fn, rest] of fns) {
        for (const [value, words] of [wrong, ...strangers]) {
          assert.throws(() => a[fn as keyof ModelAddon](value, ...rest), {
            name: "TypeError",
            message: `${fn}: argument 1 must be ${want}, got ${words}`,
          });
          refused++;
        }
      }
    }
    assert.equal(refused, 8 * 7);
    // A freed pass: an Error for every use; freeing it again does nothing.
    a.passFree(pass);
    a.passFree(pass);
    for (const [fn, rest] of takesPass.filter(([fn]) => fn !== "passFree"))
      assert.throws(() => a[fn as keyof ModelAddon](pass, ...rest), {
        name: "Error",
        message: `${fn}: the pass was already freed (passFree)`,
      });
    // The model is unharmed: a new pass computes finite logits.
    const again = decoder.forward([[1, 2, 3]], false);
    const logits = again.logits(Int32Array.of(2), 64);
    again.free();
    assert.ok(logits.every(Number.isFinite) && logits.some((x) => x !== 0));
  },
);

// ---------------------------------------------------------------------------------------------
// Draws

/** Rows of 16 logits: a finite one, and four that nothing can be drawn from (with what the error says). */
function hostileRows(): { good: Float32Array; bad: [Float32Array, RegExp][] } {
  const rng = new Rng(7);
  const good = Float32Array.from({ length: 16 }, () => rng.normal());
  const allNaN = new Float32Array(16).fill(NaN);
  const plusInf = good.slice();
  plusInf[3] = Infinity;
  const oneNaN = good.slice();
  oneNaN[7] = NaN;
  const noFinite = new Float32Array(16).fill(-Infinity);
  return {
    good,
    bad: [
      [allNaN, /NaN at token 0/],
      [plusInf, /\+Infinity at token 3/],
      [oneNaN, /NaN at token 7/],
      [noFinite, /no finite value/],
    ],
  };
}

test(
  "drawTokens: a row with NaN, +Infinity or no finite logit is an Error naming the row, never token 0 with logprob 0",
  native,
  () => {
    const addon = addonOrFail();
    const { good, bad } = hostileRows();
    for (const [row, reason] of bad) {
      const tokens = new Int32Array(3),
        logprobs = new Float64Array(3);
      assert.throws(
        () =>
          addon.drawTokens(
            [good, good, row],
            Float64Array.of(1, 1, 1),
            Float64Array.of(0.5, 0.5, 0.5),
            tokens,
            logprobs,
          ),
        (e: Error & { row?: number; reason?: string }) => {
          assert.match(e.message, /^drawTokens: logits\[2\]: /);
          assert.match(e.message, reason);
          assert.equal(e.row, 2);
          assert.match(e.reason!, reason);
          return true;
        },
      );
      // at a tiny temperature (the greedy branch) too
      assert.throws(
        () =>
          addon.drawTokens([row], Float64Array.of(1e-40), Float64Array.of(0.5), new Int32Array(1), new Float64Array(1)),
        { message: /^drawTokens: logits\[0\]: / },
      );
    }
    // an infinite temperature is refused as an argument, naming the row
    assert.throws(
      () =>
        addon.drawTokens(
          [good, good],
          Float64Array.of(1, Infinity),
          Float64Array.of(0.5, 0.5),
          new Int32Array(2),
          new Float64Array(2),
        ),
      { name: "RangeError", message: /^drawTokens: temperatures must be > 0 and finite, .*\(row 1: temperature inf/ },
    );
    // -Infinity beside finite logits is a token that cannot be drawn, not an error
    const masked = good.slice();
    masked.fill(-Infinity, 0, 8);
    const tokens = new Int32Array(1),
      logprobs = new Float64Array(1);
    addon.drawTokens([masked], Float64Array.of(1), Float64Array.of(0.3), tokens, logprobs);
    assert.ok(tokens[0] >= 8 && logprobs[0] < 0 && Number.isFinite(logprobs[0]));
  },
);

test("drawToken: NaN, +Infinity or no finite logit is a NonFiniteLogitsError naming the logits, greedy, untruncated and truncated alike", () => {
  const { good, bad } = hostileRows();
  const params = [
    { temperature: 0, topK: 0, topP: 1 },
    { temperature: 1, topK: 0, topP: 1 },
    { temperature: 0.7, topK: 4, topP: 0.9 },
  ];
  for (const [row, reason] of bad)
    for (const p of params) {
      assert.throws(
        () => drawToken(row, p, new Rng(1), "row 5"),
        (e: Error) => {
          assert.ok(e instanceof NonFiniteLogitsError);
          assert.match(e.message, /^row 5: /);
          assert.match(e.message, reason);
          return true;
        },
      );
      assert.throws(() => drawToken(Array.from(row), p, new Rng(1)), { message: /^logits: / });
    }
  const masked = good.slice();
  masked.fill(-Infinity, 0, 8);
  for (const p of params) {
    const d = drawToken(masked, p, new Rng(2));
    assert.ok(d.token >= 8 && d.logprob <= 0 && Number.isFinite(d.logprob));
  }
});

/**
 * A decode backend over a vocabulary of 8 whose logits follow the last token: after a token
 * below 4, finite logits on tokens 0-3 (-Infinity on the rest); after 4 or more, NaN at token 3.
 */
class PoisonCompute implements DecodeCompute<number[]> {
  readonly vocabSize = 8;
  readonly maxPositions = 64;
  readonly kvBytesPerToken = 1;
  drawUntruncated?: DecodeCompute<number[]>["drawUntruncated"];

  constructor(addon?: Addon) {
    if (addon)
      this.drawUntruncated = (logits, t, u) => {
        const tokens = new Int32Array(logits.length),
          logprobs = new Float64Array(logits.length);
        addon.drawTokens(logits, Float64Array.from(t), Float64Array.from(u), tokens, logprobs);
        return Array.from(tokens, (token, i) => ({ token, logprob: logprobs[i] }));
      };
  }
  static logits(last: number): Float32Array {
    const out = Float32Array.of(0.5, 1, 0.2, 0.8, -Infinity, -Infinity, -Infinity, -Infinity);
    if (last >= 4) out[3] = NaN;
    return out;
  }
  length = (kv: number[]) => kv.length;
  prefix = (kv: number[], len: number) => kv.slice(0, len);
  dispose(): void {}
  tensors = () => 0;
  prefill(suffix: number[], past: number[] | undefined) {
    const kv = [...(past ?? []), ...suffix];
    return { logits: PoisonCompute.logits(kv[kv.length - 1]), kv };
  }
  newBatch(): DecodeBatch<number[]> {
    let rows: number[][] = [];
    return {
      get size() {
        return rows.length;
      },
      add: (kv, n) => {
        for (let i = 0; i < n; i++) rows.push(kv.slice());
      },
      keep: (keep) => {
        rows = keep.map((r) => rows[r]);
      },
      row: (r, len) => rows[r].slice(0, len),
      step: (tokens, lengths) => {
        const out = new Float32Array(tokens.length * 8);
        tokens.forEach((t, r) => {
          rows[r] = [...rows[r].slice(0, lengths[r]), t];
          out.set(PoisonCompute.logits(t), r * 8);
        });
        return out;
      },
      tensorCount: () => 0,
      dispose: () => {
        rows = [];
      },
    };
  }
}

test("the scheduler: a request whose logits are not finite fails naming its sequence, and the request beside it finishes (JavaScript draw and the addon's)", async () => {
  const draws: [string, Addon | undefined][] = [["JavaScript", undefined]];
  const st = loadAddon();
  if (st.ok) draws.push(["addon", st.addon]);
  for (const [name, addon] of draws) {
    const tokenizer = { eosTokenId: undefined } as unknown as Tokenizer;
    const s = new Scheduler(new PoisonCompute(addon), tokenizer, { prefixCacheBytes: 0 });
    const fine = s.submit([1, 2], { n: 2, maxTokens: 6, temperature: 1, seed: 3 });
    const poisoned = s.submit([1, 6], { n: 2, maxTokens: 6, temperature: 1, seed: 3 });
    const greedy = s.submit([5], { maxTokens: 6, temperature: 0 });
    await assert.rejects(poisoned, (e: Error) => {
      assert.ok(e instanceof NonFiniteLogitsError, `${name}: ${e}`);
      assert.equal(
        e.message,
        "sample: sequence 0: NaN at token 3; no token can be drawn from logits that are not finite",
      );
      return true;
    });
    await assert.rejects(greedy, { message: /^sample: sequence 0: NaN at token 3;/ });
    const ok = await fine;
    assert.equal(ok.sequences.length, 2, name);
    for (const seq of ok.sequences) {
      assert.equal(seq.tokens.length, 6, name);
      assert.ok(seq.tokens.every((t) => t >= 0 && t < 4) && seq.logprobs.every((l) => l < 0 && l > -Infinity), name);
    }
    // and the scheduler serves the next request
    assert.equal((await s.submit([2], { maxTokens: 3, seed: 1 })).sequences[0].tokens.length, 3, name);
  }
});

test(
  "native engine: a weight turned NaN fails the sample naming the sequence, and the engine samples again once it is restored",
  native,
  async () => {
    const e = await LocalEngine.load(modelDir, { workers: 0, backend: "native" });
    try {
      const norm = e.nativeTrainable.model.params.get("model.norm.weight")!.data as Float32Array;
      const saved = norm[0];
      norm[0] = NaN; // the addon's model reads the array in place
      await assert.rejects(e.sample([5, 6, 7], { maxTokens: 4, seed: 1 }), {
        message: /^sample: sequence 0: NaN at token 0; no token can be drawn/,
      });
      await assert.rejects(e.sample([5, 6, 7], { maxTokens: 4, temperature: 0 }), {
        message: /^sample: sequence 0: NaN/,
      });
      norm[0] = saved;
      const r = await e.sample([5, 6, 7], { maxTokens: 4, seed: 1 });
      assert.equal(r.sequences[0].tokens.length, 4);
      assert.ok(r.sequences[0].logprobs.every((l) => Number.isFinite(l) && l <= 0));
    } finally {
      await e.dispose();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// Weights and adapters at load

/** A copy of the tiny model with its weights written as `dtype`, `value` put at element 5 of `tensor`. */
function poisonedModel(name: string, tensor: string, value: number, dtype: DType): string {
  const dir = join(root, name);
  cpSync(modelDir, dir, { recursive: true });
  const file = join(dir, "model.safetensors");
  const { tensors } = readSafetensorsFile(file);
  const t = tensors.get(tensor)!;
  t.data[5] = value;
  writeSafetensorsFile(file, tensors, { dtype, metadata: { format: "pt" } });
  return dir;
}

test(
  "native engine: weights holding NaN or ±Infinity (f32, bf16, f16) are refused at load, naming the file and the tensor",
  native,
  async () => {
    const cases: [string, number, DType, string][] = [
      ["model.layers.1.mlp.up_proj.weight", NaN, "F32", "NaN"],
      ["model.norm.weight", Infinity, "BF16", "\\+Infinity"],
      ["model.layers.0.self_attn.q_proj.bias", -Infinity, "F16", "-Infinity"],
      ["model.embed_tokens.weight", NaN, "BF16", "NaN"],
    ];
    for (const [i, [tensor, value, dtype, words]] of cases.entries()) {
      const dir = poisonedModel(`nan-weights-${i}`, tensor, value, dtype);
      const message = new RegExp(
        `^${escape(join(dir, "model.safetensors"))} \\(${tensor.replace(/\./g, "\\.")}\\): holds ${words} at element 5 of \\d+; a model's weights must be finite numbers$`,
      );
      await assert.rejects(LocalEngine.load(dir, { workers: 0, backend: "native" }), {
        name: "ModelFormatError",
        message,
      });
    }
  },
);

const spec: LoraSpec = { rank: 4, alpha: 8, dropout: 0, targets: ["q_proj", "v_proj"], rslora: false };

/** A PEFT adapter on the tiny model (or `base`), with `edit` applied to its adapter_config.json. */
function adapterDir(name: string, edit: (c: Record<string, unknown>) => void = () => {}, base = modelDir): string {
  const dir = join(root, name);
  const config = readModelConfig(base);
  writePeftAdapter(dir, spec, randomAdapters(config, spec, 9, 0.1), { baseModel: base, config });
  const file = join(dir, ADAPTER_CONFIG_FILE);
  const json = JSON.parse(readFileSync(file, "utf8"));
  edit(json);
  writeFileSync(file, JSON.stringify(json));
  return dir;
}

test(
  "native engine: lora_alpha 1e308 (the scale alpha / r overflows float32) or an adapter holding NaN is refused at load, naming the file and the field",
  native,
  async () => {
    for (const [alpha, rslora] of [
      [1e308, false],
      [1e5, false],
      [1e6, true],
    ] as const) {
      const dir = adapterDir(`alpha-${alpha}-${rslora}`, (c) => {
        c.lora_alpha = alpha;
        c.use_rslora = rslora;
      });
      await assert.rejects(LocalEngine.load(dir, { workers: 0, backend: "native" }), {
        name: "ModelFormatError",
        message: new RegExp(
          `^${escape(join(dir, ADAPTER_CONFIG_FILE))} \\(lora_alpha\\): .* gives an adapter scale \\(lora_alpha / ${rslora ? "sqrt\\(r\\)" : "r"} with r = 4\\) of .*, outside \\[-10000, 10000\\]$`,
        ),
      });
    }
    // an adapter tensor with NaN
    const dir = adapterDir("nan-adapter");
    const file = join(dir, ADAPTER_WEIGHTS_FILE);
    const { tensors } = readSafetensorsFile(file);
    const name = "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight";
    tensors.get(name)!.data[2] = NaN;
    writeSafetensorsFile(file, tensors, { metadata: { format: "pt" } });
    await assert.rejects(LocalEngine.load(dir, { workers: 0, backend: "native" }), {
      message: `${file} (${name}): holds NaN at element 2 of 128; a model's weights must be finite numbers`,
    });
    // and writing adapters with such a scale is refused before anything is written
    const out = join(root, "never-written");
    assert.throws(
      () =>
        writePeftAdapter(out, { ...spec, alpha: 1e308 }, randomAdapters(readModelConfig(modelDir), spec, 9, 0.1), {
          baseModel: modelDir,
        }),
      { message: /\(lora_alpha\): 1e\+308 gives an adapter scale/ },
    );
    assert.ok(!existsSync(out));
  },
);

/** Runs `agent-r1 export --out OUT ARGS`, expecting exit 1, one line, and nothing at `out` (nor a temporary sibling). */
async function exportFails(out: string, ...args: string[]): Promise<string> {
  const io = captureIO();
  assert.equal(await runCli(["export", "--out", out, ...args], io), 1, io.stdout.join("\n"));
  assert.equal(io.stderr.length, 1, io.stderr.join("\n"));
  assert.ok(!io.stderr[0].includes("\n"), io.stderr[0]);
  assert.ok(!existsSync(out), `${out} was written`);
  assert.deepEqual(
    readdirSync(dirname(out)).filter((f) => f.includes(".tmp")),
    [],
  );
  return io.stderr[0];
}

test("export --merge refuses lora_alpha 1e308, NaN base weights, and adapters whose merged product overflows float32: exit 1, one line, nothing written", async () => {
  const huge = adapterDir("export-huge-alpha", (c) => (c.lora_alpha = 1e308));
  assert.match(
    await exportFails(join(root, "out-alpha"), "--checkpoint", huge, "--merge"),
    /^error: .*adapter_config\.json \(lora_alpha\): 1e\+308 gives an adapter scale/,
  );
  const nanBase = poisonedModel("export-nan-base", "model.layers.0.mlp.down_proj.weight", NaN, "F32");
  const onNaN = adapterDir("export-nan-base-adapter", undefined, nanBase);
  assert.match(
    await exportFails(join(root, "out-nan-base"), "--checkpoint", onNaN, "--merge"),
    /^error: .*model\.safetensors \(model\.layers\.0\.mlp\.down_proj\.weight\): holds NaN at element 5/,
  );
  // the same model exported as it is: refused too
  assert.match(
    await exportFails(join(root, "out-nan-model"), "--checkpoint", nanBase),
    /\(model\.layers\.0\.mlp\.down_proj\.weight\): holds NaN/,
  );
  // finite adapters whose product B·A·scale passes float32's range
  const overflow = adapterDir("export-overflow");
  const file = join(overflow, ADAPTER_WEIGHTS_FILE);
  const { tensors } = readSafetensorsFile(file);
  for (const t of tensors.values()) t.data.fill(1e20);
  writeSafetensorsFile(file, tensors, { metadata: { format: "pt" } });
  assert.match(
    await exportFails(join(root, "out-overflow"), "--checkpoint", overflow, "--merge"),
    /^error: LoRA merge: model\.layers\.0\.self_attn\.q_proj\.weight would hold \+Infinity at element 0 of \d+ once model\.layers\.0\.self_attn\.q_proj's adapter is merged/,
  );
});

// ---------------------------------------------------------------------------------------------
// The optimizer

const BAD_SETTINGS: [AdamParams, string][] = [
  [{ lr: 1e308 }, "lr must be a number in [0, 1], got 1e+308"],
  [{ lr: -1 }, "lr must be a number in [0, 1], got -1"],
  [{ lr: NaN }, "lr must be a number in [0, 1], got NaN"],
  [{ lr: "0.01" as unknown as number }, 'lr must be a number in [0, 1], got "0.01"'],
  [{ lr: 1e-3, beta1: 5 }, "beta1 must be a number in [0, 1), got 5"],
  [{ lr: 1e-3, beta1: 1 }, "beta1 must be a number in [0, 1), got 1"],
  [{ lr: 1e-3, beta2: 1 }, "beta2 must be a number in [0, 1), got 1"],
  [{ lr: 1e-3, beta2: -0.5 }, "beta2 must be a number in [0, 1), got -0.5"],
  [{ lr: 1e-3, eps: 0 }, "eps must be a number in (0, 1], got 0"],
  [{ lr: 1e-3, eps: Infinity }, "eps must be a number in (0, 1], got Infinity"],
  [{ lr: 1e-3, weightDecay: -1 }, "weightDecay must be a number in [0, 1], got -1"],
  [{ lr: 1e-3, weightDecay: 1e9 }, "weightDecay must be a number in [0, 1], got 1000000000"],
  [{ lr: 1e-3, gradClipNorm: -1 }, "gradClipNorm must be a finite number >= 0, got -1"],
  [{ lr: 1e-3, gradClipNorm: NaN }, "gradClipNorm must be a finite number >= 0, got NaN"],
];

test("optimizer settings out of range are refused naming the field (checkAdamParams); the defaults fill in", () => {
  for (const [p, message] of BAD_SETTINGS)
    assert.throws(() => checkAdamParams(p), { name: "InputError", message: `optimStep: ${message}` });
  assert.deepEqual(checkAdamParams({ lr: 1e-3 }), {
    lr: 1e-3,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weightDecay: 0,
    gradClipNorm: 0,
  });
  assert.deepEqual(checkAdamParams({ lr: 0, beta1: 0, beta2: 0.5, eps: 1e-12, weightDecay: 0.1, gradClipNorm: 1 }), {
    lr: 0,
    beta1: 0,
    beta2: 0.5,
    eps: 1e-12,
    weightDecay: 0.1,
    gradClipNorm: 1,
  });
});

test(
  "native engine: each bad optimizer setting is refused naming the field before any step; the gradients wait for the next good step",
  native,
  async () => {
    const e = await LocalEngine.load(modelDir, { workers: 0, backend: "native" });
    try {
      const tokens = [3, 9, 14, 22, 7, 30];
      const datum: Datum = {
        tokens: tokens.slice(0, -1),
        targetTokens: tokens.slice(1),
        weights: [0, 1, 1, 1, 1],
        advantages: [0, 1, 1, 1, 1],
        logprobs: [0, -3, -3, -3, -3],
      };
      await e.forwardBackward([datum], { type: "importance_sampling" });
      const trainable = e.nativeTrainable;
      const before = trainable.weightsChecksum();
      for (const [p, message] of BAD_SETTINGS.filter(([p]) => !(p.lr === -1 || Number.isNaN(p.lr))))
        await assert.rejects(e.optimStep(p), { message: `optimStep: ${message}` });
      assert.equal(trainable.weightsChecksum(), before, "a refused step changed the weights");
      assert.equal(trainable.step, 0);
      assert.ok(trainable.hasGradients(), "a refused step dropped the gradients");
      const r = await e.optimStep({ lr: 1e-3 });
      assert.deepEqual([r.skipped, r.step], [false, 1]);
      assert.notEqual(trainable.weightsChecksum(), before);
    } finally {
      await e.dispose();
    }
  },
);

test(
  "native engine: optimizer moments that are not finite are refused when a checkpoint loads, naming the entry",
  native,
  async () => {
    const e = await LocalEngine.load(modelDir, { workers: 0, backend: "native" });
    const dir = join(root, "moments");
    try {
      const tokens = [3, 9, 14, 22];
      await e.forwardBackward(
        [
          {
            tokens: tokens.slice(0, -1),
            targetTokens: tokens.slice(1),
            weights: [1, 1, 1],
            advantages: [1, 1, 1],
            logprobs: [-3, -3, -3],
          },
        ],
        { type: "importance_sampling" },
      );
      await e.optimStep({ lr: 1e-3 });
      await e.save(dir);
    } finally {
      await e.dispose();
    }
    const file = join(dir, "optimizer.safetensors");
    const { tensors } = readSafetensorsFile(file);
    const key = "v.model.norm.weight";
    (tensors.get(key) as HostTensor).data[1] = Infinity;
    writeSafetensorsFile(file, tensors);
    await assert.rejects(LocalEngine.load(dir, { workers: 0, backend: "native" }), {
      message: `optimizer.safetensors (${key}): holds +Infinity at element 1 of 64; the optimizer cannot resume from it`,
    });
  },
);
