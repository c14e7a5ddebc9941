/**
 * A forward-only pass of `serve --tinker` (`forward`, or forward_backward with forward_only) on the
 * local engine, which scores sequences (computeLogprobs: each token given the ones before it) but
 * has no forward pass for arbitrary targets. Position j of a datum with input x and targets t
 * scores t[j] after x[0..j]. Where t is x shifted by one (as the SDK's data is), one sequence,
 * x followed by the last target, scores every position; a position whose target is not the next
 * input token is scored on its own sequence, x[0..j] followed by t[j]. So any targets are answered
 * exactly, as forward_backward answers them, and only targets that differ cost more: those extra
 * sequences count against the request's token budget (planTokens) before anything runs.
 */
import type { Datum } from "../../engine/types.js";

/** The sequences to score, and where each datum's logprobs are found among their entries. */
export interface ScorePlan {
  sequences: number[][];
  /** Per datum, per target position: [sequence index, entry index]. */
  picks: [number, number][][];
}

export function scorePlan(datums: readonly Datum[]): ScorePlan {
  const sequences: number[][] = [];
  const picks = datums.map((d) => {
    const x = d.tokens,
      t = d.targetTokens,
      n = x.length;
    const main = sequences.push([...x, t[n - 1]]) - 1;
    return t.map((target, j): [number, number] => {
      if (j === n - 1 || target === x[j + 1]) return [main, j + 1];
      return [sequences.push([...x.slice(0, j + 1), target]) - 1, j + 1];
    });
  });
  return { sequences, picks };
}

/** The tokens a plan makes the engine score. */
export function planTokens(plan: ScorePlan): number {
  return plan.sequences.reduce((s, q) => s + q.length, 0);
}

/** Scores a plan: per datum, the logprob of each target. */
export async function forwardLogprobs(
  engine: { computeLogprobs(sequences: number[][]): Promise<(number | null)[][]> },
  plan: ScorePlan,
): Promise<number[][]> {
  const scored = await engine.computeLogprobs(plan.sequences);
  return plan.picks.map((row) => row.map(([s, e]) => scored[s][e] as number));
}
