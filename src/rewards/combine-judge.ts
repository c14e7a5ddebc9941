/**
 * A judge's score joined with the task's own reward (the code reward: what the env's reward
 * functions gave), per trajectory:
 *
 *   reward = (1 − weight)·code + weight·judge
 *
 * where code is the episode's score without a judge (outcome + algorithm.processRewardWeight·Σ
 * process rewards) and judge is in [0, 1]. Weight 0 is the code reward alone, 1 the judge alone.
 * On the token rewards this is the outcome scaled by (1 − weight) plus weight·judge, and each
 * process reward scaled by (1 − weight), so they still add up to the episode's score.
 */
import type { ScoredEpisode } from "../rl/episode-rewards.js";

export function combineJudgeReward(code: number, judge: number, weight: number): number {
  return (1 - weight) * code + weight * judge;
}

/** The episode with the judge's score joined in (see the header). */
export function withJudgeScore(e: ScoredEpisode, judge: number, weight: number): ScoredEpisode {
  const keep = 1 - weight;
  return {
    trajectory: e.trajectory,
    outcome: combineJudgeReward(e.outcome, judge, weight),
    process: e.process.map((p) => keep * p),
    score: combineJudgeReward(e.score, judge, weight),
  };
}
