/**
 * Engine benchmark (issue: engine throughput). Prints one JSON line per workload and a final
 * summary line:
 *   {"train_tokens_per_s":{"S":n,"M":n},"sample_tokens_per_s":{"S_b32":n,"M_b32":n,"M_b1":n},"peak_rss_mb":n,
 *    "backend":"native"|"tfjs","blas":"own"|"system","torch_ratio":{"train_S":x,"train_M":x,"sample_S_b32":x,"sample_M_b32":x}}
 * Shapes: S = hidden 256, 4 layers, 8 heads, 2 kv heads, ffn 768, vocab 512;
 *         M = hidden 512, 8 layers, 8 heads, 2 kv heads, ffn 1536, vocab 2048.
 * Train: 16 x 256 tokens, importance-sampling loss, forward + backward + AdamW.
 * Sample: 32 prompts of 64 tokens, 192 new tokens each, submitted at once; and one prompt alone.
 * "backend" names the compute backend and, on native, "blas" its matrix products (--blas own|system|auto:
 * the project's kernels or the system BLAS the addon was built with). After our workloads, when a python3 imports torch
 * ($AGENT_R1_TORCH_PYTHON, python3, /usr/bin/python3; Debian's python3-torch), the PyTorch reference
 * bench/torch_engine.py runs the same shapes as a child process (same --only; its output goes to
 * stderr) and "torch_ratio" is ours / PyTorch, 2 decimals, for the workloads that ran. Without
 * torch, or if it fails, there is no torch_ratio and one stderr line says why; --no-torch skips it.
 *   npm run bench:engine [-- --only S|M] [-- --workers N] [-- --backend auto|native|tfjs] [-- --blas own|system|auto] [-- --no-torch]
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { parseArgs } from "node:util";
import { trainByteLevelBpe } from "../src/model/bpe-trainer.js";
import { DEFAULT_CHAT_TEMPLATE } from "../src/model/chat-template.js";
import { initModel } from "../src/model/init-model.js";
import { parameterCount, parseModelConfig, presetConfigJson } from "../src/model/config.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import { loadNative, parseBackend, parseBlas, resolveBackend, resolveBlas } from "../src/engine/local/native.js";
import type { Datum } from "../src/engine/types.js";
import { Rng } from "../src/util/rng.js";
import { torchRatioFromRun } from "./suite-lib.js";
import { findPython, NO_TORCH_REASON, runProcess, TORCH_SCRIPT } from "./torch-ref.js";

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    workers: { type: "string" },
    backend: { type: "string" },
    blas: { type: "string" },
    "no-torch": { type: "boolean", default: false },
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
  if (args.only !== undefined && !(args.only in SHAPES))
    throw new Error(`--only: unknown shape '${args.only}'; known: ${Object.keys(SHAPES).join(", ")}`);
  const root = join(tmpdir(), `agent-r1-bench-${process.pid}`);
  const choice = args.backend !== undefined ? parseBackend(args.backend, "--backend") : undefined;
  const { backend, fallback } = resolveBackend(choice);
  if (fallback) console.error(`bench: native backend unavailable (${fallback}); using tfjs`);
  const blasChoice = args.blas !== undefined ? parseBlas(args.blas, "--blas") : undefined;
  const st = loadNative();
  const blas = backend === "native" && st.ok ? resolveBlas(st.addon, blasChoice) : undefined;
  const summary: {
    train_tokens_per_s: Record<string, number>;
    sample_tokens_per_s: Record<string, number>;
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
    await engine.dispose();
  }
  rmSync(root, { recursive: true, force: true });
  summary.peak_rss_mb = Math.round(process.resourceUsage().maxRSS / 1024);
  if (!args["no-torch"]) {
    // The PyTorch reference, after our workloads so the two never share the cores.
    const python = findPython("torch");
    if (!python) {
      console.error(`bench: ${NO_TORCH_REASON}; no torch_ratio`);
    } else {
      const run = await runProcess("torch", python, [TORCH_SCRIPT, ...(args.only ? ["--only", args.only] : [])], 60);
      const t = torchRatioFromRun(summary, run);
      if ("ratio" in t) summary.torch_ratio = t.ratio;
      else console.error(`bench: ${TORCH_SCRIPT} gave no figures (${t.skipped}); no torch_ratio`);
    }
  }
  console.log(JSON.stringify(summary));
}

const round = (x: number) => Math.round(x * 10) / 10;
function report(o: Record<string, unknown>) {
  for (const [k, v] of Object.entries(o)) if (typeof v === "number") o[k] = Math.round(v * 100) / 100;
  console.log(JSON.stringify({ ...o, rss_mb: Math.round(process.memoryUsage().rss / 1048576) }));
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
