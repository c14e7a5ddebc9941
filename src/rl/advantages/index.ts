/**
 * Advantage estimators by name. The trainer looks one up once from the config
 * and calls `compute`; `needsValues` tells it whether to run the critic first.
 *
 *   const est = advantageEstimator(config.advantage);   // throws InputError on an unknown name
 *   const { advantages, returns } = est.compute({ trajectories, trajectory, mask, rewards, values, steps, gamma, lambda });
 *
 * Input and output are on datum positions with the action mask: see input.ts.
 */
import { InputError } from "../../util/errors.js";
import { drGrpoAdvantages, grpoAdvantages } from "./grpo.js";
import { stepGaeOnDatums, tokenGae } from "./gae.js";
import { gigpoOnDatums } from "./gigpo.js";
import { broadcast, checkInput, type AdvantageInput, type AdvantageOutput } from "./input.js";
import { reinforceAdvantages } from "./reinforce.js";
import { reinforcePlusPlus, reinforcePlusPlusBaseline } from "./reinforce-pp.js";
import { rlooAdvantages } from "./rloo.js";

export type { AdvantageInput, AdvantageOutput, Rows, TrajectoryInfo } from "./input.js";

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
      checkInput(input);
      const adv = fn(
        input.trajectories.map((t) => t.score),
        input,
      );
      return { advantages: broadcast(adv, input.mask, input.trajectory) };
    },
  };
}

const groupsOf = (input: AdvantageInput) => input.trajectories.map((t) => t.group);
const gaeOpts = (input: AdvantageInput) => ({
  gamma: input.gamma ?? 1,
  lambda: input.lambda ?? 1,
  whiten: input.whiten ?? true,
});

export const ADVANTAGE_ESTIMATORS = {
  gae: {
    needsValues: true,
    compute(input) {
      checkInput(input, ["rewards", "values"]);
      const { advantages, returns } = tokenGae(input.rewards!, input.values!, {
        ...gaeOpts(input),
        mask: input.mask,
        trajectory: input.trajectory,
      });
      return { advantages, returns, returnMask: input.mask.map((row) => row.slice()) };
    },
  },
  "gae-step": {
    needsValues: true,
    compute(input) {
      checkInput(input, ["rewards", "values", "steps"]);
      const { rewards, values, steps, trajectory } = input;
      return stepGaeOnDatums(
        { rewards: rewards!, values: values!, steps: steps!, trajectory, count: input.trajectories.length },
        gaeOpts(input),
      );
    },
  },
  grpo: outcome((scores, input) => grpoAdvantages(scores, groupsOf(input), { epsilon: input.epsilon })),
  gigpo: {
    needsValues: false,
    compute(input) {
      checkInput(input, ["rewards", "steps"]);
      const { rewards, steps, trajectory, trajectories } = input;
      return {
        advantages: gigpoOnDatums(
          { rewards: rewards!, steps: steps!, trajectory, trajectories },
          { ...input.gigpo, gamma: input.gamma ?? 1 },
        ),
      };
    },
  },
  "dr-grpo": outcome((scores, input) => drGrpoAdvantages(scores, groupsOf(input))),
  rloo: outcome((scores, input) => rlooAdvantages(scores, groupsOf(input))),
  reinforce: outcome((scores, input) => reinforceAdvantages(scores, input.baseline)),
  "reinforce++": {
    needsValues: false,
    compute(input) {
      checkInput(input, ["rewards"]);
      const { advantages, returns } = reinforcePlusPlus(input.rewards!, input.gamma ?? 1, {
        mask: input.mask,
        trajectory: input.trajectory,
      });
      return { advantages, returns, returnMask: input.mask.map((row) => row.slice()) };
    },
  },
  "reinforce++-baseline": {
    needsValues: false,
    compute(input) {
      checkInput(input);
      return {
        advantages: reinforcePlusPlusBaseline(
          input.trajectories.map((t) => t.score),
          groupsOf(input),
          input.mask,
          input.trajectory,
        ),
      };
    },
  },
} satisfies Record<string, AdvantageEstimator>;

export type AdvantageName = keyof typeof ADVANTAGE_ESTIMATORS;
export const ADVANTAGE_NAMES = Object.keys(ADVANTAGE_ESTIMATORS) as AdvantageName[];

export function isAdvantageName(name: string): name is AdvantageName {
  return Object.prototype.hasOwnProperty.call(ADVANTAGE_ESTIMATORS, name);
}

export function advantageEstimator(name: string): AdvantageEstimator {
  if (!isAdvantageName(name))
    throw new InputError(`unknown advantage estimator '${name}'`, `use one of: ${ADVANTAGE_NAMES.join(", ")}`);
  return ADVANTAGE_ESTIMATORS[name];
}

export function computeAdvantages(name: string, input: AdvantageInput): AdvantageOutput {
  return advantageEstimator(name).compute(input);
}

export { gaeSequence, maskedGae, stepGae, stepGaeOnDatums, tokenGae } from "./gae.js";
export {
  discountedStepReturns,
  gigpoOnDatums,
  gigpoStepAdvantages,
  gigpoTrajectoryAdvantages,
  type GigpoOptions,
} from "./gigpo.js";
export { drGrpoAdvantages, grpoAdvantages } from "./grpo.js";
export { rlooAdvantages } from "./rloo.js";
export { discountedReturns, maskedReturns, reinforcePlusPlus, reinforcePlusPlusBaseline } from "./reinforce-pp.js";
export { reinforceAdvantages, type ReinforceBaseline } from "./reinforce.js";
