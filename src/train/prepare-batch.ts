/**
 * From finished trajectories to training datums. Each episode is scored once
 * (with a judge reward, the judge's score joined in and the groups the judge
 * failed on dropped: src/rewards/judge.ts); the filters drop constant-reward
 * groups and mask cut-off episodes; the kept trajectories are laid out as
 * datums once; then everything is computed on those datum positions with the
 * action mask (as verl's estimators work on a response mask): token rewards
 * (outcome + weighted process rewards, optionally minus β·KL), reference
 * logprobs, critic values, advantages. Last, with a sampler that is not the
 * learner, the learner's corrections: truncated importance weights
 * (src/rl/tis.ts) and off-policy masks (src/rl/off-policy-mask.ts). With distillation
 * (algorithm.distill), the teacher scores the kept datums and its per-token advantage
 * (src/rl/distill.ts) is added to the estimator's before those corrections; every group is kept then
 * (each carries the teacher's signal), and with taskReward false the estimator is not run.
 */
import type { Trajectory } from "../agent/trajectory.js";
import type { Datum, ValueDatum } from "../engine/types.js";
import { actionMask, batchDatums, type BatchDatums } from "../rl/datums.js";
import { scoreEpisode, type ScoredEpisode } from "../rl/episode-rewards.js";
import { combineRewards } from "../rl/process-rewards.js";
import { dropUniformGroups, maskOverlong } from "../rl/filters.js";
import { applyKlToRewards } from "../rl/kl.js";
import { advantageEstimator, type AdvantageOutput } from "../rl/advantages/index.js";
import { applyTis, type TisMetrics } from "../rl/tis.js";
import { offPolicyKeep, withKeptWeights, type OffPolicyMaskMetrics } from "../rl/off-policy-mask.js";
import type { TrainConfig } from "./config.js";
import type { JudgedTrajectories } from "../rewards/judge-trajectories.js";
import type { JudgeStats } from "../rewards/judge.js";
import { combineJudgeReward, withJudgeScore } from "../rewards/combine-judge.js";
import { addAdvantages, distillAdvantages, type DistillMetrics } from "../rl/distill.js";

/** What the batch needs from models: the critic's values and the reference logprobs, per datum position. */
export interface BatchModels {
  /** Per sequence (datum tokens), one value per input position. */
  values?: (sequences: number[][]) => Promise<number[][]>;
  /** Per sequence (datum tokens + last target), logprob of each token given the ones before it. */
  refLogprobs?: (sequences: number[][]) => Promise<(number | null)[][]>;
  /** The same from the policy being trained, at the sampling temperature (for loss.tis and loss.offPolicy). */
  learnerLogprobs?: (sequences: number[][]) => Promise<(number | null)[][]>;
  /** A judge reward: its score per trajectory (none where it failed the group) and its weight against the code reward. */
  judge?: BatchJudge;
  /** With algorithm.distill: the teacher's logprobs, as refLogprobs. */
  teacherLogprobs?: (sequences: number[][]) => Promise<(number | null)[][]>;
}

export interface BatchJudge {
  /** reward = (1 − weight)·code + weight·judge. */
  weight: number;
  score(trajectories: Trajectory[]): Promise<JudgedTrajectories>;
}

/** What the judge did for a batch. */
export interface JudgedBatch {
  stats: JudgeStats;
  /** The groups it failed on (left out of the batch): their row in the iteration's rows, and why. */
  dropped: JudgedTrajectories["dropped"];
  /** Per judged trajectory: the judge's score, and the reward the metrics report, (1 − w)·reward + w·judge. */
  scores: number[];
  rewards: number[];
}

export interface PreparedBatch {
  datums: Datum[];
  valueDatums: ValueDatum[];
  /** Trajectories that entered training (after the filters), and per-batch counts. */
  kept: Trajectory[];
  /** Trajectories dropped with their groups: constant-reward groups, and groups the judge failed on. */
  droppedGroups: number;
  maskedOverlong: number;
  /** Mean per-token KL to the reference (when a reference is used). */
  klRef?: number;
  /** With loss.tis: how the sampler and the learner disagreed, and the importance weights. */
  tis?: TisMetrics;
  /** With loss.offPolicy: the shares of action tokens and sequences the masks gave weight 0. */
  offPolicy?: OffPolicyMaskMetrics;
  /** With a judge reward: its costs, dropped groups and scores. */
  judge?: JudgedBatch;
  /** With distillation: the teacher's mean logprob and the mean reverse KL per action token, and the teacher's wall seconds. */
  distill?: DistilledBatch;
}

export interface DistilledBatch extends DistillMetrics {
  seconds: number;
  /** Whose logprobs stood for the student's: the rollouts' sampling logprobs, or the learner's (loss.tis / loss.offPolicy scored them). */
  student: "sampler" | "learner";
}

/** Each step's rendered state (the env's `info.state`, GiGPO's anchor), or undefined where the env gave none. */
function anchorStates(t: Trajectory): (string | undefined)[] {
  return t.steps.map((s) => (typeof s.info.state === "string" ? s.info.state : undefined));
}

export async function prepareBatch(
  trajectories: Trajectory[],
  cfg: TrainConfig,
  models: BatchModels,
  klCoef: number,
): Promise<PreparedBatch> {
  const alg = cfg.algorithm;
  const coded = trajectories
    .filter((t) => t.metrics.actionTokens > 0)
    .map((t) => scoreEpisode(t, alg.processRewardWeight));
  const judged = models.judge ? await judgeEpisodes(coded, models.judge) : undefined;
  const scored = judged ? judged.episodes : coded;
  const episodes = alg.filterConstantGroups && !alg.distill ? varyingGroups(scored) : scored;
  const overlong = alg.maskOverlong
    ? maskOverlong(episodes.map((e) => (e.trajectory.endReason === "done" ? "stop" : "length")))
    : { weights: undefined, masked: 0 };
  const batch = batchDatums(
    episodes.map((e) => e.trajectory),
    overlong.weights,
  );
  const mask = actionMask(batch.steps);
  const signal = await rewardSignal(episodes, batch, mask, alg, models, klCoef);
  const task = await taskAdvantages(episodes, batch, mask, signal, alg, models);
  const klLossRef = !alg.kl.inReward && klCoef > 0 ? signal.ref : undefined;
  let datums: Datum[] = batch.datums.map((d, j) => ({
    ...d,
    advantages: task.advantages[j],
    ...(klLossRef ? { refLogprobs: onMask(klLossRef[j], mask[j]) } : {}),
  }));
  const learner =
    (cfg.loss.tis || cfg.loss.offPolicy) && models.learnerLogprobs && datums.length > 0
      ? await targetLogprobs(models.learnerLogprobs, datums)
      : undefined;
  const distilled = await distillStage(datums, mask, alg.distill?.coef, models, learner);
  if (distilled) datums = distilled.datums;
  const corrected = learnerCorrections(datums, cfg.loss, learner);
  datums = corrected.datums;
  return {
    datums,
    valueDatums: task.values && task.out ? criticTargets(datums, task.values, task.out) : [],
    kept: episodes.map((e) => e.trajectory),
    droppedGroups: coded.length - episodes.length,
    maskedOverlong: overlong.masked,
    klRef: signal.klRef,
    ...(corrected.tis ? { tis: corrected.tis } : {}),
    ...(corrected.offPolicy ? { offPolicy: corrected.offPolicy } : {}),
    ...(judged ? { judge: judged.batch } : {}),
    ...(distilled ? { distill: distilled.metrics } : {}),
  };
}

/**
 * The task reward's advantages per datum position (the critic asked first when the estimator needs
 * values); all 0 when a distillation trains on the teacher alone (algorithm.distill.taskReward false).
 */
async function taskAdvantages(
  episodes: ScoredEpisode[],
  batch: BatchDatums,
  mask: number[][],
  signal: RewardSignal,
  alg: TrainConfig["algorithm"],
  models: BatchModels,
): Promise<{ advantages: number[][]; values?: number[][]; out?: AdvantageOutput }> {
  if (alg.distill && !alg.distill.taskReward) return { advantages: mask.map((row) => row.map(() => 0)) };
  const estimator = advantageEstimator(alg.estimator);
  const values =
    estimator.needsValues && models.values && batch.datums.length > 0
      ? await models.values(batch.datums.map((d) => d.tokens))
      : undefined;
  const out = estimator.compute({
    trajectories: episodes.map((e, j) => ({
      group: e.trajectory.rowIndex,
      score: signal.scores[j],
      anchors: anchorStates(e.trajectory),
    })),
    trajectory: batch.trajectory,
    mask,
    rewards: signal.rewards,
    values,
    steps: batch.steps,
    gamma: alg.gamma,
    lambda: alg.lambda,
    gigpo: alg.gigpo,
  });
  return { advantages: out.advantages, values, out };
}

/**
 * With algorithm.distill: the teacher scores the datums, and −coef·(s − q) is added to each action
 * token's advantage (src/rl/distill.ts), s being the learner's logprob when the learner scored the
 * rollouts (loss.tis / loss.offPolicy), else the sampling logprob the rollout recorded.
 */
async function distillStage(
  datums: Datum[],
  mask: number[][],
  coef: number | undefined,
  models: BatchModels,
  learner: number[][] | undefined,
): Promise<{ datums: Datum[]; metrics: DistilledBatch } | undefined> {
  if (coef === undefined || datums.length === 0) return undefined;
  if (!models.teacherLogprobs) throw new Error("internal: algorithm.distill is set, but no teacher was opened");
  const t0 = performance.now();
  const teacher = await targetLogprobs(models.teacherLogprobs, datums);
  const seconds = (performance.now() - t0) / 1000;
  const student = learner ?? datums.map((d) => d.logprobs!);
  const res = distillAdvantages({ student, teacher, mask }, coef);
  return {
    datums: addAdvantages(datums, res.advantages),
    metrics: { ...res.metrics, seconds, student: learner ? "learner" : "sampler" },
  };
}

/** The episodes the judge scored, its score joined in (src/rewards/combine-judge.ts); those of groups it failed on left out. */
async function judgeEpisodes(
  coded: ScoredEpisode[],
  judge: BatchJudge,
): Promise<{ episodes: ScoredEpisode[]; batch: JudgedBatch }> {
  const verdict = await judge.score(coded.map((e) => e.trajectory));
  const episodes: ScoredEpisode[] = [];
  const scores: number[] = [];
  const rewards: number[] = [];
  coded.forEach((e, i) => {
    const s = verdict.scores[i];
    if (s === undefined) return;
    episodes.push(withJudgeScore(e, s, judge.weight));
    scores.push(s);
    rewards.push(combineJudgeReward(e.trajectory.reward, s, judge.weight));
  });
  return { episodes, batch: { stats: verdict.stats, dropped: verdict.dropped, scores, rewards } };
}

/**
 * With loss.tis or loss.offPolicy: the learner has scored the rollouts once (`learner`); the off-policy masks are
 * judged on the sampler's logprobs as the rollouts carry them, TIS then re-weights the advantages
 * and re-anchors on the learner, and the masks zero their weights last (so TIS's measures cover
 * every action token). Without either, the datums are returned as they came.
 */
function learnerCorrections(
  datums: Datum[],
  loss: TrainConfig["loss"],
  learner: number[][] | undefined,
): { datums: Datum[]; tis?: TisMetrics; offPolicy?: OffPolicyMaskMetrics } {
  if (!learner) return { datums };
  const masks = loss.offPolicy ? offPolicyKeep(datums, learner, loss.offPolicy) : undefined;
  const tis = loss.tis ? applyTis(datums, learner, loss.tis.cap) : undefined;
  const out = tis ? tis.datums : datums;
  return {
    datums: masks ? withKeptWeights(out, masks.keep) : out,
    ...(tis ? { tis: tis.metrics } : {}),
    ...(masks ? { offPolicy: masks.metrics } : {}),
  };
}

/** The episodes of groups whose scores differ. */
function varyingGroups(episodes: ScoredEpisode[]): ScoredEpisode[] {
  return dropUniformGroups(
    episodes.map((e) => e.score),
    episodes.map((e) => e.trajectory.rowIndex),
  ).keep.map((i) => episodes[i]);
}

interface RewardSignal {
  /** Per datum position. */
  rewards: number[][];
  /** Per episode. */
  scores: number[];
  /** Per datum position, the reference logprob of the target, when there is a reference. */
  ref?: number[][];
  klRef?: number;
}

/**
 * Token rewards (outcome + weighted process rewards) and scores, both minus β·KL when the KL is
 * in the reward; the reference logprobs and the batch KL when there is a reference.
 */
async function rewardSignal(
  episodes: ScoredEpisode[],
  batch: BatchDatums,
  mask: number[][],
  alg: TrainConfig["algorithm"],
  models: BatchModels,
  klCoef: number,
): Promise<RewardSignal> {
  const rowsOf = (j: number) => batch.steps.filter((_, d) => batch.trajectory[d] === j);
  const perTrajectory = combineRewards(
    episodes.map((e, j) => ({ steps: rowsOf(j), outcome: e.outcome, stepRewards: e.process })),
    { processWeight: alg.processRewardWeight },
  );
  const rewards = perTrajectory.flat(1); // trajectories in order, each one's datums in order: the batch's datum order
  const scores = episodes.map((e) => e.score);
  if (!models.refLogprobs || batch.datums.length === 0) return { rewards, scores };
  const ref = await targetLogprobs(models.refLogprobs, batch.datums);
  const logprobs = batch.datums.map((d) => d.logprobs!);
  const kl = applyKlToRewards(
    { rewards, logprobs, refLogprobs: ref, mask, trajectory: batch.trajectory },
    alg.kl.inReward ? klCoef : 0,
    alg.kl.form,
  );
  if (!alg.kl.inReward) return { rewards, scores, ref, klRef: kl.meanKl };
  return { rewards: kl.rewards, scores: scores.map((s, j) => s - klCoef * kl.trajectoryKl[j]), ref, klRef: kl.meanKl };
}

/** Per datum position: a model's logprob of its target. */
async function targetLogprobs(score: NonNullable<BatchModels["refLogprobs"]>, datums: Datum[]): Promise<number[][]> {
  const lps = await score(datums.map((d) => [...d.tokens, d.targetTokens[d.targetTokens.length - 1]]));
  return lps.map((row) => row.slice(1) as number[]); // entry i + 1 scores token i + 1, the target at position i
}

/** The critic's targets: the estimator's returns where its return mask is 1; the values it was read at as the old values. */
function criticTargets(datums: Datum[], values: number[][], out: AdvantageOutput): ValueDatum[] {
  if (!out.returns || !out.returnMask) return [];
  return datums.map((d, j) => ({
    tokens: d.tokens,
    weights: out.returnMask![j],
    returns: out.returns![j],
    oldValues: values[j].slice(),
  }));
}

const onMask = (row: readonly number[], mask: readonly number[]) => row.map((x, i) => (mask[i] > 0 ? x : 0));
