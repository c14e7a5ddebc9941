/**
 * Tinker's losses on the local engine: a wire datum becomes our Datum with every token weighted
 * (Tinker has no mask; a masked token is one with a zero advantage or weight) and the loss sums
 * over tokens (`aggregation: sum`), which is Tinker's convention. The per-token losses a server
 * returns (`elementwise_loss`) are the plain-number formulas of src/rl/policy-loss.ts.
 */
import type { Datum, LossSpec } from "../../engine/types.js";
import type { WireDatum } from "../../engine/remote/tinker-codec.js";
import { TinkerError } from "../../engine/remote/tinker-error.js";
import { policyTokenLoss, resolvedLoss } from "../../rl/policy-loss.js";
import { shown } from "../../util/shown.js";

const LOSS_INPUTS: Record<string, string[]> = {
  cross_entropy: ["target_tokens"],
  importance_sampling: ["target_tokens", "logprobs", "advantages"],
  ppo: ["target_tokens", "logprobs", "advantages"],
  cispo: ["target_tokens", "logprobs", "advantages"],
  dro: ["target_tokens", "logprobs", "advantages"],
};

export const SUPPORTED_LOSSES = Object.keys(LOSS_INPUTS);

/** The loss_fn_config keys each loss reads; any other key is refused, not ignored. */
const CONFIG_KEYS: Record<string, string[]> = {
  ppo: ["clip_low_threshold", "clip_high_threshold"],
  cispo: ["clip_low_threshold", "clip_high_threshold"],
  dro: ["beta"],
};

/** `loss_fn_config` checked: an object of finite numbers, only keys the loss reads. */
function lossConfig(lossFn: string, raw: unknown): Record<string, number> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw))
    throw new TinkerError(
      `loss_fn_config must be an object of numbers, got ${Array.isArray(raw) ? "a list" : typeof raw}`,
    );
  const keys = CONFIG_KEYS[lossFn] ?? [];
  for (const [k, v] of Object.entries(raw)) {
    if (!keys.includes(k))
      throw new TinkerError(
        `loss_fn_config.${shown(k, 64)} is not read by ${lossFn}${keys.length ? ` (it reads ${keys.join(", ")})` : " (it reads none)"}`,
      );
    if (typeof v !== "number" || !Number.isFinite(v))
      throw new TinkerError(`loss_fn_config.${k} must be a finite number, got ${JSON.stringify(v) ?? String(v)}`);
  }
  return raw as Record<string, number>;
}

export function wireLossSpec(lossFn: string, rawConfig?: unknown): LossSpec {
  if (!Object.hasOwn(LOSS_INPUTS, lossFn))
    throw new TinkerError(
      `loss_fn '${shown(String(lossFn), 64)}' is not one of ${SUPPORTED_LOSSES.join(", ")}`,
      undefined,
      400,
    );
  const config = lossConfig(lossFn, rawConfig);
  const spec: LossSpec = { type: lossFn as LossSpec["type"], aggregation: "sum", dualClip: 0 };
  if (lossFn === "ppo" || lossFn === "cispo") {
    const lo = config.clip_low_threshold ?? (lossFn === "ppo" ? 0.8 : 0),
      hi = config.clip_high_threshold ?? (lossFn === "ppo" ? 1.2 : 4);
    if (!(lo >= 0 && hi >= 1 && lo <= 1))
      throw new TinkerError(
        `loss_fn_config: clip thresholds must satisfy 0 <= low <= 1 <= high, got ${lo} and ${hi}`,
        undefined,
        400,
      );
    spec.clipLow = 1 - lo;
    spec.clipHigh = hi - 1;
  }
  if (lossFn === "dro") {
    const beta = config.beta ?? 0.05;
    if (!(beta >= 0)) throw new TinkerError(`loss_fn_config.beta must be >= 0, got ${beta}`);
    spec.beta = beta;
  }
  return spec;
}

/** Our datums for wire datums; each input checked for presence, shape (1-D), length and finiteness. */
export function wireDatums(data: WireDatum[], lossFn: string): Datum[] {
  const need = LOSS_INPUTS[lossFn] ?? ["target_tokens"];
  return data.map((d, i) => {
    const n = d.tokens.length;
    if (n === 0) throw new TinkerError(`data[${i}]: model_input is empty`, undefined, 400);
    for (const [k, t] of Object.entries(d.inputs)) {
      if (t.shape && t.shape.length !== 1)
        throw new TinkerError(
          `data[${i}]: loss_fn_inputs.${k} has shape [${t.shape.join(", ")}]; a loss input holds one value per input token (shape [${n}])`,
        );
      if (t.data.some((x) => !Number.isFinite(x)))
        throw new TinkerError(`data[${i}]: loss_fn_inputs.${k} holds a non-finite number`, undefined, 400);
    }
    for (const k of need) {
      const t = d.inputs[k];
      if (!t) throw new TinkerError(`data[${i}]: loss_fn_inputs.${k} is required by ${lossFn}`, undefined, 400);
      if (t.data.length !== n)
        throw new TinkerError(
          `data[${i}]: loss_fn_inputs.${k} has ${t.data.length} values for ${n} input tokens`,
          undefined,
          400,
        );
    }
    const weights =
      lossFn === "cross_entropy" ? (d.inputs.weights?.data ?? d.tokens.map(() => 1)) : d.tokens.map(() => 1);
    if (weights.length !== n)
      throw new TinkerError(
        `data[${i}]: loss_fn_inputs.weights has ${weights.length} values for ${n} input tokens`,
        undefined,
        400,
      );
    return {
      tokens: d.tokens,
      targetTokens: d.inputs.target_tokens.data,
      weights,
      ...(d.inputs.advantages ? { advantages: d.inputs.advantages.data } : {}),
      ...(d.inputs.logprobs ? { logprobs: d.inputs.logprobs.data } : {}),
    };
  });
}

/** Per datum, each token's loss under `spec`, given the learner's logprobs (weights applied, as summed). */
export function elementwiseLosses(datums: Datum[], spec: LossSpec, logprobs: number[][]): number[][] {
  const loss = resolvedLoss(spec);
  return datums.map((d, i) =>
    logprobs[i].map(
      (p, t) => d.weights[t] * policyTokenLoss(loss, p, d.logprobs?.[t] ?? 0, d.advantages?.[t] ?? 0).loss,
    ),
  );
}
