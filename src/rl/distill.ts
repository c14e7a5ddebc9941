/**
 * On-policy distillation as a per-token advantage (algorithm.distill). The student samples its own
 * episodes; a teacher model scores the very tokens the student sampled, in the same contexts. On
 * each action token, with s the student's logprob of the token and q the teacher's,
 *
 *   d = s − q                        (a one-sample estimate of the reverse KL, KL(student ‖ teacher), at that position)
 *   A ← A + coef·(q − s) = A − coef·d
 *
 * where A is the advantage the task reward's estimator gave the token (0 when the teacher trains
 * alone). The term goes straight into the advantage, one token at a time, with no reward-to-go:
 * a token the teacher finds likelier than the student did is pushed up, one it finds less likely is
 * pushed down, and what the student did later in the episode does not blur that judgement (the
 * choice tinker-cookbook's on-policy distillation makes by default). Prompt and observation
 * positions (mask 0) get nothing and are not counted in the metrics.
 *
 * A teacher's logprob below TEACHER_LOGPROB_FLOOR (a token it calls impossible, −∞) is raised to
 * the floor, so one such token gives a large but finite push down instead of an infinite one.
 *
 * Metrics, over the batch's action tokens (token mean): the teacher's mean logprob and the mean of d.
 */
import type { Datum } from "../engine/types.js";
import { InputError } from "../util/errors.js";

/** The lowest teacher logprob used, in nats. */
export const TEACHER_LOGPROB_FLOOR = -30;

type Rows = readonly (readonly number[])[];

export interface DistillInput {
  /** Per datum position: the student's logprob of the target (the sampling logprob, or the learner's). */
  student: Rows;
  /** Per datum position: the teacher's logprob of the same target. */
  teacher: Rows;
  /** 1 on action tokens, 0 on prompt and observation targets. */
  mask: Rows;
}

export interface DistillMetrics {
  /** Mean teacher logprob over action tokens (after the floor). */
  teacherLogprob: number;
  /** Mean of s − q over action tokens. */
  reverseKl: number;
  /** Action tokens measured. */
  tokens: number;
}

export interface DistillResult {
  /** Per datum position: −coef·(s − q) on action tokens, 0 elsewhere. */
  advantages: number[][];
  metrics: DistillMetrics;
}

export function distillAdvantages(input: DistillInput, coef: number): DistillResult {
  const { student, teacher, mask } = input;
  let n = 0,
    sumTeacher = 0,
    sumKl = 0;
  const advantages = mask.map((row, d) => {
    if (student[d]?.length !== row.length || teacher[d]?.length !== row.length)
      throw new InputError(`datum ${d}: student, teacher and mask must have one entry per position (${row.length})`);
    return row.map((m, i) => {
      if (!(m > 0)) return 0;
      const s = student[d][i];
      const q = Math.max(TEACHER_LOGPROB_FLOOR, teacher[d][i]);
      if (!Number.isFinite(s) || Number.isNaN(q))
        throw new InputError(`datum ${d}, position ${i}: logprobs must be numbers (student ${s}, teacher ${q})`);
      n++;
      sumTeacher += q;
      sumKl += s - q;
      return -coef * (s - q);
    });
  });
  const m = Math.max(1, n);
  return { advantages, metrics: { teacherLogprob: sumTeacher / m, reverseKl: sumKl / m, tokens: n } };
}

/** Datums with `extra[j][i]` added to their advantages (absent advantages count as 0); the inputs are not changed. */
export function addAdvantages(datums: readonly Datum[], extra: Rows): Datum[] {
  return datums.map((d, j) => {
    if (extra[j]?.length !== d.targetTokens.length)
      throw new InputError(`datum ${j}: ${d.targetTokens.length} positions, but ${extra[j]?.length ?? 0} advantages`);
    return { ...d, advantages: d.targetTokens.map((_, i) => (d.advantages?.[i] ?? 0) + extra[j][i]) };
  });
}
