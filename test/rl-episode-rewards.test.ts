import { test } from "node:test";
import assert from "node:assert/strict";
import { TrajectoryBuilder } from "../src/agent/trajectory.js";
import { episodeRewards } from "../src/rl/episode-rewards.js";

const step = (reward: number, info: Record<string, unknown> = {}) => ({
  action: [1],
  logprobs: [0],
  observation: [],
  stopReason: "stop" as const,
  reward,
  done: false,
  toolCalls: [],
  info,
  timing: { sampleMs: 0, envMs: 0 },
});

test("ToolEnv's split is used as given; otherwise the last step's reward is the outcome", () => {
  const a = new TrajectoryBuilder("a", 0, 0);
  a.add([0], step(0.1, { rewards: { process: 0.1, outcome: 0 } }));
  a.add([0, 1], step(1, { rewards: { process: 0, outcome: 1 } }));
  assert.deepEqual(episodeRewards(a.finish("done")), { outcome: 1, process: [0.1, 0] });
  const b = new TrajectoryBuilder("b", 0, 0);
  b.add([0], step(0.2));
  b.add([0, 1], step(0.5));
  assert.deepEqual(episodeRewards(b.finish("done")), { outcome: 0.5, process: [0.2, 0] });
});
