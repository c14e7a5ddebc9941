/**
 * The trainer runs over the Engine interface: two iterations, a checkpoint and a resume through
 * a minimal engine written here (a scripted model: it answers every turn with a number and keeps
 * a count of its optimizer steps as its "weights"), with no LocalEngine anywhere.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import type { EngineFactory, OwnedCritic, PolicyEngine } from "../src/engine/factory.js";
import type {
  AdamParams,
  Datum,
  ForwardBackwardResult,
  LossSpec,
  SampleResult,
  SamplingParams,
} from "../src/engine/types.js";
import { Tokenizer } from "../src/model/tokenizer.js";
import { defaultTokenizerDir } from "../src/model/default-tokenizer.js";
import { parseConfig } from "../src/train/load-config.js";
import { Trainer } from "../src/train/trainer.js";
import { toyTask } from "./fixtures/toy-task.js";
import { createHouseholdTask } from "../src/tasks/household/task.js";
import { tempDir } from "./helpers.js";

const tokenizer = Tokenizer.fromDir(defaultTokenizerDir());

/** Answers "7" or "seven" (alternating, so groups are not constant), end of turn; trains nothing but counts. */
class CountingEngine implements PolicyEngine {
  readonly config = { maxPositionEmbeddings: 4096, vocabSize: tokenizer.vocabSize };
  readonly tokenizer = tokenizer;
  steps = 0;
  samples = 0;
  batches: Datum[][] = [];

  async sample(_prompt: number[], params: SamplingParams = {}): Promise<SampleResult> {
    const n = params.n ?? 1;
    const sequences = Array.from({ length: n }, () => {
      const tokens = [...tokenizer.encode(this.samples++ % 2 === 0 ? "7" : "seven"), tokenizer.eosTokenId!];
      return { tokens, logprobs: tokens.map(() => -0.5), stopReason: "stop" as const };
    });
    return { sequences };
  }
  async computeLogprobs(sequences: number[][]): Promise<(number | null)[][]> {
    return sequences.map((s) => s.map((_, i) => (i === 0 ? null : -0.5)));
  }
  async forwardBackward(datums: Datum[], _loss: LossSpec): Promise<ForwardBackwardResult> {
    this.batches.push(datums);
    const tokens = datums.reduce((s, d) => s + d.weights.filter((w) => w > 0).length, 0);
    return {
      logprobs: datums.map((d) => d.logprobs ?? d.tokens.map(() => -0.5)),
      metrics: { loss: 0.25, tokens, entropy: 1 },
    };
  }
  async optimStep(_p: AdamParams) {
    this.steps++;
    return { gradNorm: 1, skipped: false, step: this.steps };
  }
  async save(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "weights.json"), JSON.stringify({ steps: this.steps }));
  }
  async load(dir: string): Promise<void> {
    this.steps = (JSON.parse(readFileSync(join(dir, "weights.json"), "utf8")) as { steps: number }).steps;
  }
  async dispose(): Promise<void> {}
}

function countingEngines(made: CountingEngine[]): EngineFactory {
  const policy = async (dir: string) => {
    const e = new CountingEngine();
    if (existsSync(join(dir, "weights.json"))) await e.load(dir);
    made.push(e);
    return e;
  };
  return {
    kind: "counting",
    policy,
    reference: policy,
    critic: async (): Promise<OwnedCritic> => {
      throw new Error("no critic in this test");
    },
    initModel: async ({ out }) => {
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, "weights.json"), JSON.stringify({ steps: 0 }));
    },
  };
}

const config = (iterations: number) =>
  parseConfig({
    rollout: { n: 4, maxTurns: 1, maxTokensPerTurn: 8, maxTotalTokens: 512 },
    train: {
      iterations,
      batchSize: 2,
      miniBatches: 2,
      valEvery: 0,
      checkpointEvery: 1,
      keepCheckpoints: 2,
      samplesPerIteration: 1,
    },
  });

test("two iterations, a checkpoint and a resume through an engine written in the test (no LocalEngine)", async () => {
  const out = tempDir(),
    made: CountingEngine[] = [];
  const t = await Trainer.open(config(2), { out, task: toyTask(), engines: countingEngines(made) });
  await t.run();
  await t.close();
  const engine = made[0];
  // batch 2 rows x n 4 = 8 episodes per iteration; ppoEpochs 1 x 2 mini-batches = 2 steps per iteration.
  assert.equal(engine.samples, 2 * 8);
  assert.equal(engine.steps, 2 * 2);
  // Every datum trains exactly the sampled action tokens: "7" + end of turn, or "seven" + end of turn.
  const actionLengths = new Set([tokenizer.encode("7").length + 1, tokenizer.encode("seven").length + 1]);
  for (const batch of engine.batches)
    for (const d of batch)
      assert.ok(
        actionLengths.has(d.weights.filter((w) => w > 0).length),
        `${d.weights.filter((w) => w > 0).length} weighted tokens`,
      );
  const metrics = readFileSync(join(out, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);
  assert.deepEqual(
    metrics.map((m) => m.iteration),
    [1, 2],
  );
  assert.equal(metrics[0].prefix_hit_rate, 0, "an engine without a prefix cache reports 0");
  assert.deepEqual(JSON.parse(readFileSync(join(out, "checkpoints", "step-2", "policy", "weights.json"), "utf8")), {
    steps: 4,
  });

  // Resume from step-2: the policy is loaded from the checkpoint and goes on counting.
  const more: CountingEngine[] = [];
  const r = await Trainer.open(config(3), { out, task: toyTask(), engines: countingEngines(more), resume: true });
  assert.equal(r.iteration, 2);
  assert.equal(more[0].steps, 4);
  await r.run();
  await r.close();
  assert.equal(more[0].steps, 6);
});

test("per-step rewards that algorithm.processRewardWeight 0 ignores are noted once; with a weight, not at all", async () => {
  // The counting engine never calls env_step, so every household step is invalid and costs invalidPenalty.
  const task = createHouseholdTask({ train: 4, val: 2, test: 2, invalidPenalty: 0.1 });
  const run = async (processRewardWeight: number) => {
    const cfg = parseConfig({
      rollout: { n: 2, maxTurns: 3, maxTokensPerTurn: 8, maxTotalTokens: 1536 },
      algorithm: { processRewardWeight, filterConstantGroups: false },
      train: { iterations: 2, batchSize: 2, valEvery: 0, checkpointEvery: 0, samplesPerIteration: 0 },
    });
    const lines: string[] = [];
    const t = await Trainer.open(cfg, {
      out: tempDir(),
      task,
      engines: countingEngines([]),
      log: (l) => lines.push(l),
    });
    await t.run();
    await t.close();
    return lines.filter((l) => l.includes("processRewardWeight"));
  };
  const ignored = await run(0);
  assert.equal(ignored.length, 1, "one note for two iterations");
  assert.match(ignored[0], /invalidPenalty.*processRewardWeight is 0/);
  assert.deepEqual(await run(1), []);
});
