/**
 * Playing a task's rows with the current policy and scoring the episodes: the
 * validation stage of training and the `eval` command share this.
 */
import { rollout, type RolloutResult } from "../agent/rollout.js";
import type { Trajectory } from "../agent/trajectory.js";
import type { Engine } from "../engine/types.js";
import type { Tokenizer } from "../model/tokenizer.js";
import type { EpisodeScore, Task, TaskRow } from "../tasks/types.js";

export interface EpisodeSummary {
  episodes: number;
  failed: number;
  reward: number;
  em: number;
  f1: number;
  format: number;
  turns: number;
  toolCalls: number;
  toolErrors: number;
  /** Action tokens per episode (response length). */
  responseTokens: number;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export function summarizeEpisodes(trajectories: Trajectory[], scores: EpisodeScore[], failed: number): EpisodeSummary {
  return {
    episodes: trajectories.length,
    failed,
    reward: mean(trajectories.map((t) => t.reward)),
    em: mean(scores.map((s) => s.em)),
    f1: mean(scores.map((s) => s.f1)),
    format: mean(scores.map((s) => s.formatOk)),
    turns: mean(trajectories.map((t) => t.metrics.turns)),
    toolCalls: mean(trajectories.map((t) => t.metrics.toolCalls)),
    toolErrors: mean(trajectories.map((t) => Object.values(t.metrics.toolErrors).reduce((a, b) => a + b, 0))),
    responseTokens: mean(trajectories.map((t) => t.metrics.actionTokens)),
  };
}

export interface PlayOptions {
  n?: number;
  greedy?: boolean;
  temperature?: number;
  topP?: number;
  maxTurns: number;
  maxTokensPerTurn: number;
  maxTotalTokens: number;
  seed: number;
}

export async function playRows(engine: Engine, tokenizer: Tokenizer, task: Task, rows: TaskRow[], o: PlayOptions): Promise<{ result: RolloutResult; scores: EpisodeScore[]; summary: EpisodeSummary }> {
  const result = await rollout(engine, (row: TaskRow) => task.makeEnv(row), rows, {
    n: o.n ?? 1,
    tokenizer,
    seed: o.seed,
    temperature: o.greedy ? 0 : o.temperature,
    topP: o.greedy ? 1 : o.topP,
    maxTurns: o.maxTurns,
    maxTokensPerTurn: o.maxTokensPerTurn,
    maxTotalTokens: o.maxTotalTokens,
  });
  const scores = result.trajectories.map((t) => task.score(t, rows[t.rowIndex], tokenizer));
  return { result, scores, summary: summarizeEpisodes(result.trajectories, scores, result.metrics.failed) };
}
