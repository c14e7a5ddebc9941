/**
 * A batch of trajectories through a judge reward: they are grouped by row (the rollout.n samples of
 * one prompt, in batch order), each rendered as text (render-trajectory.ts) with its row's task,
 * the groups scored (judge.ts), and the scores put back on the trajectories they belong to. A
 * trajectory of a dropped group gets no score.
 */
import type { Trajectory } from "../agent/trajectory.js";
import type { ChatMessage } from "../model/chat-template.js";
import type { JudgeReward, JudgeStats } from "./judge.js";
import { renderTask, renderTrajectory, type TextDecoderLike } from "./render-trajectory.js";

export interface JudgedTrajectories {
  /** Per trajectory given, its judge score in [0, 1]; undefined where its group was dropped. */
  scores: (number | undefined)[];
  stats: JudgeStats;
  /** The dropped groups: their row (index into `rows`) and the judge's last failure. */
  dropped: { rowIndex: number; reason: string }[];
}

/** Trajectory indices by row, rows in the order they first appear. */
function groupsByRow(trajectories: readonly Trajectory[]): Map<number, number[]> {
  const out = new Map<number, number[]>();
  trajectories.forEach((t, i) => {
    const members = out.get(t.rowIndex);
    if (members) members.push(i);
    else out.set(t.rowIndex, [i]);
  });
  return out;
}

export async function judgeTrajectories(
  judge: JudgeReward,
  trajectories: readonly Trajectory[],
  rows: readonly { prompt: ChatMessage[] }[],
  tokenizer: TextDecoderLike,
): Promise<JudgedTrajectories> {
  const budget = judge.config.maxChars;
  const groups = [...groupsByRow(trajectories)];
  const questions = groups.map(([row, members]) => ({
    task: renderTask(rows[row]?.prompt ?? [], budget),
    trajectories: members.map((i) => renderTrajectory(trajectories[i], tokenizer, budget)),
  }));
  const { results, stats } = await judge.scoreGroups(questions);
  const scores = new Array<number | undefined>(trajectories.length).fill(undefined);
  const dropped: JudgedTrajectories["dropped"] = [];
  groups.forEach(([row, members], g) => {
    const r = results[g];
    if ("scores" in r) members.forEach((i, k) => (scores[i] = r.scores[k]));
    else dropped.push({ rowIndex: row, reason: r.dropped });
  });
  return { scores, stats, dropped };
}
