/**
 * The native engine against llama.cpp on the same weights, in one run: the engine bench's M shape
 * (hidden 512, 8 layers, vocabulary 2048, random weights) in float32, float16 and bfloat16, written
 * as GGUF (src/model/gguf.ts) and run by llama.cpp through node-llama-cpp's prebuilt CPU build.
 *
 *   b1   one prompt of 64 tokens, 192 new tokens, greedy;
 *   b32  32 prompts of 64 tokens submitted at once, 192 new tokens each (prefill included, as in
 *        bench/engine.ts), llama.cpp with 32 sequences in one context.
 *
 * Each side gets its best path: llama.cpp runs its own decode loop (a context sequence's
 * `evaluate`, tokens chosen in C) on 1 and on 2 threads, the engine on its defaults (every core);
 * every figure is the best of REPEATS runs, and each workload's comparison takes llama.cpp's
 * better thread count (`llama_b1`, `llama_b32`, with `native_over_llama_b1` / `_b32`).
 *
 * First, an agreement check of the GGUF writer for both families it writes: a small Qwen2 and a
 * small Qwen3 model (q/k norms, head_dim 48 where hidden / heads is 32, untied head; weights scaled
 * up and norms moved off 1 so a mistake shows), greedy on both engines from three prompts; prints
 * how many of the tokens llama.cpp picks equal the engine's (`--agreement`: only that).
 *
 * node-llama-cpp is not a dependency of the project (its install is about 700 MB); install it
 * beside it first: `npm i --no-save -E node-llama-cpp@3.21.1`. Prints
 *   {"workload":"agreement_qwen2"|"agreement_qwen3","tokens":n,"same":n}
 * and ends with one JSON line:
 *   {"M_f32":{"native_b1":n,"native_b32":n,"llama_b1_t1":n,"llama_b32_t1":n,"llama_b1_t2":n,"llama_b32_t2":n,
 *     "llama_b1":n,"llama_b32":n,"native_over_llama_b1":r,"native_over_llama_b32":r},"M_f16":{...},"M_bf16":{...}}
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { initModel } from "../src/model/init-model.js";
import { loadModelDir, openModelDirRaw, readJsonFile, writeModelDir } from "../src/model/model-dir.js";
import { ggufTokenizer, writeGguf } from "../src/model/gguf.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { DType } from "../src/model/safetensors.js";
import { Rng } from "../src/util/rng.js";

const PROMPT = 64,
  NEW = 192,
  BATCH = 32,
  VOCAB = 2048,
  REPEATS = 3;

/** The best of REPEATS runs of `run` (tokens per second). */
async function best(run: () => Promise<number>): Promise<number> {
  let top = 0;
  for (let i = 0; i < REPEATS; i++) top = Math.max(top, await run());
  return top;
}

/** The part of node-llama-cpp used here. */
interface LlamaSequence {
  evaluate(tokens: number[], o: { temperature: number }): AsyncIterable<number>;
}
interface LlamaContext {
  getSequence(): LlamaSequence;
  dispose(): Promise<void>;
}
interface LlamaModel {
  createContext(o: { contextSize: number; threads: number; sequences: number }): Promise<LlamaContext>;
  dispose(): Promise<void>;
}
interface Llama {
  loadModel(o: { modelPath: string }): Promise<LlamaModel>;
}

async function loadLlama(): Promise<Llama> {
  const name = "node-llama-cpp";
  try {
    const mod = (await import(name)) as {
      getLlama(o: { gpu: false; build: "never"; logLevel: "warn" }): Promise<Llama>;
    };
    return await mod.getLlama({ gpu: false, build: "never", logLevel: "warn" });
  } catch (e) {
    console.error(`bench/llama-cpp: node-llama-cpp did not load (${(e as Error).message.split("\n")[0]})`);
    console.error("install it beside the project first: npm i --no-save -E node-llama-cpp@3.21.1");
    process.exit(2);
  }
}

const prompts = (rng: Rng, n: number) =>
  Array.from({ length: n }, () => Array.from({ length: PROMPT }, () => 3 + rng.int(VOCAB - 3)));

/** New tokens per second of greedy sequences of `prompts` run at once on llama.cpp. */
async function llamaRun(model: LlamaModel, threads: number, ps: number[][]): Promise<number> {
  const ctx = await model.createContext({ contextSize: ps.length * (PROMPT + NEW), threads, sequences: ps.length });
  try {
    const one = async (p: number[]) => {
      let n = 0;
      for await (const token of ctx.getSequence().evaluate(p, { temperature: 0 })) {
        void token;
        if (++n >= NEW) break;
      }
      return n;
    };
    const t0 = performance.now();
    const counts = await Promise.all(ps.map(one));
    return counts.reduce((a, b) => a + b, 0) / ((performance.now() - t0) / 1000);
  } finally {
    await ctx.dispose();
  }
}

/** The same on the native engine (greedy, no stop). */
async function nativeRun(engine: LocalEngine, ps: number[][]): Promise<number> {
  const t0 = performance.now();
  const out = await Promise.all(ps.map((p) => engine.sample(p, { maxTokens: NEW, temperature: 0, stop: [] })));
  const tokens = out.reduce((s, r) => s + r.sequences[0].tokens.length, 0);
  return tokens / ((performance.now() - t0) / 1000);
}

const round = (x: number) => Math.round(x * 10) / 10;

/** Greedy tokens of `p` (AGREE_NEW of them) on llama.cpp. */
async function llamaGreedy(model: LlamaModel, p: number[]): Promise<number[]> {
  const ctx = await model.createContext({ contextSize: p.length + AGREE_NEW + 8, threads: 2, sequences: 1 });
  try {
    const out: number[] = [];
    for await (const token of ctx.getSequence().evaluate(p, { temperature: 0 })) {
      out.push(token);
      if (out.length >= AGREE_NEW) break;
    }
    return out;
  } finally {
    await ctx.dispose();
  }
}

const AGREE_NEW = 32;
const FAMILIES = {
  qwen2: {},
  qwen3: { model_type: "qwen3", architectures: ["Qwen3ForCausalLM"], head_dim: 48, tie_word_embeddings: false },
};

/** Whether llama.cpp picks the engine's greedy tokens on our GGUF file of each family. */
async function agreement(llama: Llama, root: string): Promise<void> {
  for (const [family, overrides] of Object.entries(FAMILIES)) {
    const init = join(root, `${family}-init`),
      dir = join(root, family);
    await initModel({ preset: "small", out: init, seed: 9, overrides: { vocab_size: VOCAB, ...overrides } });
    const m = loadModelDir(init);
    const rng = new Rng(9, 1);
    for (const [name, t] of m.weights)
      for (let i = 0; i < t.data.length; i++)
        t.data[i] = name.endsWith("norm.weight") ? 1 + 0.3 * rng.normal() : t.data[i] * 6;
    writeModelDir(dir, { config: m.config.raw, weights: m.weights, tokenizerFrom: init });
    const raw = openModelDirRaw(dir).load();
    const gguf = join(root, `${family}.gguf`);
    writeGguf(gguf, raw.config, raw.weights, ggufTokenizer(readJsonFile(join(dir, "tokenizer.json")), VOCAB));
    const ps = prompts(new Rng(4), 3).map((p) => p.slice(0, 12));
    const engine = await LocalEngine.load(dir, { backend: "native" });
    const model = await llama.loadModel({ modelPath: gguf });
    let tokens = 0,
      same = 0;
    try {
      for (const p of ps) {
        const ours = (await engine.sample(p, { maxTokens: AGREE_NEW, temperature: 0, stop: [] })).sequences[0].tokens;
        const theirs = await llamaGreedy(model, p);
        tokens += ours.length;
        // count the common prefix: after the first difference the two continue from different text
        let i = 0;
        while (i < ours.length && ours[i] === theirs[i]) i++;
        same += i;
      }
    } finally {
      await engine.dispose();
      await model.dispose();
    }
    console.log(JSON.stringify({ workload: `agreement_${family}`, tokens, same }));
  }
}

async function main(): Promise<void> {
  const llama = await loadLlama();
  const root = mkdtempSync(join(tmpdir(), "agent-r1-llama-"));
  const summary: Record<string, Record<string, number>> = {};
  try {
    await agreement(llama, root);
    if (process.argv.includes("--agreement")) return;
    const f32 = join(root, "M-F32");
    await initModel({ preset: "medium", out: f32, seed: 5, overrides: { vocab_size: VOCAB } });
    const m = loadModelDir(f32);
    for (const dtype of ["F32", "F16", "BF16"] as DType[]) {
      const dir = join(root, `M-${dtype}`);
      if (dtype !== "F32") writeModelDir(dir, { config: m.config.raw, weights: m.weights, tokenizerFrom: f32, dtype });
      const raw = openModelDirRaw(dir).load();
      const gguf = join(root, `M-${dtype}.gguf`);
      writeGguf(gguf, raw.config, raw.weights, ggufTokenizer(readJsonFile(join(dir, "tokenizer.json")), VOCAB));
      const rng = new Rng(3);
      const warm = prompts(rng, 2),
        b1 = prompts(rng, 1),
        b32 = prompts(rng, BATCH);
      const fig: Record<string, number> = {};
      const engine = await LocalEngine.load(dir, { backend: "native" });
      try {
        await nativeRun(engine, warm);
        fig.native_b1 = round(await best(() => nativeRun(engine, b1)));
        fig.native_b32 = round(await best(() => nativeRun(engine, b32)));
      } finally {
        await engine.dispose();
      }
      const model = await llama.loadModel({ modelPath: gguf });
      try {
        await llamaRun(model, 2, warm);
        for (const threads of [1, 2]) {
          fig[`llama_b1_t${threads}`] = round(await best(() => llamaRun(model, threads, b1)));
          fig[`llama_b32_t${threads}`] = round(await best(() => llamaRun(model, threads, b32)));
        }
        fig.llama_b1 = Math.max(fig.llama_b1_t1, fig.llama_b1_t2);
        fig.llama_b32 = Math.max(fig.llama_b32_t1, fig.llama_b32_t2);
        fig.native_over_llama_b1 = Math.round((fig.native_b1 / fig.llama_b1) * 100) / 100;
        fig.native_over_llama_b32 = Math.round((fig.native_b32 / fig.llama_b32) * 100) / 100;
      } finally {
        await model.dispose();
      }
      const key = `M_${dtype.toLowerCase()}`;
      summary[key] = fig;
      console.log(JSON.stringify({ workload: key, ...fig }));
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  console.log(JSON.stringify(summary));
}

await main();
