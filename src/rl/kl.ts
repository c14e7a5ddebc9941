/**
 * KL penalty in the reward, and the controllers of its coefficient β.
 *
 * In-reward KL (Ziegler et al. 2019; verl `apply_kl_penalty`): per action token
 *   r_t ← r_t − β·kl(p_t, ref_t)
 * with kl one of the per-token estimators of loss-math.ts (k1 = p − ref by
 * default, verl's `kl_penalty: kl`). The batch KL reported to the controller
 * is the mean over trajectories of the per-trajectory token mean, as verl.
 *
 * Adaptive controller (Ziegler et al. 2019, used by verl/Agent-R1):
 *   e = clip(KL/target − 1, −0.2, 0.2),  β ← β·(1 + e·nSteps/horizon)
 * so β grows while the policy drifts past the target and shrinks below it.
 * Controllers here are values: `update` returns a new controller.
 */
import { klValue } from "../engine/loss-math.js";
import type { KlForm } from "../engine/types.js";
import { InputError } from "../util/errors.js";

export interface KlRewardResult {
  /** Rewards after the penalty, same shape as the input rewards. */
  rewards: number[][];
  /** Per-token KL estimate. */
  kl: number[][];
  /** Mean over trajectories of the per-trajectory mean KL (trajectories with no tokens are skipped). */
  meanKl: number;
}

/** All arrays are per trajectory, per action token. */
export function applyKlToRewards(rewards: readonly (readonly number[])[], logprobs: readonly (readonly number[])[], refLogprobs: readonly (readonly number[])[], beta: number, form: KlForm = "k1"): KlRewardResult {
  let sum = 0, count = 0;
  const kl = rewards.map((r, i) => {
    if (logprobs[i]?.length !== r.length || refLogprobs[i]?.length !== r.length)
      throw new InputError(`trajectory ${i}: rewards, logprobs and refLogprobs must have one entry per action token (${r.length})`);
    const k = r.map((_, t) => klValue(logprobs[i][t], refLogprobs[i][t], form));
    if (k.length > 0) {
      sum += k.reduce((s, x) => s + x, 0) / k.length;
      count++;
    }
    return k;
  });
  return { rewards: rewards.map((r, i) => r.map((x, t) => x - beta * kl[i][t])), kl, meanKl: count > 0 ? sum / count : 0 };
}

export interface KlController {
  readonly coef: number;
  /** `currentKl` from the last batch (meanKl), `nSteps` the number of trajectories in it. */
  update(currentKl: number, nSteps: number): KlController;
}

export function fixedKlController(coef: number): KlController {
  const self: KlController = { coef, update: () => self };
  return self;
}

export interface AdaptiveKlOptions {
  initCoef: number;
  /** Target KL per token. */
  target: number;
  /** Trajectories over which the coefficient may change by up to 20%. */
  horizon: number;
}

export function adaptiveKlController(opts: AdaptiveKlOptions): KlController {
  if (!(opts.target > 0)) throw new InputError(`adaptive KL target must be > 0, got ${opts.target}`);
  if (!(opts.horizon > 0)) throw new InputError(`adaptive KL horizon must be > 0, got ${opts.horizon}`);
  return {
    coef: opts.initCoef,
    update(currentKl, nSteps) {
      const e = Math.max(-0.2, Math.min(0.2, currentKl / opts.target - 1));
      return adaptiveKlController({ ...opts, initCoef: opts.initCoef * (1 + (e * nSteps) / opts.horizon) });
    },
  };
}
