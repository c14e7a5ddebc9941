/**
 * End to end: a random tiny model, a ToolEnv with two tools, a batch of
 * rollouts, and one trajectory printed for people. Run it with
 *   node --import tsx examples/agent/run-rollout.ts
 * (a random model rarely writes a valid call; the point is the plumbing).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initModel, LocalEngine } from "agent-r1";
import { ToolEnv, chatSetup, formatTrajectory, rollout } from "agent-r1/agent";
import { calculator } from "./calculator-tool.js";
import { lookup } from "./lookup-tool.js";

const root = mkdtempSync(join(tmpdir(), "agent-r1-example-"));
const dir = join(root, "tiny");
await initModel({ preset: "tiny", out: dir });
const engine = await LocalEngine.load(dir, { workers: 0 });

const rows = [
  {
    prompt: [{ role: "user", content: "Where was the founder of Kalomi born? Answer in <answer></answer>." }],
    reward_model: { ground_truth: "Lusk" },
  },
  {
    prompt: [{ role: "user", content: "What is 12 * (3 + 4)? Answer in <answer></answer>." }],
    reward_model: { ground_truth: "84" },
  },
];
const makeEnv = () =>
  new ToolEnv({
    tools: [calculator, lookup],
    outcomeReward: ({ answer, groundTruth }) => (answer?.trim() === groundTruth ? 1 : 0),
  });

const res = await rollout(engine, makeEnv, rows, {
  n: 2,
  chat: chatSetup(engine.tokenizer),
  maxTurns: 3,
  maxTokensPerTurn: 32,
  seed: 1,
});
console.log(JSON.stringify(res.metrics));
console.log(formatTrajectory(res.trajectories[0], engine.tokenizer));
console.log("prefix cache hit rate", (await engine.stats()).prefixHitRate.toFixed(2));
await engine.dispose();
rmSync(root, { recursive: true, force: true });
