/**
 * The outcome reward and the per-episode score shared by the tasks: a judge
 * says whether an answer is correct (and its F1), the format component
 * (rewards/format.ts) shapes it.
 */
import type { OutcomeInput } from "../../agent/tool-env.js";
import type { Trajectory } from "../../agent/trajectory.js";
import type { Tokenizer } from "../../model/tokenizer.js";
import { extractAnswer, formatScore, isAnswerTurn, rewardWithFormat } from "../../rewards/format.js";
import type { EpisodeScore, TaskRow } from "../types.js";

/** Correctness (0/1) and F1 of an answer against the row's ground truth. */
export type Judge = (answer: string, groundTruth: string) => { correct: number; f1: number };

export function outcomeReward(
  judge: Judge,
  answer: string | undefined,
  groundTruth: string,
  actions: readonly string[],
): number {
  const correct = answer === undefined ? 0 : judge(answer, groundTruth).correct;
  return rewardWithFormat(correct, formatScore(actions));
}

/** ToolEnv's outcomeReward for a task. */
export function envOutcome(judge: Judge): (o: OutcomeInput<TaskRow>) => number {
  return ({ answer, groundTruth, actions }) => outcomeReward(judge, answer, String(groundTruth ?? ""), actions);
}

/**
 * Each action's text as the env saw it: decoded without a final end-of-turn token (as AgentFlow does);
 * turns a flow asked for itself (a compaction's summary) never reached the env and are left out.
 */
export function actionTexts(t: Trajectory, tokenizer: Tokenizer): string[] {
  const eos = tokenizer.eosTokenId;
  return t.steps
    .filter((s) => s.info.flowTurn === undefined)
    .map((s) =>
      tokenizer.decode(s.action.length > 0 && s.action[s.action.length - 1] === eos ? s.action.slice(0, -1) : s.action),
    );
}

function recordedOutcome(t: Trajectory): number | undefined {
  const rewards = t.steps[t.steps.length - 1]?.info.rewards as { outcome?: unknown } | undefined;
  return typeof rewards?.outcome === "number" ? rewards.outcome : undefined;
}

/**
 * em/f1 of the answer in the last action when the episode ended by itself
 * (endReason "done"); formatOk = the last action is a well-formed answer turn;
 * reward = the outcome the env recorded (recomputed from the decoded actions if absent; 0 when cut off).
 */
export function scoreEpisode(t: Trajectory, row: TaskRow, tokenizer: Tokenizer, judge: Judge): EpisodeScore {
  const gold = row.reward_model.ground_truth;
  if (t.endReason !== "done" || t.steps.length === 0) return { reward: 0, em: 0, f1: 0, formatOk: 0 };
  const actions = actionTexts(t, tokenizer);
  const last = actions[actions.length - 1];
  const answer = extractAnswer(last);
  const judged = answer === undefined ? { correct: 0, f1: 0 } : judge(answer, gold);
  return {
    reward: recordedOutcome(t) ?? outcomeReward(judge, answer, gold, actions),
    em: judged.correct,
    f1: judged.f1,
    formatOk: isAnswerTurn(last) ? 1 : 0,
  };
}
