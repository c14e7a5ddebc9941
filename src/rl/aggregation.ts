/**
 * Loss aggregation: how per-token losses l reduce to one number over the
 * datums of one forwardBackward call, as verl's `agg_loss` (core_algos.py).
 * With w the loss weights (the mask), a sequence s a trajectory's whole
 * response, W_s = Σ_{t∈s} w_t, and S the number of sequences with W_s > 0:
 *   token-mean:              Σ w·l / Σ w
 *   seq-mean-token-sum:      (1/S)·Σ_s Σ_{t∈s} w·l
 *   seq-mean-token-mean:     (1/S)·Σ_s (Σ_{t∈s} w·l) / W_s
 *   seq-mean-token-sum-norm: Σ w·l / normalizer  (Dr. GRPO: a fixed normalizer, no division by the batch size)
 *   sum:                     Σ w·l  (Tinker's convention)
 * A sequence with no loss tokens (W_s = 0, e.g. masked as overlong) is not
 * counted in S. Datums that share a `sequence` id are one sequence (a
 * trajectory that a context rewrite split into several datums counts once);
 * a datum without one is a sequence by itself.
 *
 * Returned as a coefficient c per token, so the loss is Σ c·l: linear in l,
 * so micro-batches and replicas of one call add up to exactly the loss of the
 * whole call. The counts (Σ w, S) are over one call; the trainer makes one
 * call per optimizer step, as verl counts over the mini-batch of one step.
 */
import type { LossAggregation } from "../engine/types.js";
import { InputError } from "../util/errors.js";

export interface AggregationRow {
  weights: readonly number[];
  sequence?: number;
}

const total = (w: readonly number[]) => w.reduce((s, x) => s + x, 0);

/** Sequence key of each row: its `sequence` id, or the row itself (the off-policy masks group by it too). */
export const sequenceKeys = (rows: readonly AggregationRow[]): string[] =>
  rows.map((r, i) => (r.sequence !== undefined ? `s${r.sequence}` : `d${i}`));

/** Per token, the coefficient c of its loss in the aggregated loss Σ c·l. */
export function aggregationCoefficients(
  rows: readonly AggregationRow[],
  agg: LossAggregation,
  normalizer?: number,
): number[][] {
  switch (agg) {
    case "sum":
      return rows.map((r) => r.weights.slice());
    case "token-mean": {
      const all = rows.reduce((s, r) => s + total(r.weights), 0);
      return rows.map((r) => r.weights.map((x) => (all > 0 ? x / all : 0)));
    }
    case "seq-mean-token-sum-norm": {
      if (!normalizer || normalizer <= 0)
        throw new InputError("loss.normalizer must be a positive number for aggregation seq-mean-token-sum-norm");
      return rows.map((r) => r.weights.map((x) => x / normalizer));
    }
    case "seq-mean-token-sum":
    case "seq-mean-token-mean": {
      const keys = sequenceKeys(rows);
      const weightOf = new Map<string, number>();
      rows.forEach((r, i) => weightOf.set(keys[i], (weightOf.get(keys[i]) ?? 0) + total(r.weights)));
      const S = [...weightOf.values()].filter((w) => w > 0).length;
      return rows.map((r, i) => {
        const W = weightOf.get(keys[i])!;
        if (!(W > 0)) return r.weights.map(() => 0);
        return r.weights.map((x) => (agg === "seq-mean-token-sum" ? x / S : x / (W * S)));
      });
    }
  }
}
