/**
 * From finished trajectories to training datums: filter (constant-reward
 * groups, overlong episodes), lay out rewards on action tokens (outcome +
 * weighted process rewards, optionally minus β·KL), ask the critic and the
 * reference model what they need, run the chosen estimator, and scatter
 * advantages (and reference logprobs) onto the datums.
 */
import type { Trajectory } from "../agent/trajectory.js";
import type { Datum, ValueDatum } from "../engine/types.js";
import { trajectoryDatums, gatherActionValues, gatherStepValues, type TrajectoryDatums } from "../rl/datums.js";
import { episodeRewards } from "../rl/episode-rewards.js";
import { combineRewards } from "../rl/process-rewards.js";
import { dropUniformGroups, maskOverlong } from "../rl/filters.js";
import { applyKlToRewards } from "../rl/kl.js";
import { advantageEstimator, type TrajectoryInput } from "../rl/advantages/index.js";
import type { TrainConfig } from "./config.js";

/** What the batch needs from models: the critic's values and the reference logprobs, per datum position. */
export interface BatchModels {
  /** Per sequence (datum tokens), one value per input position. */
  values?: (sequences: number[][]) => Promise<number[][]>;
  /** Per sequence (datum tokens + last target), logprob of each token given the ones before it. */
  refLogprobs?: (sequences: number[][]) => Promise<(number | null)[][]>;
}

export interface PreparedBatch {
  datums: Datum[];
  valueDatums: ValueDatum[];
  /** Trajectories that entered training (after the filters), and per-batch counts. */
  kept: Trajectory[];
  droppedGroups: number;
  maskedOverlong: number;
  /** Mean per-token KL to the reference (when a reference is used). */
  klRef?: number;
}

export async function prepareBatch(trajectories: Trajectory[], cfg: TrainConfig, models: BatchModels, klCoef: number): Promise<PreparedBatch> {
  const alg = cfg.algorithm;
  const estimator = advantageEstimator(alg.estimator);
  const all = trajectories.filter((t) => t.metrics.actionTokens > 0);
  const rewards = all.map(episodeRewards);
  const scores = rewards.map((r) => r.outcome + alg.processRewardWeight * r.process.reduce((s, x) => s + x, 0));
  const keepIdx = alg.filterConstantGroups ? dropUniformGroups(scores, all.map((t) => t.rowIndex)).keep : all.map((_, i) => i);
  const kept = keepIdx.map((i) => all[i]);
  const overlong = alg.maskOverlong ? maskOverlong(kept.map((t) => (t.endReason === "done" ? "stop" : "length"))) : { weights: kept.map(() => 1), masked: 0 };
  const skeletons: TrajectoryDatums[] = kept.map((t, i) => trajectoryDatums(t, new Array(t.metrics.actionTokens).fill(0), overlong.weights[i]));
  const flat = skeletons.flatMap((s) => s.datums);
  // Results over `flat` (all datums in order) regrouped per trajectory.
  const perTraj = <T>(rows: T[]) => {
    let at = 0;
    return skeletons.map((s) => rows.slice(at, (at += s.datums.length)));
  };

  const stepTokens = kept.map((t) => t.steps.map((s) => s.action.length));
  let tokenRewards = combineRewards(kept.map((_, i) => ({ stepTokens: stepTokens[i], outcome: rewards[keepIdx[i]].outcome, stepRewards: rewards[keepIdx[i]].process })), { processWeight: alg.processRewardWeight });
  let keptScores = keepIdx.map((i) => scores[i]);

  // Reference logprobs per action token (KL in the reward, or as a loss term).
  let refAction: number[][] | undefined, klRef: number | undefined;
  if (models.refLogprobs && flat.length > 0) {
    const lps = perTraj(await models.refLogprobs(flat.map((d) => [...d.tokens, d.targetTokens[d.targetTokens.length - 1]])));
    refAction = skeletons.map((s, i) => s.slots.map((slot) => lps[i][slot.datum][slot.target + 1]!));
    const sampled = kept.map((t) => t.steps.flatMap((s) => s.logprobs));
    const kl = applyKlToRewards(tokenRewards, sampled, refAction, alg.kl.inReward ? klCoef : 0, alg.kl.form);
    klRef = kl.meanKl;
    if (alg.kl.inReward) {
      tokenRewards = kl.rewards;
      keptScores = keptScores.map((s, i) => s - klCoef * kl.kl[i].reduce((a, b) => a + b, 0));
    }
  }

  // Critic values at the positions the estimator reads.
  let values: number[][] | undefined, valueRows: number[][][] | undefined;
  if (estimator.needsValues && models.values && flat.length > 0) {
    valueRows = perTraj(await models.values(flat.map((d) => d.tokens)));
    values = kept.map((t, i) => (alg.estimator === "gae-step" ? gatherStepValues(t, skeletons[i].slots, valueRows![i]) : gatherActionValues(skeletons[i].slots, valueRows![i])));
  }

  const input: TrajectoryInput[] = kept.map((t, i) => ({
    group: t.rowIndex,
    score: keptScores[i],
    actionTokens: t.metrics.actionTokens,
    tokenRewards: tokenRewards[i],
    // Step rewards are read from tokenRewards (summed per step); the field is for completeness.
    steps: t.steps.map((s, k) => ({ reward: rewards[keepIdx[i]].process[k] + (k === t.steps.length - 1 ? rewards[keepIdx[i]].outcome : 0), tokens: s.action.length })),
    values: values?.[i],
  }));
  const out = estimator.compute({ trajectories: input, gamma: alg.gamma, lambda: alg.lambda });

  skeletons.forEach((s, i) => {
    s.slots.forEach((slot, a) => {
      const d = s.datums[slot.datum];
      d.advantages![slot.target] = out.advantages[i][a];
      if (refAction && !alg.kl.inReward && klCoef > 0) (d.refLogprobs ??= new Array(d.tokens.length).fill(0))[slot.target] = refAction[i][a];
    });
  });
  const valueDatums = valueRows && out.returns ? buildValueDatums(kept, skeletons, valueRows, out.returns, alg.estimator === "gae-step") : [];
  return { datums: flat, valueDatums, kept, droppedGroups: all.length - kept.length, maskedOverlong: overlong.masked, klRef };
}

/** Critic targets: every action position (token GAE) or each step's first action position (step GAE). */
function buildValueDatums(kept: Trajectory[], skeletons: TrajectoryDatums[], values: number[][][], returns: number[][], perStep: boolean): ValueDatum[] {
  const out: ValueDatum[] = [];
  skeletons.forEach((s, i) => {
    const vds: ValueDatum[] = s.datums.map((d, j) => ({ tokens: d.tokens, weights: d.tokens.map(() => 0), returns: d.tokens.map(() => 0), oldValues: values[i][j].slice() }));
    if (perStep) {
      let a = 0;
      kept[i].steps.forEach((st, k) => {
        if (st.action.length > 0) {
          const slot = s.slots[a];
          vds[slot.datum].weights[slot.target] = 1;
          vds[slot.datum].returns[slot.target] = returns[i][k];
        }
        a += st.action.length;
      });
    } else {
      s.slots.forEach((slot, a) => {
        vds[slot.datum].weights[slot.target] = 1;
        vds[slot.datum].returns[slot.target] = returns[i][a];
      });
    }
    out.push(...vds);
  });
  return out;
}
