/**
 * A judge reward's part of an iteration's metrics.jsonl line and log: with a judge, `reward` and
 * `reward_std` are over the judged trajectories' rewards, (1 − w)·reward + w·judge (when the judge
 * failed every group they stay the code reward's, and judge_groups_dropped says so); `code_reward`
 * is the reward without the judge; then the judge's mean score and its costs.
 */
import type { Trajectory } from "../agent/trajectory.js";
import type { JudgedBatch } from "./prepare-batch.js";

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

function std(xs: number[]): number {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
}

export function judgeMetrics(j: JudgedBatch, trajectories: Trajectory[]): Record<string, number> {
  const s = j.stats;
  return {
    ...(j.rewards.length > 0
      ? { reward: mean(j.rewards), reward_std: std(j.rewards), judge_score: mean(j.scores) }
      : {}),
    code_reward: mean(trajectories.map((t) => t.reward)),
    judge_calls: s.calls,
    judge_failed_calls: s.failedCalls,
    judge_cache_hits: s.cacheHits,
    judge_prompt_tokens: s.promptTokens,
    judge_completion_tokens: s.completionTokens,
    judge_s: s.seconds,
    judge_groups_dropped: s.groupsDropped,
  };
}

/** One log line when the judge failed groups: how many, and the first one's row and reason. */
export function judgeDropNote(it: number, j: JudgedBatch): string | undefined {
  if (j.dropped.length === 0) return undefined;
  const total = j.stats.groupsJudged + j.stats.groupsDropped;
  const first = j.dropped[0];
  return `iteration ${it}: the judge failed ${j.dropped.length} of ${total} groups, left out of the batch; first: row ${first.rowIndex + 1} of the batch: ${first.reason}`;
}
