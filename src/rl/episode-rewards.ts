/**
 * Splits a trajectory's step rewards into the outcome and per-step process
 * rewards. ToolEnv reports them apart in `info.rewards = { process, outcome }`;
 * for other envs the last step's reward is the outcome and earlier steps'
 * rewards are process rewards. An episode's score (the outcome estimators'
 * scalar) is outcome + processWeight·Σ process.
 */
import type { Trajectory } from "../agent/trajectory.js";

export interface EpisodeRewards {
  outcome: number;
  /** One per step. */
  process: number[];
}

export function episodeRewards(t: Trajectory): EpisodeRewards {
  let outcome = 0;
  const process = t.steps.map((s, i) => {
    const r = (s.info as { rewards?: { process?: number; outcome?: number } }).rewards;
    if (r) {
      outcome += r.outcome ?? 0;
      return r.process ?? 0;
    }
    if (i === t.steps.length - 1) {
      outcome += s.reward;
      return 0;
    }
    return s.reward;
  });
  return { outcome, process };
}

export interface ScoredEpisode extends EpisodeRewards {
  trajectory: Trajectory;
  score: number;
}

export function scoreEpisode(t: Trajectory, processWeight: number): ScoredEpisode {
  const r = episodeRewards(t);
  return { trajectory: t, ...r, score: r.outcome + processWeight * r.process.reduce((s, x) => s + x, 0) };
}

/** True when some step of the trajectory carries a non-zero process reward (e.g. the household's invalidPenalty). */
export function hasProcessRewards(t: Trajectory): boolean {
  return episodeRewards(t).process.some((r) => r !== 0);
}
