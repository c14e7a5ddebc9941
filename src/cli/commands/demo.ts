/**
 * `agent-r1 demo`: a short RL run on the local engine. A tiny random
 * model is rewarded for answering with digits; group-normalized advantages and
 * the importance-sampling loss raise the reward within a minute on 2 cores.
 * (The main job, RL on an agent task, is `agent-r1 main`: ./main-job.ts.)
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { initModel } from "../../model/init-model.js";
import { LocalEngine } from "../../engine/local/local-engine.js";
import { encodeChat } from "../../model/chat.js";
import type { Datum } from "../../engine/types.js";
import { noPositionals, optionalInt, optionalNumber, parseFlags, type FlagSpec } from "../args.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";
import type { Command } from "../command.js";
import { checkOutDir, clearDirectory } from "../../util/out-path.js";
import { forceFlag } from "./force-flag.js";

/** What a demo writes into its --out. */
const DEMO_ENTRIES = ["model", "final"];

const D = { iterations: 40, group: 16, seed: 0 };

const FLAGS: FlagSpec = {
  out: {
    type: "string",
    value: "DIR",
    default: "runs/demo",
    description: "where the model and the final weights go: new, empty, or an earlier demo's (its model is reused)",
  },
  iterations: { type: "string", value: "N", description: "RL iterations", fallback: D.iterations },
  group: { type: "string", value: "N", description: "samples per iteration (one group)", fallback: D.group },
  seed: { type: "string", value: "N", description: "seed of the model's weights and of sampling", fallback: D.seed },
  ...forceFlag("replace an --out that is not an earlier demo's"),
  ...BACKEND_FLAG,
};

/** Share of the generated characters that are digits (ignoring special tokens). */
export function digitReward(text: string): number {
  const chars = [...text.replace(/\s/g, "")];
  return chars.length === 0 ? 0 : chars.filter((c) => c >= "0" && c <= "9").length / chars.length;
}

export const demoCommand: Command = {
  name: "demo",
  summary: "a short RL run that measurably raises a tiny model's reward",
  usage: "agent-r1 demo [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("demo", argv, FLAGS);
    noPositionals("demo", positionals);
    const iterations = optionalInt("demo", flags, "iterations", 1) ?? D.iterations;
    const group = optionalInt("demo", flags, "group", 1) ?? D.group;
    const seed = optionalNumber("demo", flags, "seed") ?? D.seed;
    const backend = parseBackendFlag("demo", flags);
    const out = flags.out as string,
      modelDir = join(out, "model");
    // An earlier demo's directory (its model/ and final/ only) is reused; anything else follows the --out rule.
    const earlierDemo =
      existsSync(out) && statSync(out).isDirectory() && readdirSync(out).every((n) => DEMO_ENTRIES.includes(n));
    if (!earlierDemo && checkOutDir(out, { command: "demo", force: flags.force === true }) === "replace")
      clearDirectory(out);
    if (!existsSync(join(modelDir, "config.json"))) await initModel({ preset: "tiny", out: modelDir, seed });
    const engine = await LocalEngine.load(modelDir, { backend });
    announceBackend(backend, io);
    const prompt = encodeChat(engine.tokenizer, [{ role: "user", content: "Say a number." }]);
    io.out(
      `demo: tiny model (${modelDir}), ${iterations} iterations x ${group} samples, reward = share of digits in the answer; ${engine.describe()}`,
    );
    const rewards: number[] = [];
    for (let it = 0; it < iterations; it++) {
      const t0 = Date.now();
      const { sequences } = await engine.sample(prompt, {
        n: group,
        maxTokens: 12,
        temperature: 1,
        seed: seed * 100003 + it,
      });
      const r = sequences.map((s) => digitReward(engine.tokenizer.decode(s.tokens, { skipSpecialTokens: true })));
      const mean = r.reduce((a, b) => a + b, 0) / r.length;
      const std = Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / r.length);
      rewards.push(mean);
      if (std > 1e-6) {
        const datums: Datum[] = sequences.map((s, i) => {
          const full = [...prompt, ...s.tokens];
          const n = full.length - 1,
            p = prompt.length - 1;
          const adv = (r[i] - mean) / std;
          return {
            tokens: full.slice(0, -1),
            targetTokens: full.slice(1),
            weights: Array.from({ length: n }, (_, t) => (t >= p ? 1 : 0)),
            advantages: Array.from({ length: n }, (_, t) => (t >= p ? adv : 0)),
            logprobs: Array.from({ length: n }, (_, t) => (t >= p ? s.logprobs[t - p] : 0)),
          };
        });
        await engine.forwardBackward(datums, { type: "importance_sampling" });
        await engine.optimStep({ lr: 1e-2 });
      }
      io.out(`iter ${String(it + 1).padStart(3)}  reward ${mean.toFixed(3)}  (${Date.now() - t0} ms)`);
    }
    const k = Math.max(1, Math.floor(iterations / 5));
    const first = rewards.slice(0, k).reduce((a, b) => a + b, 0) / k;
    const last = rewards.slice(-k).reduce((a, b) => a + b, 0) / k;
    await engine.save(join(out, "final"));
    io.out(
      `mean reward: first ${k} iterations ${first.toFixed(3)} → last ${k} ${last.toFixed(3)}; model saved to ${join(out, "final")}`,
    );
    engine.dispose();
  },
};
