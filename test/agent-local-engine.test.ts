/**
 * The runtime on the real local engine (tiny random model, one thread):
 * rollout with n=2, contexts that extend each other, action tokens that are
 * the engine's own samples (their logprobs re-scored in place), and prefix
 * cache hits for every turn after the first.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { initModel } from "../src/model/init-model.js";
import { LocalEngine } from "../src/engine/local/local-engine.js";
import type { Engine, SamplingParams } from "../src/engine/types.js";
import { rollout } from "../src/agent/rollout.js";
import { chatSetup } from "../src/agent/chat-setup.js";
import { stepContext } from "../src/agent/trajectory.js";
import { GuessNumberEnv } from "../examples/agent/guess-number-env.js";

let root: string;
let engine: LocalEngine;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-r1-agent-"));
  await initModel({ preset: "tiny", out: path.join(root, "tiny"), seed: 5 });
  engine = await LocalEngine.load(path.join(root, "tiny"), { workers: 0 });
});

after(async () => {
  await engine?.dispose();
  fs.rmSync(root, { recursive: true, force: true });
});

test("rollout on the local engine: contexts extend, tokens are the samples, the prefix cache is hit", async () => {
  const prompts: number[][] = [];
  const recording: Engine = Object.assign(Object.create(engine) as LocalEngine, {
    sample: (p: number[], params?: SamplingParams) => (prompts.push(p.slice()), engine.sample(p, params)),
  });
  const before = await engine.stats();
  // A random model never guesses in format, so every turn gets a reply and the loop runs to maxTurns.
  const res = await rollout(
    recording,
    () => new GuessNumberEnv(),
    [
      { secret: 3, max: 9 },
      { secret: 8, max: 9 },
    ],
    {
      n: 2,
      chat: chatSetup(engine.tokenizer),
      maxTurns: 3,
      maxTokensPerTurn: 6,
      seed: 17,
    },
  );
  const after = await engine.stats();

  assert.equal(res.trajectories.length, 4);
  let expectReused = 0;
  for (const t of res.trajectories) {
    assert.equal(t.steps.length, 3);
    assert.deepEqual([t.endReason, t.steps.map((s) => s.extendsPrevious)], ["max_turns", [false, true, true]]);
    for (let k = 1; k < t.steps.length; k++) {
      const prev = stepContext(t, k - 1),
        prevAction = t.steps[k - 1].action;
      assert.deepEqual(
        stepContext(t, k).slice(0, prev.length + prevAction.length),
        [...prev, ...prevAction],
        `${t.id} turn ${k} extends turn ${k - 1}`,
      );
      assert.ok(
        prompts.some((p) => p.length === stepContext(t, k).length && p.every((x, i) => x === stepContext(t, k)[i])),
        "the engine sampled from this context",
      );
      expectReused += prev.length + prevAction.length - 1; // the newest sampled token is not cached
    }
    // Re-scoring the final sequence gives back each action's sampling logprobs, at the action's positions.
    const full = [...stepContext(t, 2), ...t.steps[2].action];
    const [scored] = await engine.computeLogprobs([full]);
    t.steps.forEach((s, k) => {
      const at = stepContext(t, k).length;
      s.logprobs.forEach((lp, i) =>
        assert.ok(
          Math.abs((scored[at + i] as number) - lp) < 1e-3,
          `${t.id} step ${k} token ${i}: ${scored[at + i]} vs ${lp}`,
        ),
      );
    });
  }
  const reused = after.prefixCache.reusedTokens - before.prefixCache.reusedTokens;
  assert.ok(reused >= expectReused, `prefix cache reused ${reused} tokens, expected at least ${expectReused}`);
  assert.ok(after.prefixHitRate > 0);
  const prefilled = after.scheduler.prefillTokens - before.scheduler.prefillTokens;
  const sent = prompts.reduce((s, p) => s + p.length, 0);
  assert.ok(prefilled < sent / 2, `prefilled ${prefilled} of ${sent} prompt tokens`);
});
