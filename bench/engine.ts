/**
 * Engine benchmark (issue: engine throughput). Prints one JSON line per workload and a final
 * summary line:
 *   {"train_tokens_per_s":{"S":n,"M":n},"sample_tokens_per_s":{"S_b32":n,"M_b32":n,"M_b1":n},"peak_rss_mb":n,
 *    "backend":"native"|"tfjs","blas":"own"|"system","torch_ratio":{"train_S":x,"train_M":x,"sample_S_b32":x,"sample_M_b32":x}}
 * Shapes: S = hidden 256, 4 layers, 8 heads, 2 kv heads, ffn 768, vocab 512;
 *         M = hidden 512, 8 layers, 8 heads, 2 kv heads, ffn 1536, vocab 2048.
 * Train: 16 x 256 tokens, importance-sampling loss, forward + backward + AdamW.
 * Sample: 32 prompts of 64 tokens, 192 new tokens each, submitted at once; and one prompt alone.
 * GRPO update (native engine only): 16 prompts x 8 samples, 200-token prompts and 140-token responses
 * (weights on the responses), forwardBackward + optimStep, with shared prefixes (engine.sharedPrefix,
 * the default) and without, on two engines over the same model in the same run: after one untimed
 * update each, two alternations, the best of each side; tokens/s count every datum's 340 tokens.
 * Lines grpo_<shape>_shared and grpo_<shape>_apart; the summary adds
 *   "grpo_update_tokens_per_s":{"S_shared":n,"S_apart":n,...},"grpo_shared_ratio":{"S":x,...}
 * (PyTorch has no such workload: no torch_ratio for it).
 * "backend" names the compute backend and, on native, "blas" its matrix products (--blas own|system|auto:
 * the project's kernels or the system BLAS the addon was built with). After our workloads, when a python3 imports torch
 * ($AGENT_R1_TORCH_PYTHON, python3, /usr/bin/python3; Debian's python3-torch), the PyTorch reference
 * bench/torch_engine.py runs the same shapes as a child process (same --only; its output goes to
 * stderr) and "torch_ratio" is ours / PyTorch, 2 decimals, for the workloads that ran. Without
 * torch, or if it fails, there is no torch_ratio and one stderr line says why; --no-torch skips it.
 *   npm run bench:engine [-- --only S|M] [-- --workers N] [-- --backend auto|native|tfjs] [-- --blas own|system|auto] [-- --no-torch]
 *
 * --model qwen2.5-0.5b | qwen2.5-1.5b | qwen3-4b replaces S and M with a model of real size: the published
 * config.json (bench/qwen-model.ts REAL_MODELS; Qwen2.5-0.5B: hidden 896, 24 layers, 14 heads, 2 kv heads,
 * ffn 4864, q/k/v biases, 494M parameters; Qwen2.5-1.5B: hidden 1536, 28 layers, 12 heads, ffn 8960, 1.54B;
 * Qwen3-4B: hidden 2560, 36 layers, 32 heads of 128, 8 kv heads, ffn 9728, q/k norms, 4.02B; all tied,
 * vocab 151936, RoPE theta 1e6, bfloat16) with random bf16 weights, N(0, 0.02) truncated at 2 std
 * (written by bench/qwen-model.ts in a process of its own so that its memory stays out of ours), engine.maxContextTokens
 * 4096, and the 512-token bench tokenizer (the config's vocabulary is larger; prompts
 * and training tokens are drawn from all 151936 ids). It loads on the native engine with new LoRA adapters
 * (rank 32, alpha 32, no rsLoRA, q/k/v/o and gate/up/down of every layer) and measures, in this order:
 *   sample_b32  32 prompts of 64 random tokens submitted at once, 64 new tokens each (stop: [], so every
 *               length is fixed), after a small warm-up on other prompts; new tokens / s, prefill included;
 *   sample_b1   one other prompt alone, 64 new tokens;
 *   lora_train  4 x 256 tokens, importance-sampling loss, forwardBackward + optimStep (AdamW on the
 *               adapters only), one untimed step then the mean of two; tokens / s.
 *   grpo        the GRPO update above with 2 prompts x 8 samples (the same group shape), shared and
 *               apart (a second engine loaded after the first is disposed): lines KEY_grpo_shared,
 *               KEY_grpo_apart; figures grpo_shared, grpo_apart and grpo_shared_ratio.
 * Per-workload lines are named KEY_* (qwen05b, qwen15b, qwen3_4b), with gflops counting 2 * params a sampled token and 4 * params
 * a trained one (the base is frozen: forward and input gradients, no weight gradients). The summary:
 *   {"qwen05b":{"sample_b32":n,"sample_b1":n,"lora_train":n},"peak_rss_mb":n,"backend":"native","blas":"own"|"system",
 *    "torch_ratio":{"qwen05b_sample_b32":x,"qwen05b_sample_b1":x,"qwen05b_lora_train":x}}
 * peak_rss_mb is process.resourceUsage().maxRSS, so it includes loading. torch_ratio is ours / PyTorch from
 * `bench/torch_engine.py --model qwen2.5-0.5b`: the same shapes, bf16 base weights held and computed by torch,
 * the LoRA written by hand, the same token counts. A workload that throws is left out of the figures and
 * named with its error under "errors" (exit status 1); the others still run.
 * --bf16-products auto|tiles|exact sets engine.bf16Products for this model (default auto: the activations rounded
 * to bfloat16 on AMX tiles or AVX512_BF16 where the CPU has them; exact widens the weights to float32); the summary
 * names the one in effect as "bf16_products" and the kernel as "kernel".
 *   npm run bench:engine -- --model qwen2.5-0.5b|qwen2.5-1.5b|qwen3-4b [--blas own|system|auto] [--bf16-products auto|tiles|exact] [--no-torch] [--no-grpo]
 * (--no-grpo leaves out the GRPO update, the longest workload on the larger models.)
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { extname, join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { trainByteLevelBpe } from "../src/model/bpe-trainer.js";
import { DEFAULT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { initModel } from "../src/model/init-model.js";
import { parameterCount, parseModelConfig, presetConfigJson } from "../src/model/config.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import {
  BF16_PRODUCT_CHOICES,
  loadAddon,
  parseBackend,
  parseBlas,
  resolveBackend,
  resolveBlas,
  type Bf16Products,
} from "../src/engine/local/addon.js";
import type { Datum } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";
import { targetsFromTinker, type LoraSpec } from "../src/model/peft.js";
import { errorReason, torchRatioFromRun, type Json } from "./suite-lib.js";
import { REAL_MODELS, type RealModelName } from "./qwen-model.js";
import { findPython, NO_TORCH_REASON, runProcess, TORCH_SCRIPT } from "./torch-ref.js";

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    workers: { type: "string" },
    backend: { type: "string" },
    blas: { type: "string" },
    model: { type: "string" },
    "bf16-products": { type: "string" },
    "no-torch": { type: "boolean", default: false },
    "no-grpo": { type: "boolean", default: false },
  },
});

const SHAPES = {
  S: { preset: "small" as const, vocab: 512 },
  M: { preset: "medium" as const, vocab: 2048 },
};

function benchTokenizer(dir: string, vocab: number): void {
  const rng = new Rng(1);
  const words = Array.from({ length: 3000 }, () =>
    Array.from({ length: 2 + rng.int(6) }, () => "abcdefghijklmnopqrstuvwxyz"[rng.int(26)]).join(""),
  );
  const corpus = Array.from(
    { length: 2000 },
    () => Array.from({ length: 12 }, () => words[rng.int(words.length)]).join(" ") + ` ${rng.int(1000)}.`,
  );
  const tok = trainByteLevelBpe(corpus, {
    vocabSize: Math.min(vocab, 512),
    specialTokens: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tok));
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify({ eos_token: "<|im_end|>", pad_token: "<|endoftext|>", chat_template: DEFAULT_CHAT_TEMPLATE }),
  );
}

const randomTokens = (rng: Rng, n: number, vocab: number) => Array.from({ length: n }, () => 3 + rng.int(vocab - 3));

/** Mean seconds of `reps` calls after `warmups` untimed ones (the first steps also grow the heap and fill caches). */
async function timeIt(fn: () => Promise<unknown>, reps: number, warmups = 1): Promise<number> {
  for (let i = 0; i < warmups; i++) await fn();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) await fn();
  return (performance.now() - t0) / 1000 / reps;
}

async function main() {
  if (args.model !== undefined) return modelBench(args.model);
  if (args.only !== undefined && !(args.only in SHAPES))
    throw new Error(`--only: unknown shape '${args.only}'; known: ${Object.keys(SHAPES).join(", ")}`);
  const root = join(tmpdir(), `agent-r1-bench-${process.pid}`);
  const choice = args.backend !== undefined ? parseBackend(args.backend, "--backend") : undefined;
  const { backend, fallback } = resolveBackend(choice);
  if (fallback) console.error(`bench: native backend unavailable (${fallback}); using tfjs`);
  const blasChoice = args.blas !== undefined ? parseBlas(args.blas, "--blas") : undefined;
  const st = loadAddon();
  const blas = backend === "native" && st.ok ? resolveBlas(st.addon, blasChoice) : undefined;
  const summary: {
    train_tokens_per_s: Record<string, number>;
    sample_tokens_per_s: Record<string, number>;
    grpo_update_tokens_per_s?: Record<string, number>;
    grpo_shared_ratio?: Record<string, number>;
    peak_rss_mb: number;
    backend: string;
    blas?: string;
    torch_ratio?: Record<string, number>;
  } = { train_tokens_per_s: {}, sample_tokens_per_s: {}, peak_rss_mb: 0, backend, ...(blas ? { blas } : {}) };
  const workers = args.workers !== undefined ? Number(args.workers) : undefined;
  for (const [name, shape] of Object.entries(SHAPES)) {
    if (args.only && args.only !== name) continue;
    const tokDir = join(root, `tok-${name}`);
    benchTokenizer(tokDir, shape.vocab);
    const dir = join(root, name);
    await initModel({ preset: shape.preset, out: dir, tokenizer: tokDir, overrides: { vocab_size: shape.vocab } });
    const engine = await LocalEngine.load(dir, { backend, blas, ...(workers !== undefined ? { workers } : {}) });
    const params = parameterCount(parseModelConfig(presetConfigJson(shape.preset, shape.vocab)));
    const rng = new Rng(7);

    const datums: Datum[] = Array.from({ length: 16 }, () => {
      const seq = randomTokens(rng, 257, shape.vocab);
      return {
        tokens: seq.slice(0, -1),
        targetTokens: seq.slice(1),
        weights: seq.slice(1).map(() => 1),
        advantages: seq.slice(1).map(() => rng.normal()),
        logprobs: seq.slice(1).map(() => -Math.log(shape.vocab)),
      };
    });
    const trainS = await timeIt(
      async () => {
        await engine.forwardBackward(datums, { type: "importance_sampling" });
        await engine.optimStep({ lr: 1e-5 });
      },
      3,
      2,
    );
    const trainTps = (16 * 256) / trainS;
    report({
      workload: `train_${name}`,
      tokens_per_s: trainTps,
      gflops: (6 * params * 16 * 256) / trainS / 1e9,
      seconds: trainS,
    });

    const prompts = Array.from({ length: 32 }, () => randomTokens(rng, 64, shape.vocab));
    const sampleB32 = await timeIt(
      () => Promise.all(prompts.map((p, i) => engine.sample(p, { maxTokens: 192, stop: [], seed: i }))),
      1,
    );
    const b32Tps = (32 * 192) / sampleB32;
    report({
      workload: `sample_${name}_b32`,
      tokens_per_s: b32Tps,
      gflops: (2 * params * 32 * 192) / sampleB32 / 1e9,
      seconds: sampleB32,
    });
    summary.train_tokens_per_s[name] = round(trainTps);
    summary.sample_tokens_per_s[`${name}_b32`] = round(b32Tps);
    if (name === "M") {
      const sampleB1 = await timeIt(() => engine.sample(prompts[0], { maxTokens: 192, stop: [], seed: 1 }), 1);
      const b1Tps = 192 / sampleB1;
      report({
        workload: `sample_${name}_b1`,
        tokens_per_s: b1Tps,
        gflops: (2 * params * 192) / sampleB1 / 1e9,
        seconds: sampleB1,
      });
      summary.sample_tokens_per_s.M_b1 = round(b1Tps);
    }
    if (backend === "native") {
      const opts = { backend, blas, ...(workers !== undefined ? { workers } : {}) };
      const apart = await LocalEngine.load(dir, { ...opts, sharedPrefix: false });
      const g = await grpoUpdates(engine, apart, grpoDatums(rng, GRPO.prompts, shape.vocab), 2);
      await apart.dispose();
      report({ workload: `grpo_${name}_shared`, tokens_per_s: g.shared, seconds: g.sharedSeconds });
      report({ workload: `grpo_${name}_apart`, tokens_per_s: g.apart, seconds: g.apartSeconds });
      (summary.grpo_update_tokens_per_s ??= {})[`${name}_shared`] = round(g.shared);
      summary.grpo_update_tokens_per_s[`${name}_apart`] = round(g.apart);
      (summary.grpo_shared_ratio ??= {})[name] = Math.round((g.shared / g.apart) * 100) / 100;
    }
    await engine.dispose();
  }
  rmSync(root, { recursive: true, force: true });
  summary.peak_rss_mb = Math.round(process.resourceUsage().maxRSS / 1024);
  const ratio = await torchRatioOf(summary, args.only ? ["--only", args.only] : []);
  if (ratio) summary.torch_ratio = ratio;
  console.log(JSON.stringify(summary));
}

/** The GRPO workload: prompts x samples, prompt and response tokens. */
const GRPO = { prompts: 16, samples: 8, prompt: 200, response: 140 };

/** A GRPO batch: `prompts` groups of GRPO.samples samples of one prompt, weights on the responses. */
function grpoDatums(rng: Rng, prompts: number, vocab: number): Datum[] {
  const out: Datum[] = [];
  for (let p = 0; p < prompts; p++) {
    const prompt = randomTokens(rng, GRPO.prompt, vocab);
    for (let k = 0; k < GRPO.samples; k++) {
      const seq = [...prompt, ...randomTokens(rng, GRPO.response + 1, vocab)];
      const n = seq.length - 1;
      out.push({
        tokens: seq.slice(0, -1),
        targetTokens: seq.slice(1),
        weights: Array.from({ length: n }, (_, t) => (t + 1 >= GRPO.prompt ? 1 : 0)),
        advantages: Array.from({ length: n }, () => rng.normal()),
        logprobs: Array.from({ length: n }, () => -Math.log(vocab)),
      });
    }
  }
  return out;
}

/**
 * Update tokens/s (forwardBackward + optimStep) of the same datums on an engine with shared
 * prefixes and one without: one untimed update each, then `rounds` alternations, the best of each.
 */
async function grpoUpdates(shared: LocalEngine, apart: LocalEngine, datums: Datum[], rounds: number) {
  const tokens = datums.reduce((n, d) => n + d.tokens.length, 0);
  const update = async (e: LocalEngine) => {
    const t0 = performance.now();
    await e.forwardBackward(datums, { type: "importance_sampling" });
    await e.optimStep({ lr: 1e-5 });
    return (performance.now() - t0) / 1000;
  };
  await update(shared);
  await update(apart);
  let sharedSeconds = Infinity,
    apartSeconds = Infinity;
  for (let r = 0; r < rounds; r++) {
    sharedSeconds = Math.min(sharedSeconds, await update(shared));
    apartSeconds = Math.min(apartSeconds, await update(apart));
  }
  return { shared: tokens / sharedSeconds, apart: tokens / apartSeconds, sharedSeconds, apartSeconds };
}

/**
 * The PyTorch reference (bench/torch_engine.py with `torchArgs`) and ours / PyTorch for the figures
 * both measured; undefined, with one stderr line saying why, without torch or figures (or with --no-torch).
 * It runs after our workloads so the two never share the cores.
 */
async function torchRatioOf(ours: Json, torchArgs: string[]): Promise<Record<string, number> | undefined> {
  if (args["no-torch"]) return undefined;
  const python = findPython("torch");
  if (!python) {
    console.error(`bench: ${NO_TORCH_REASON}; no torch_ratio`);
    return undefined;
  }
  const run = await runProcess("torch", python, [TORCH_SCRIPT, ...torchArgs], 60);
  const t = torchRatioFromRun(ours, run);
  if ("ratio" in t) return t.ratio;
  console.error(`bench: ${TORCH_SCRIPT} gave no figures (${t.skipped}); no torch_ratio`);
  return undefined;
}

/** Rank-32 LoRA (alpha 32, no rsLoRA) on the attention and MLP projections of every layer. */
const BENCH_LORA: LoraSpec = {
  rank: 32,
  alpha: 32,
  dropout: 0,
  targets: targetsFromTinker({ trainAttn: true, trainMlp: true, trainUnembed: false }),
  rslora: false,
};
const MODEL_TRAIN = { batch: 4, len: 256 };
const MODEL_SAMPLE = { batch: 32, prompt: 64, newTokens: 64 };
/** engine.maxContextTokens of the --model runs, as a recipe for these lengths would set it. */
const MODEL_CONTEXT = 4096;

/**
 * --model: a real model's config.json with random bf16 weights, on the native engine with a LoRA:
 * sampling at batch 32 and 1, LoRA training, peak RSS; then the PyTorch reference on the same shapes.
 */
async function modelBench(model: string): Promise<void> {
  if (!Object.hasOwn(REAL_MODELS, model))
    throw new Error(`--model: unknown model '${model}'; known: ${Object.keys(REAL_MODELS).join(", ")}`);
  if (args.only !== undefined) throw new Error("--only picks among the S and M shapes; it does not go with --model");
  if (args.backend !== undefined && parseBackend(args.backend, "--backend") === "tfjs")
    throw new Error("--model trains LoRA adapters, which only the native engine runs: drop --backend tfjs");
  const st = loadAddon();
  if (!st.ok) throw new Error(`--model needs the native engine, whose addon does not load: ${st.reason}`);
  const blasChoice = args.blas !== undefined ? parseBlas(args.blas, "--blas") : undefined;
  const blas = resolveBlas(st.addon, blasChoice);
  const { key, config: raw } = REAL_MODELS[model as RealModelName];
  const config = parseModelConfig(raw);
  const vocab = config.vocabSize,
    params = parameterCount(config);
  const figures: Record<string, number> = {};
  const errors: Record<string, string> = {};
  const bf16Products = (args["bf16-products"] ?? "auto") as Bf16Products;
  if (!BF16_PRODUCT_CHOICES.includes(bf16Products))
    throw new Error(`--bf16-products must be one of ${BF16_PRODUCT_CHOICES.join(", ")}, got ${bf16Products}`);
  const summary: Json = { [key]: figures, peak_rss_mb: 0, backend: "native", blas };
  const root = join(tmpdir(), `agent-r1-bench-${process.pid}`);
  const dir = join(root, key);
  try {
    // The model: the bench tokenizer (512 tokens; the config's vocabulary is larger) and, in a
    // process of its own so that its ~1 GB stays out of our peak RSS, config.json and the weights.
    benchTokenizer(dir, 512);
    const script = fileURLToPath(new URL(`./qwen-model${extname(fileURLToPath(import.meta.url))}`, import.meta.url));
    const wrote = await runProcess("weights", process.execPath, [...process.execArgv, script, dir, model], 30);
    if (wrote.code !== 0 || wrote.timedOutMinutes !== undefined)
      throw new Error(`writing the model failed: ${errorReason(wrote.stderr, wrote)}`);
    report({ workload: `${key}_write`, seconds: wrote.seconds });

    let t0 = performance.now();
    // The longest sequence here is 340 tokens: the memory plan reserves keys and values for
    // MODEL_CONTEXT of them, not the config's max_position_embeddings (32768 to 131072).
    const engineOptions = {
      backend: "native",
      blas,
      bf16Products,
      lora: { spec: BENCH_LORA, seed: 0 },
      maxContextTokens: MODEL_CONTEXT,
    } as const;
    const engine = await LocalEngine.load(dir, engineOptions);
    report({ workload: `${key}_load`, seconds: (performance.now() - t0) / 1000 });
    let disposed = false;
    const info = st.addon.info();
    summary.bf16_products = ["amx", "avx512bf16"].includes(info.kernel) ? "tiles" : "exact";
    summary.kernel = info.kernel;
    const rng = new Rng(7);
    const run = async (name: string, fn: () => Promise<void>) => {
      try {
        await fn();
      } catch (e) {
        errors[name] = e instanceof Error ? e.message : String(e);
        console.error(`bench: ${key} ${name} failed:`, e);
      }
    };

    await run("sample_b32", async () => {
      // Warm-up on other prompts (the same ones would be served from the prefix cache).
      const warm = Array.from({ length: 2 }, () => randomTokens(rng, MODEL_SAMPLE.prompt, vocab));
      await Promise.all(warm.map((p, i) => engine.sample(p, { maxTokens: 4, stop: [], seed: i })));
      const { batch, prompt, newTokens } = MODEL_SAMPLE;
      const prompts = Array.from({ length: batch }, () => randomTokens(rng, prompt, vocab));
      t0 = performance.now();
      const out = await Promise.all(
        prompts.map((p, i) => engine.sample(p, { maxTokens: newTokens, stop: [], seed: i })),
      );
      const s = (performance.now() - t0) / 1000;
      const tokens = out.reduce((n, r) => n + r.sequences[0].tokens.length, 0);
      if (tokens !== batch * newTokens) throw new Error(`sampled ${tokens} tokens, not ${batch * newTokens}`);
      report({
        workload: `${key}_sample_b32`,
        tokens_per_s: tokens / s,
        gflops: (2 * params * tokens) / s / 1e9,
        seconds: s,
      });
      figures.sample_b32 = round(tokens / s);
    });

    await run("sample_b1", async () => {
      const { prompt, newTokens } = MODEL_SAMPLE;
      t0 = performance.now();
      const out = await engine.sample(randomTokens(rng, prompt, vocab), { maxTokens: newTokens, stop: [], seed: 1 });
      const s = (performance.now() - t0) / 1000;
      const tokens = out.sequences[0].tokens.length;
      if (tokens !== newTokens) throw new Error(`sampled ${tokens} tokens, not ${newTokens}`);
      report({
        workload: `${key}_sample_b1`,
        tokens_per_s: tokens / s,
        gflops: (2 * params * tokens) / s / 1e9,
        seconds: s,
      });
      figures.sample_b1 = round(tokens / s);
    });

    await run("lora_train", async () => {
      const { batch, len } = MODEL_TRAIN;
      const datums: Datum[] = Array.from({ length: batch }, () => {
        const seq = randomTokens(rng, len + 1, vocab);
        return {
          tokens: seq.slice(0, -1),
          targetTokens: seq.slice(1),
          weights: seq.slice(1).map(() => 1),
          advantages: seq.slice(1).map(() => rng.normal()),
          logprobs: seq.slice(1).map(() => -Math.log(vocab)),
        };
      });
      const s = await timeIt(
        async () => {
          await engine.forwardBackward(datums, { type: "importance_sampling" });
          await engine.optimStep({ lr: 1e-5 });
        },
        2,
        1,
      );
      const tokens = batch * len;
      // Frozen base: forward and the input gradients, about 4 * params flops a token (no weight gradients).
      report({
        workload: `${key}_lora_train`,
        tokens_per_s: tokens / s,
        gflops: (4 * params * tokens) / s / 1e9,
        seconds: s,
      });
      figures.lora_train = round(tokens / s);
    });

    // The GRPO update, shared then apart: one engine at a time (each holds the 0.5B weights).
    if (!args["no-grpo"])
      await run("grpo", async () => {
        const datums = grpoDatums(rng, 2, vocab);
        const tokens = datums.reduce((n, d) => n + d.tokens.length, 0);
        const best = async (e: LocalEngine) => {
          let s = Infinity;
          for (let r = 0; r < 3; r++) {
            const t = performance.now();
            await e.forwardBackward(datums, { type: "importance_sampling" });
            await e.optimStep({ lr: 1e-5 });
            if (r > 0) s = Math.min(s, (performance.now() - t) / 1000);
          }
          return s;
        };
        const shared = await best(engine);
        disposed = true;
        await engine.dispose();
        const apartEngine = await LocalEngine.load(dir, { ...engineOptions, sharedPrefix: false });
        const apart = await best(apartEngine);
        await apartEngine.dispose();
        report({ workload: `${key}_grpo_shared`, tokens_per_s: tokens / shared, seconds: shared });
        report({ workload: `${key}_grpo_apart`, tokens_per_s: tokens / apart, seconds: apart });
        figures.grpo_shared = round(tokens / shared);
        figures.grpo_apart = round(tokens / apart);
        figures.grpo_shared_ratio = Math.round((apart / shared) * 100) / 100;
      });
    if (!disposed) await engine.dispose();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  summary.peak_rss_mb = Math.round(process.resourceUsage().maxRSS / 1024);
  if (Object.keys(figures).length > 0) {
    const ratio = await torchRatioOf(summary, ["--model", model]);
    if (ratio) summary.torch_ratio = ratio;
  }
  if (Object.keys(errors).length > 0) summary.errors = errors;
  console.log(JSON.stringify(summary));
  if (Object.keys(errors).length > 0) process.exitCode = 1;
}

const round = (x: number) => Math.round(x * 10) / 10;
function report(o: Record<string, unknown>) {
  for (const [k, v] of Object.entries(o)) if (typeof v === "number") o[k] = Math.round(v * 100) / 100;
  console.log(JSON.stringify({ ...o, rss_mb: Math.round(process.memoryUsage().rss / 1048576) }));
}

main().then(
  // process.exit() exits with process.exitCode: 1 when a --model workload failed.
  () => process.exit(),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
