/**
 * The common input and output of every advantage estimator, and the helpers
 * that turn one trajectory's fields into per-token or per-step arrays.
 *
 * Layout: each trajectory is reduced to its action tokens (the tokens the
 * policy generated; prompt and tool-output tokens are excluded), in order,
 * across all of its steps. Every per-token array below has `actionTokens`
 * entries; the trainer scatters them back onto `Datum.advantages` where
 * `weights` is 1.
 */
import type { GroupKey } from "../groups.js";
import { InputError } from "../../util/errors.js";

export interface StepInput {
  /** The step's (environment or tool) reward. Read only when `tokenRewards` is absent. */
  reward: number;
  /** Action tokens the step generated. */
  tokens: number;
}

export interface TrajectoryInput {
  /** Trajectories sampled from the same prompt share a group. */
  group: GroupKey;
  /** Scalar outcome used by the outcome estimators (grpo, dr-grpo, rloo, reinforce, reinforce++-baseline). Agent-R1 main uses the sum of the step rewards. */
  score: number;
  /** Number of action tokens in the trajectory. */
  actionTokens: number;
  /** Per action token; the token-level estimators (gae, reinforce++) and step sums read these. See `tokenRewardsOf` for the default. */
  tokenRewards?: number[];
  /** The steps in order; their `tokens` sum to `actionTokens`. Required by gae-step. */
  steps?: StepInput[];
  /** Critic values: per action token for gae, per step (the value before the step's first token) for gae-step. */
  values?: number[];
}

export interface AdvantageInput {
  trajectories: TrajectoryInput[];
  /** Discount. Default 1 (verl/Agent-R1 default). gae, gae-step, reinforce++. */
  gamma?: number;
  /** GAE λ. Default 1. gae, gae-step. */
  lambda?: number;
  /** Whiten GAE advantages over the batch. Default true (Agent-R1 always does). gae, gae-step. */
  whiten?: boolean;
  /** GRPO std epsilon. Default 1e-6. grpo. */
  epsilon?: number;
  /** REINFORCE baseline. Default "none". reinforce. */
  baseline?: "none" | "batch-mean";
}

export interface AdvantageOutput {
  /** Per trajectory, one advantage per action token. */
  advantages: number[][];
  /** Critic targets, laid out like `values` (per token for gae, per step for gae-step); discounted returns G_t for reinforce++. */
  returns?: number[][];
}

const where = (i: number, field: string) => `trajectories[${i}].${field}`;

export function checkTrajectories(trajectories: readonly TrajectoryInput[], need: { steps?: boolean; values?: "token" | "step" } = {}): void {
  trajectories.forEach((t, i) => {
    if (!Number.isInteger(t.actionTokens) || t.actionTokens < 0) throw new InputError(`${where(i, "actionTokens")} must be a non-negative integer, got ${t.actionTokens}`);
    if (!Number.isFinite(t.score)) throw new InputError(`${where(i, "score")} must be a finite number, got ${t.score}`);
    if (t.tokenRewards && t.tokenRewards.length !== t.actionTokens)
      throw new InputError(`${where(i, "tokenRewards")} has ${t.tokenRewards.length} entries, actionTokens is ${t.actionTokens}`);
    if (need.steps && !t.steps) throw new InputError(`${where(i, "steps")} is required by this estimator`, "give each step's reward and action-token count");
    if (t.steps) {
      const total = t.steps.reduce((s, st) => s + st.tokens, 0);
      if (total !== t.actionTokens) throw new InputError(`${where(i, "steps")} cover ${total} action tokens, actionTokens is ${t.actionTokens}`);
    }
    if (need.values) {
      const want = need.values === "token" ? t.actionTokens : t.steps?.length ?? 0;
      if (!t.values) throw new InputError(`${where(i, "values")} is required by this estimator`, "run the critic first");
      if (t.values.length !== want)
        throw new InputError(`${where(i, "values")} has ${t.values.length} entries, expected ${want} (one per ${need.values === "token" ? "action token" : "step"})`);
    }
  });
}

/**
 * Per-action-token rewards: `tokenRewards` if given; else each step's reward
 * on that step's last action token; else `score` on the last action token.
 */
export function tokenRewardsOf(t: TrajectoryInput): number[] {
  if (t.tokenRewards) return t.tokenRewards.slice();
  const r = new Array<number>(t.actionTokens).fill(0);
  if (t.steps) {
    let end = 0;
    for (const st of t.steps) {
      end += st.tokens;
      if (st.tokens > 0) r[end - 1] += st.reward;
      else if (st.reward !== 0) throw new InputError(`a step with reward ${st.reward} has no action tokens to carry it`);
    }
  } else if (t.actionTokens > 0) {
    r[t.actionTokens - 1] = t.score;
  }
  return r;
}

/** One reward per step: the sum of its token rewards. */
export function stepRewardsOf(t: TrajectoryInput): number[] {
  const r = tokenRewardsOf(t);
  let start = 0;
  return (t.steps ?? []).map((st) => {
    let s = 0;
    for (let k = start; k < start + st.tokens; k++) s += r[k];
    start += st.tokens;
    return s;
  });
}

/** Repeats `perItem[i]` over `counts[i]` slots: a trajectory's scalar onto its tokens, or a step's onto its tokens. */
export function broadcast(perItem: readonly number[], counts: readonly number[]): number[] {
  const out: number[] = [];
  perItem.forEach((x, i) => {
    for (let k = 0; k < counts[i]; k++) out.push(x);
  });
  return out;
}
