/**
 * GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training", arXiv
 * 2505.10978): a trajectory-level advantage over the group of rollouts of one task, plus a
 * step-level one over the steps, across that group, taken in the same state.
 *
 *   A_traj(τ) = (R(τ) − mean_group R) / (std_group R + ε)        (std unbiased, as GRPO here)
 *   R_t       = Σ_{k ≥ t} γ^{k−t} r_k                             (the step's discounted return)
 *   A_step(t) = (R_t − mean_anchor R) / (std_anchor R + ε)        ("mean-std"), or R_t − mean ("mean")
 *   A         = A_traj + w · A_step, on every action token of the step
 *
 * where an anchor group is the steps of one task's group whose rendered state (the env's
 * `info.state`, the state the action was taken in) is the same text: exact match, the paper's
 * default. Departures: a trajectory group of one gets A_traj = 0, and an anchor group of one gets
 * A_step = 0 (no other rollout saw that state, so there is nothing to compare with); a step
 * without a rendered state is in no anchor group (A_step = 0). The paper's similarity-threshold
 * grouping is not implemented.
 */
import { groupMembers, type GroupKey } from "../groups.js";
import { moments } from "../whiten.js";

export interface GigpoOptions {
  /** w, the step advantage's weight. Default 1. */
  stepWeight?: number;
  /** Discount of the step returns. Default 1. */
  gamma?: number;
  /** Default "mean-std". */
  normalize?: "mean-std" | "mean";
  /** Default 1e-6. */
  epsilon?: number;
}

/** (x − mean) / (std + ε) over the members, or x − mean; 0 for a group of one. */
function normalized(xs: readonly number[], normalize: "mean-std" | "mean", eps: number): number[] {
  if (xs.length < 2) return xs.map(() => 0);
  const m = moments(xs, true);
  const std = Math.sqrt(m.variance);
  return xs.map((x) => (normalize === "mean" ? x - m.mean : (x - m.mean) / (std + eps)));
}

/** One advantage per trajectory: the group-normalized score (a group of one gets 0). */
export function gigpoTrajectoryAdvantages(
  scores: readonly number[],
  groups: readonly GroupKey[],
  opts: GigpoOptions = {},
): number[] {
  const out = new Array<number>(scores.length).fill(0);
  for (const members of groupMembers(groups).values()) {
    const a = normalized(
      members.map((i) => scores[i]),
      opts.normalize ?? "mean-std",
      opts.epsilon ?? 1e-6,
    );
    members.forEach((i, k) => (out[i] = a[k]));
  }
  return out;
}

/** R_t = Σ_{k ≥ t} γ^{k−t} r_k of each trajectory's steps. */
export function discountedStepReturns(stepRewards: readonly (readonly number[])[], gamma = 1): number[][] {
  return stepRewards.map((rs) => {
    const out = new Array<number>(rs.length);
    let next = 0;
    for (let t = rs.length - 1; t >= 0; t--) out[t] = next = rs[t] + gamma * next;
    return out;
  });
}

/**
 * The step advantages: stepReturns[j][t] of trajectory j's step t, normalized over the steps of
 * j's group with the same anchor (anchors[j][t], undefined: none).
 */
export function gigpoStepAdvantages(
  stepReturns: readonly (readonly number[])[],
  anchors: readonly (readonly (string | undefined)[])[],
  groups: readonly GroupKey[],
  opts: GigpoOptions = {},
): number[][] {
  const out = stepReturns.map((rs) => rs.map(() => 0));
  const byAnchor = new Map<string, [number, number][]>();
  stepReturns.forEach((rs, j) =>
    rs.forEach((_, t) => {
      const a = anchors[j]?.[t];
      if (a === undefined) return;
      const key = JSON.stringify([groups[j], a]);
      const members = byAnchor.get(key) ?? [];
      members.push([j, t]);
      byAnchor.set(key, members);
    }),
  );
  for (const members of byAnchor.values()) {
    const a = normalized(
      members.map(([j, t]) => stepReturns[j][t]),
      opts.normalize ?? "mean-std",
      opts.epsilon ?? 1e-6,
    );
    members.forEach(([j, t], k) => (out[j][t] = a[k]));
  }
  return out;
}

/** The layout GiGPO reads on datum positions (input.ts): token rewards, step ids, each datum's trajectory. */
export interface GigpoRows {
  rewards: readonly (readonly number[])[];
  steps: readonly (readonly number[])[];
  trajectory: readonly number[];
  /** Per trajectory: its score, group, and the anchor state of each step (by step id). */
  trajectories: readonly { score: number; group: GroupKey; anchors?: readonly (string | undefined)[] }[];
}

/** GiGPO's advantages on datum positions: A_traj + w·A_step on each step's action tokens, 0 elsewhere. */
export function gigpoOnDatums(rows: GigpoRows, opts: GigpoOptions = {}): number[][] {
  const n = rows.trajectories.length;
  // Per trajectory: its step ids in order of appearance, and their summed token rewards.
  const order = Array.from({ length: n }, () => new Map<number, number>());
  const stepRewards: number[][] = order.map(() => []);
  rows.steps.forEach((row, d) =>
    row.forEach((k, i) => {
      if (k < 0) return;
      const j = rows.trajectory[d];
      let s = order[j].get(k);
      if (s === undefined) {
        order[j].set(k, (s = order[j].size));
        stepRewards[j].push(0);
      }
      stepRewards[j][s] += rows.rewards[d][i];
    }),
  );
  const groups = rows.trajectories.map((t) => t.group);
  const anchors = order.map((ids, j) => [...ids.keys()].map((k) => rows.trajectories[j].anchors?.[k]));
  const traj = gigpoTrajectoryAdvantages(
    rows.trajectories.map((t) => t.score),
    groups,
    opts,
  );
  const step = gigpoStepAdvantages(discountedStepReturns(stepRewards, opts.gamma ?? 1), anchors, groups, opts);
  const w = opts.stepWeight ?? 1;
  return rows.steps.map((row, d) => {
    const j = rows.trajectory[d];
    return row.map((k) => (k >= 0 ? traj[j] + w * step[j][order[j].get(k)!] : 0));
  });
}
