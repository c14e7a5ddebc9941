/**
 * KL to the reference policy: the per-token estimators, the penalty in the
 * reward, and the controllers of its coefficient β.
 *
 * Per-token estimators of KL(π ‖ π_ref) from p = log π(token), ref = log π_ref(token)
 * (Schulman 2020, "Approximating KL divergence"; verl `kl_penalty` kl / mse / low_var_kl):
 *   k1 = p − ref;  k2 = ½(p − ref)²;  k3 = exp(ref − p) − (ref − p) − 1,
 * k3 with ref − p clamped to ±20 and the result to ±10, as verl.
 * As a loss term (LossSpec.kl) the engine adds coef·k per weighted token.
 *
 * In-reward KL (Ziegler et al. 2019; verl `apply_kl_penalty`): per action token
 *   r_t ← r_t − β·k(p_t, ref_t)
 * with p the sampling logprob. The batch KL reported to the controller is the
 * mean over trajectories of the per-trajectory token mean, as verl.
 *
 * Adaptive controller (Ziegler et al. 2019, used by verl/Agent-R1):
 *   e = clip(KL/target − 1, −0.2, 0.2),  β ← β·(1 + e·nSteps/horizon)
 * so β grows while the policy drifts past the target and shrinks below it.
 * Controllers here are values: `update` returns a new controller.
 */
import type { KlForm } from "../engine/types.js";
import { InputError } from "../util/errors.js";
import { LOG_RATIO_CLAMP } from "./policy-loss.js";

/** k3 is clamped to ±KL_CLAMP (verl low_var_kl). */
export const KL_CLAMP = 10;

export function klValue(p: number, ref: number, form: KlForm): number {
  if (form === "k1") return p - ref;
  if (form === "k2") return 0.5 * (p - ref) ** 2;
  const d = Math.max(-LOG_RATIO_CLAMP, Math.min(LOG_RATIO_CLAMP, ref - p));
  return Math.max(-KL_CLAMP, Math.min(KL_CLAMP, Math.exp(d) - d - 1));
}

/** d klValue / d p; at a clamp's edge the gradient passes (TF.js's clipByValue). */
export function klGrad(p: number, ref: number, form: KlForm): number {
  if (form === "k1") return 1;
  if (form === "k2") return p - ref;
  const raw = ref - p;
  if (Math.abs(raw) > LOG_RATIO_CLAMP) return 0;
  if (Math.abs(Math.exp(raw) - raw - 1) > KL_CLAMP) return 0;
  return -(Math.exp(raw) - 1);
}

/** Token-level arrays on datum positions (datum × position), as the advantage estimators take them. */
export interface KlRewardInput {
  rewards: readonly (readonly number[])[];
  /** Sampling logprobs. */
  logprobs: readonly (readonly number[])[];
  refLogprobs: readonly (readonly number[])[];
  /** 1 on action tokens; the penalty applies there only. */
  mask: readonly (readonly number[])[];
  /** Per datum: the index of its trajectory (datums ordered by trajectory). */
  trajectory: readonly number[];
}

export interface KlRewardResult {
  /** Rewards after the penalty, laid out as the input rewards. */
  rewards: number[][];
  /** Per-token KL estimate on the action tokens, 0 elsewhere. */
  kl: number[][];
  /** Per trajectory: the sum of its per-token KL. */
  trajectoryKl: number[];
  /** Mean over trajectories of the per-trajectory mean KL (trajectories with no action tokens are skipped). */
  meanKl: number;
}

export function applyKlToRewards(input: KlRewardInput, beta: number, form: KlForm = "k1"): KlRewardResult {
  const { rewards, logprobs, refLogprobs, mask, trajectory } = input;
  const n = trajectory.length > 0 ? Math.max(...trajectory) + 1 : 0;
  const sums = new Array<number>(n).fill(0),
    counts = new Array<number>(n).fill(0);
  const kl = rewards.map((r, d) => {
    if (logprobs[d]?.length !== r.length || refLogprobs[d]?.length !== r.length || mask[d]?.length !== r.length)
      throw new InputError(
        `datum ${d}: rewards, logprobs, refLogprobs and mask must have one entry per position (${r.length})`,
      );
    return r.map((_, i) => {
      if (!(mask[d][i] > 0)) return 0;
      const k = klValue(logprobs[d][i], refLogprobs[d][i], form);
      sums[trajectory[d]] += k;
      counts[trajectory[d]]++;
      return k;
    });
  });
  let sum = 0,
    count = 0;
  sums.forEach((s, i) => {
    if (counts[i] > 0) [sum, count] = [sum + s / counts[i], count + 1];
  });
  return {
    rewards: rewards.map((r, d) => r.map((x, i) => (mask[d][i] > 0 ? x - beta * kl[d][i] : x))),
    kl,
    trajectoryKl: sums,
    meanKl: count > 0 ? sum / count : 0,
  };
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
