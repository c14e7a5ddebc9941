/**
 * Advantage estimators by name. The trainer looks one up once from the config
 * and calls `compute`; `needsValues` tells it whether to run the critic first
 * (per action token for "gae", per step for "gae-step").
 *
 *   const est = advantageEstimator(config.advantage);   // throws InputError on an unknown name
 *   const { advantages, returns } = est.compute({ trajectories, gamma, lambda });
 *
 * Input and output shapes: see input.ts. Output `advantages[i]` always has
 * trajectories[i].actionTokens entries.
 */
import { InputError } from "../../util/errors.js";
import { drGrpoAdvantages, grpoAdvantages } from "./grpo.js";
import { stepGae, tokenGae } from "./gae.js";
import { broadcast, checkTrajectories, stepRewardsOf, tokenRewardsOf, type AdvantageInput, type AdvantageOutput, type TrajectoryInput } from "./input.js";
import { reinforceAdvantages } from "./reinforce.js";
import { reinforcePlusPlus, reinforcePlusPlusBaseline } from "./reinforce-pp.js";
import { rlooAdvantages } from "./rloo.js";

export type { AdvantageInput, AdvantageOutput, StepInput, TrajectoryInput } from "./input.js";

export interface AdvantageEstimator {
  /** Whether `values` must be filled in before `compute`. */
  needsValues: boolean;
  compute(input: AdvantageInput): AdvantageOutput;
}

/** A per-trajectory scalar estimator, broadcast onto each trajectory's action tokens. */
function outcome(fn: (scores: number[], input: AdvantageInput) => number[]): AdvantageEstimator {
  return {
    needsValues: false,
    compute(input) {
      const ts = input.trajectories;
      checkTrajectories(ts);
      const adv = fn(ts.map((t) => t.score), input);
      return { advantages: ts.map((t, i) => broadcast([adv[i]], [t.actionTokens])) };
    },
  };
}

const groupsOf = (ts: readonly TrajectoryInput[]) => ts.map((t) => t.group);
const gaeOpts = (input: AdvantageInput) => ({ gamma: input.gamma ?? 1, lambda: input.lambda ?? 1, whiten: input.whiten ?? true });

export const ADVANTAGE_ESTIMATORS = {
  gae: {
    needsValues: true,
    compute(input) {
      const ts = input.trajectories;
      checkTrajectories(ts, { values: "token" });
      return tokenGae(ts.map(tokenRewardsOf), ts.map((t) => t.values!), gaeOpts(input));
    },
  },
  "gae-step": {
    needsValues: true,
    compute(input) {
      const ts = input.trajectories;
      checkTrajectories(ts, { steps: true, values: "step" });
      const { advantages, returns } = stepGae(ts.map(stepRewardsOf), ts.map((t) => t.values!), gaeOpts(input));
      return { advantages: advantages.map((a, i) => broadcast(a, ts[i].steps!.map((s) => s.tokens))), returns };
    },
  },
  grpo: outcome((scores, input) => grpoAdvantages(scores, groupsOf(input.trajectories), { epsilon: input.epsilon })),
  "dr-grpo": outcome((scores, input) => drGrpoAdvantages(scores, groupsOf(input.trajectories))),
  rloo: outcome((scores, input) => rlooAdvantages(scores, groupsOf(input.trajectories))),
  reinforce: outcome((scores, input) => reinforceAdvantages(scores, input.baseline)),
  "reinforce++": {
    needsValues: false,
    compute(input) {
      checkTrajectories(input.trajectories);
      return reinforcePlusPlus(input.trajectories.map(tokenRewardsOf), input.gamma ?? 1);
    },
  },
  "reinforce++-baseline": {
    needsValues: false,
    compute(input) {
      const ts = input.trajectories;
      checkTrajectories(ts);
      return { advantages: reinforcePlusPlusBaseline(ts.map((t) => t.score), groupsOf(ts), ts.map((t) => t.actionTokens)) };
    },
  },
} satisfies Record<string, AdvantageEstimator>;

export type AdvantageName = keyof typeof ADVANTAGE_ESTIMATORS;
export const ADVANTAGE_NAMES = Object.keys(ADVANTAGE_ESTIMATORS) as AdvantageName[];

export function isAdvantageName(name: string): name is AdvantageName {
  return Object.prototype.hasOwnProperty.call(ADVANTAGE_ESTIMATORS, name);
}

export function advantageEstimator(name: string): AdvantageEstimator {
  if (!isAdvantageName(name)) throw new InputError(`unknown advantage estimator '${name}'`, `use one of: ${ADVANTAGE_NAMES.join(", ")}`);
  return ADVANTAGE_ESTIMATORS[name];
}

export function computeAdvantages(name: string, input: AdvantageInput): AdvantageOutput {
  return advantageEstimator(name).compute(input);
}

export { gaeSequence, stepGae, tokenGae } from "./gae.js";
export { drGrpoAdvantages, grpoAdvantages } from "./grpo.js";
export { rlooAdvantages } from "./rloo.js";
export { discountedReturns, reinforcePlusPlus, reinforcePlusPlusBaseline } from "./reinforce-pp.js";
export { reinforceAdvantages, type ReinforceBaseline } from "./reinforce.js";
