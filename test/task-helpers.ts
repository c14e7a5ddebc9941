/** Helpers for the task tests: play a demonstration through a task's env, or replay demonstrations as a scripted model. */
import assert from "node:assert/strict";
import { rollout, type RolloutResult } from "../src/agent/rollout.js";
import type { ChatMessage } from "../src/model/chat-template.js";
import type { Task, TaskRow } from "../src/tasks/types.js";
import { actionOf, ScriptedEngine, assistantTurns, chatmlTokenizer } from "../src/testing/index.js";

export interface Played {
  reward: number;
  done: boolean;
  toolCalls: number;
  /** Text of every tool result the env returned. */
  toolText: string;
}

/**
 * Resets a fresh env with the row and steps it with the demonstration's
 * assistant turns; every observation must equal the demonstration's next
 * messages (the demonstration holds the tools' real output).
 */
export async function playDemo(task: Task, row: TaskRow, demo: ChatMessage[]): Promise<Played> {
  const env = task.makeEnv(row);
  const first = await env.reset(row);
  assert.deepEqual(first, { messages: demo.slice(0, 2) }, "the demonstration starts with the row's prompt");
  let turn = 0,
    reward = 0,
    done = false,
    toolCalls = 0,
    toolText = "";
  for (let i = 2; i < demo.length;) {
    assert.equal(demo[i].role, "assistant", `message ${i}`);
    const r = await env.step(actionOf(demo[i].content, turn++));
    let j = i + 1;
    while (j < demo.length && demo[j].role !== "assistant") j++;
    assert.deepEqual(r.observation, { messages: demo.slice(i + 1, j) }, `observation after turn ${turn - 1}`);
    for (const c of r.info.toolCalls ?? []) {
      assert.ok(c.ok, `tool call failed: ${c.text}`);
      toolCalls++;
      toolText += `${c.text}\n`;
    }
    reward = r.reward;
    done = r.done;
    i = j;
  }
  return { reward, done, toolCalls, toolText };
}

/** A rollout whose "model" replays each row's demonstration turn by turn (ChatML tokenizer). */
export async function replayRollout(
  task: Task,
  rows: TaskRow[],
  demos: ChatMessage[][],
  maxTurns = 8,
): Promise<RolloutResult> {
  const tok = chatmlTokenizer();
  const engine = new ScriptedEngine(tok, (c) => {
    const k = rows.findIndex((r) => c.text.includes(r.prompt[1].content));
    const turns = demos[k].filter((m) => m.role === "assistant");
    const t = assistantTurns(c.text);
    return `${turns[Math.min(t, turns.length - 1)].content}<|im_end|>`;
  });
  return rollout(engine, (row) => task.makeEnv(row), rows, { maxTurns, seed: 1 });
}
