/**
 * Trajectories to training datums, without re-tokenizing anything. Steps share
 * one datum while each context extends the previous one (a segment); a new
 * datum starts where the flow rewrote history. In a datum, the target at index
 * i is token i+1 of the segment; action tokens get weight 1 (times the
 * trajectory's weight), prompt and observation tokens get weight 0, and each
 * action token carries its advantage and the logprob it was sampled with.
 */
import type { Datum } from "../engine/types.js";
import { segments, stepContext, type Trajectory } from "../agent/trajectory.js";

/** Where each action token of a trajectory sits: datum index and target index. */
export interface ActionSlot {
  datum: number;
  target: number;
}

export interface TrajectoryDatums {
  datums: Datum[];
  /** One entry per action token, in trajectory order (the estimators' layout). */
  slots: ActionSlot[];
}

/**
 * Builds the datums of one trajectory. `advantages` has one entry per action
 * token (all steps, in order); `weight` scales the loss mask (0 masks the
 * trajectory, e.g. when it was cut off).
 */
export function trajectoryDatums(t: Trajectory, advantages: readonly number[], weight = 1): TrajectoryDatums {
  const total = t.steps.reduce((s, st) => s + st.action.length, 0);
  if (advantages.length !== total) throw new Error(`internal: ${advantages.length} advantages for ${total} action tokens in ${t.id}`);
  const datums: Datum[] = [];
  const slots: ActionSlot[] = [];
  let a = 0;
  for (const seg of segments(t)) {
    const seq = stepContext(t, seg[0]).slice();
    if (seq.length === 0) throw new Error(`internal: trajectory ${t.id} has an empty context`);
    const weights: number[] = [], adv: number[] = [], lp: number[] = [];
    const pad = (n: number) => {
      for (let i = 0; i < n; i++) weights.push(0), adv.push(0), lp.push(0);
    };
    pad(seq.length - 1); // targets that are context tokens
    seg.forEach((k, j) => {
      const step = t.steps[k];
      step.action.forEach((tok, i) => {
        slots.push({ datum: datums.length, target: seq.length - 1 });
        seq.push(tok);
        weights.push(weight);
        adv.push(advantages[a++]);
        lp.push(step.logprobs[i]);
      });
      // The observation is context for the next step of the segment; after the last one nothing reads it.
      if (j < seg.length - 1) {
        pad(step.observation.length);
        seq.push(...step.observation);
      }
    });
    datums.push({ tokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights, advantages: adv, logprobs: lp });
  }
  return { datums, slots };
}

/** Per action token, the value the critic gives the state that generated it (the position before it). */
export function gatherActionValues(slots: readonly ActionSlot[], values: readonly (readonly number[])[]): number[] {
  // values[d][i] is the critic's output at input position i of datum d, which predicts target i.
  return slots.map((s) => values[s.datum][s.target]);
}

/** Per step, the value at the state before its first action token (Agent-R1's step-level value). */
export function gatherStepValues(t: Trajectory, slots: readonly ActionSlot[], values: readonly (readonly number[])[]): number[] {
  const out: number[] = [];
  let a = 0;
  for (const step of t.steps) {
    if (step.action.length === 0) out.push(0);
    else out.push(values[slots[a].datum][slots[a].target]);
    a += step.action.length;
  }
  return out;
}
