/**
 * Plays a compaction-trained model greedily (or sampled) on the first questions of a split (test by default) of the
 * twelve-hop company task, compacting as recipes/multihop-compaction.yaml does, and prints each
 * episode's question list, reward, summaries and final turn (docs/compaction.md); with --classify, only
 * how many episodes end in each failure class of compaction-failures.ts.
 *   node --import tsx dev/experiments/ledger-probe.ts --model MODEL_DIR [--rows 8] [--max-tokens-per-turn 160]
 *     [--max-turns 24] [--temperature 0] [--split test] [--classify]
 */
import { parseArgs } from "node:util";
import { rollout } from "../../src/agent/rollout.js";
import { COMPACTION_DEFAULTS } from "../../src/agent/compaction-options.js";
import { LocalEngine } from "../../src/engine/local/local-engine.js";
import { createMultihopTask } from "../../src/tasks/multihop/index.js";
import { questionNames } from "../../src/tasks/multihop/compaction-expert.js";
import { stepContext } from "../../src/agent/trajectory.js";
import { required } from "./usage.js";
import { answeredRight, classifyEpisode, classTable, searchesOf } from "./compaction-failures.js";

const USAGE = "node --import tsx dev/experiments/ledger-probe.ts --model MODEL_DIR [flags]";
const { values: a } = parseArgs({
  options: {
    model: { type: "string" },
    rows: { type: "string", default: "8" },
    "max-tokens-per-turn": { type: "string", default: "160" },
    temperature: { type: "string", default: "0" },
    split: { type: "string", default: "test" },
    "max-turns": { type: "string", default: "24" },
    classify: { type: "boolean", default: false },
  },
});
const engine = await LocalEngine.load(required(a.model, "--model", USAGE));
const tok = engine.tokenizer;
const task = createMultihopTask({ hops: 12, hopsOver: "companies", train: 64, val: 64, test: 64 });
if (!["train", "val", "test"].includes(a.split!)) {
  console.error(`--split must be train, val or test\nusage: ${USAGE}`);
  process.exit(2);
}
const rows = task.rows(a.split as "train" | "val" | "test").slice(0, Number(a.rows));
const res = await rollout(engine, (r) => task.makeEnv(r), rows, {
  maxTurns: Number(a["max-turns"]),
  maxTokensPerTurn: Number(a["max-tokens-per-turn"]),
  maxTotalTokens: 1024,
  temperature: Number(a.temperature),
  tokenizer: tok,
  compaction: { atTokens: 700, keepLast: 1, prompt: COMPACTION_DEFAULTS.prompt },
});
if (a.classify) {
  const classes = res.trajectories.map((t) =>
    classifyEpisode({
      context: tok.decode(stepContext(t, 0)),
      actions: t.steps.map((s) => tok.decode(s.action)),
      searches: t.steps.flatMap((s) => searchesOf(s.toolCalls)),
      correct: answeredRight(t.reward),
      answered: t.endReason === "done",
    }),
  );
  console.log(`${a.model} ${a.split} (${classes.length} episodes): ${classTable(classes)}`);
} else
  for (const t of res.trajectories) {
    const names = questionNames(tok.decode(stepContext(t, 0)));
    console.log(`--- ${names.join(", ")}\n    reward ${t.reward} ${t.endReason}`);
    for (const s of t.steps)
      if (s.info.flowTurn === "compaction" || s === t.steps[t.steps.length - 1])
        console.log(`    ${tok.decode(s.action).replace(/\n/g, " ")}`);
  }
await engine.dispose();
