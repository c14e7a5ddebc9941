/**
 * The pieces of an iteration's metrics.jsonl line (the trainer assembles them), and the resume's
 * truncation of that file.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RolloutMetrics } from "../agent/rollout-metrics.js";
import type { EpisodeSummary } from "./evaluate.js";
import type { DistilledBatch } from "./prepare-batch.js";

type IterationMetrics = Record<string, number>;

/** A gateway rollout's traffic as metrics.jsonl keys: requests, new segments (all, and by reason), retries answered again. */
export function gatewayMetrics(g: RolloutMetrics["gateway"]): Record<string, number> {
  if (!g) return {};
  const out: Record<string, number> = {
    gateway_requests: g.requests,
    gateway_segments: Object.values(g.segments).reduce((a, b) => a + b, 0),
    gateway_replays: g.replays,
  };
  for (const [reason, n] of Object.entries(g.segments)) out[`gateway_segments_${reason}`] = n;
  return out;
}

/** A distilled batch as metrics.jsonl keys. */
export function distillMetrics(d: DistilledBatch): IterationMetrics {
  return { distill_teacher_logprob: d.teacherLogprob, distill_reverse_kl: d.reverseKl, distill_teacher_s: d.seconds };
}

/**
 * A resumed run drops metric lines written after its checkpoint, so no
 * iteration appears twice; a line torn by a kill mid-write is dropped too.
 */
export function truncateMetrics(out: string, iteration: number): void {
  const file = join(out, "metrics.jsonl");
  if (!existsSync(file)) return;
  const kept = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => {
      try {
        const it = (JSON.parse(l) as { iteration?: unknown }).iteration;
        return typeof it === "number" && it <= iteration;
      } catch {
        return false;
      }
    });
  writeFileSync(file, kept.map((l) => l + "\n").join(""));
}

export function prefixed(prefix: string, s: EpisodeSummary): IterationMetrics {
  return {
    [`${prefix}reward`]: s.reward,
    [`${prefix}em`]: s.em,
    [`${prefix}f1`]: s.f1,
    [`${prefix}format`]: s.format,
    [`${prefix}turns`]: s.turns,
    [`${prefix}tool_calls`]: s.toolCalls,
    [`${prefix}tool_errors`]: s.toolErrors,
    [`${prefix}response_tokens`]: s.responseTokens,
    [`${prefix}failed`]: s.failed,
  };
}

/** A rollout count per finished episode (0 without one). */
export function perEpisode(count: number, m: RolloutMetrics): number {
  return m.trajectories > 0 ? count / m.trajectories : 0;
}

export function std(xs: number[]): number {
  if (xs.length === 0) return 0;
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / xs.length);
}
