/**
 * Playing a task's rows with the current policy and scoring the episodes: the
 * validation stage of training and the `eval` command share this.
 */
import { rollout, type RolloutResult } from "../agent/rollout.js";
import type { Trajectory } from "../agent/trajectory.js";
import type { Engine } from "../engine/types.js";
import type { CompactionOptions } from "../agent/compaction-options.js";
import type { Tokenizer } from "../model/tokenizer.js";
import type { EpisodeScore, Task, TaskRow } from "../tasks/types.js";
import { AgentR1Error, InputError } from "../util/errors.js";

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
  agentSampling?: "recipe" | "agent";
  maxTurns: number;
  maxTokensPerTurn: number;
  maxTotalTokens: number;
  /** Summarize and continue past compaction.atTokens (rollout.compaction); not for tasks that play their own way. */
  compaction?: CompactionOptions;
  seed: number;
  /** Lines about episodes that failed (an agent task logs them as they happen). */
  log?: (line: string) => void;
}

export async function playRows(
  engine: Engine,
  tokenizer: Tokenizer,
  task: Task,
  rows: TaskRow[],
  o: PlayOptions,
): Promise<{ result: RolloutResult; scores: EpisodeScore[]; summary: EpisodeSummary }> {
  const settings = {
    n: o.n ?? 1,
    seed: o.seed,
    temperature: o.greedy ? 0 : o.temperature,
    topP: o.greedy ? 1 : o.topP,
    agentSampling: o.agentSampling,
    maxTurns: o.maxTurns,
    maxTokensPerTurn: o.maxTokensPerTurn,
    maxTotalTokens: o.maxTotalTokens,
  };
  checkCompactionTask(task, o.compaction);
  const result = task.play
    ? await task.play(engine, rows, { ...settings, log: o.log })
    : await rollout(engine, (row: TaskRow) => task.makeEnv(row), rows, {
        ...settings,
        tokenizer,
        ...(o.compaction ? { compaction: o.compaction } : {}),
      });
  const scores = result.trajectories.map((t) => task.score(t, rows[t.rowIndex], tokenizer));
  return { result, scores, summary: summarizeEpisodes(result.trajectories, scores, result.metrics.failed) };
}

/** Compaction runs in the built-in loop: a task that plays its own way (an agent of the user's) keeps its own context. */
export function checkCompactionTask(task: Task, compaction: CompactionOptions | undefined): void {
  if (compaction && task.play)
    throw new InputError(
      `rollout.compaction: task '${task.name}' plays its episodes its own way (an agent through the gateway), which keeps its own context`,
      "drop rollout.compaction, or give the task as tools or makeEnv so the built-in loop plays it",
    );
}

/** An episode an agent of the user's failed (it threw, timed out, returned no reward), not an env. */
export const isAgentFailure = (t: Trajectory) => t.error?.name === "AgentError";

/** A row as a failure names it: `calc #7` for Agent-R1 rows, else the start of its JSON. */
function rowLabel(row: TaskRow | undefined): string {
  if (row === undefined) return "?";
  if (typeof row.data_source === "string") return `${row.data_source} #${row.extra_info?.index ?? "?"}`;
  let text: string;
  try {
    text = JSON.stringify(row) ?? "?";
  } catch {
    text = "?";
  }
  return text.length > 80 ? `${text.slice(0, 80)}...` : text;
}

/**
 * Where and why an episode failed, for one log line: `row 2 of the batch (calc #7): env reset: ...`,
 * or `row 1 of the batch ({"question":"What is 3 plus 4?"...}): agent: fetch failed` (first line only).
 */
export function describeFailure(rows: TaskRow[], t: Trajectory, rowsLabel?: string): string {
  const stage = isAgentFailure(t) ? "agent:" : `env ${t.error?.stage ?? "?"}:`,
    message = (t.error?.message ?? "unknown error").split("\n")[0];
  return `row ${t.rowIndex + 1}${rowsLabel ? ` ${rowsLabel}` : ""} (${rowLabel(rows[t.rowIndex])}): ${message.startsWith(stage) ? message : `${stage} ${message}`}`;
}

/**
 * Played rows where every episode failed: an error naming the first failure, since a summary of
 * nothing would read as a score of 0. Otherwise a note about the failed ones (or undefined).
 */
export function checkPlayed(what: string, rows: TaskRow[], result: RolloutResult): string | undefined {
  const failed = result.failed.length,
    total = failed + result.trajectories.length;
  if (failed === 0) return undefined;
  const first = describeFailure(rows, result.failed[0]);
  if (result.trajectories.length === 0) {
    const tooLong = /maxTotalTokens/.test(result.failed[0].error?.message ?? "");
    throw new AgentR1Error(
      `${what}: all ${total} episodes failed; first: ${first}`,
      tooLong
        ? "the prompt does not fit the episode's token limit: raise it if the model's max_position_embeddings allows, or shorten the prompts"
        : isAgentFailure(result.failed[0])
          ? "fix the agent"
          : "fix the task's environment",
    );
  }
  return `${what}: ${failed} of ${total} episodes failed and are not in the summary; first: ${first}`;
}
