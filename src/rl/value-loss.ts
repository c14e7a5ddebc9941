/**
 * The critic's value loss, as both engines compute it, in plain numbers: at a position with weight
 * w (already divided by the call's total weight), return R, value V and, with a clip, the value
 * the data was sampled with: ½ · w · max((V − R)², (clip(V) − R)²), where clip(V) = old +
 * clamp(V − old, ±clip). Its derivative follows tf.maximum's: the unclipped term on a tie, and the
 * clipped term is flat where the clip binds.
 */
import type { ValueDatum } from "../engine/types.js";

/** The loss at one position and its derivative in V. */
export function valueLossAt(V: number, R: number, w: number, clip: number, old = 0): { loss: number; grad: number } {
  let sq = (V - R) ** 2,
    dsq = 2 * (V - R);
  if (clip > 0) {
    const raw = V - old;
    const Vc = old + Math.max(-clip, Math.min(clip, raw));
    const sqc = (Vc - R) ** 2;
    if (sqc > sq) [sq, dsq] = [sqc, Math.abs(raw) <= clip ? 2 * (Vc - R) : 0];
  }
  return { loss: 0.5 * w * sq, grad: 0.5 * w * dsq };
}

/** Positions with weight, and how many of them the clip bound (|V − old| > clip), over a call's datums and values. */
export function clipCounts(
  datums: ValueDatum[],
  values: number[][],
  clip: number,
): { tokens: number; clipped: number } {
  let tokens = 0,
    clipped = 0;
  datums.forEach((d, i) =>
    d.weights.forEach((w, t) => {
      if (w <= 0) return;
      tokens++;
      if (clip > 0 && Math.abs(values[i][t] - d.oldValues![t]) > clip) clipped++;
    }),
  );
  return { tokens, clipped };
}
