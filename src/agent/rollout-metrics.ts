/** Batch metrics over a rollout's trajectories (pure; one flat record per rollout, ready for metrics.jsonl). */
import { TOOL_ERROR_KINDS, type ToolErrorKind } from "./tool-runner.js";
import type { EndReason, Trajectory } from "./trajectory.js";

export interface RolloutMetrics {
  trajectories: number;
  /** Left out of the batch: their env threw or broke its contract. */
  failed: number;
  failedAtReset: number;
  failedAtStep: number;
  failedAtClose: number;
  endReasons: Record<EndReason, number>;
  meanTurns: number;
  /** Turns a flow asked for itself (a compaction's summaries), over all trajectories; counted in the turns too. */
  flowTurns: number;
  meanReward: number;
  actionTokens: number;
  observationTokens: number;
  toolCalls: number;
  toolErrors: Record<ToolErrorKind, number>;
  /** Trajectories whose re-rendered conversation differs from their tokens, and the mean differing tokens. */
  driftChecked: number;
  driftMismatches: number;
  /** Trajectories whose conversation the template refused to re-render. */
  driftErrors: number;
  meanDriftTokens: number;
  wallMs: number;
  /** Sampled action tokens per second of wall time. */
  actionTokensPerSecond: number;
  /** Gateway episodes: completions sampled, requests that started a new segment by reason, retries answered again. */
  gateway?: { requests: number; segments: Record<string, number>; replays: number };
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export function rolloutMetrics(all: Trajectory[], wallMs: number): RolloutMetrics {
  const ok = all.filter((t) => t.endReason !== "failed");
  const failed = all.filter((t) => t.endReason === "failed");
  const endReasons: Record<EndReason, number> = { done: 0, max_turns: 0, max_total_tokens: 0, failed: 0 };
  for (const t of all) endReasons[t.endReason]++;
  const toolErrors = Object.fromEntries(TOOL_ERROR_KINDS.map((k) => [k, 0])) as Record<ToolErrorKind, number>;
  for (const t of all) for (const k of TOOL_ERROR_KINDS) toolErrors[k] += t.metrics.toolErrors[k];
  const drifts = ok.flatMap((t) => (t.drift ? [t.drift] : []));
  const actionTokens = all.reduce((s, t) => s + t.metrics.actionTokens, 0);
  return {
    trajectories: ok.length,
    failed: failed.length,
    failedAtReset: failed.filter((t) => t.error?.stage === "reset").length,
    failedAtStep: failed.filter((t) => t.error?.stage === "step").length,
    failedAtClose: failed.filter((t) => t.error?.stage === "close").length,
    endReasons,
    meanTurns: mean(ok.map((t) => t.metrics.turns)),
    flowTurns: ok.reduce((s, t) => s + t.steps.filter((x) => x.info.flowTurn !== undefined).length, 0),
    meanReward: mean(ok.map((t) => t.reward)),
    actionTokens,
    observationTokens: all.reduce((s, t) => s + t.metrics.observationTokens, 0),
    toolCalls: all.reduce((s, t) => s + t.metrics.toolCalls, 0),
    toolErrors,
    driftChecked: drifts.length,
    driftMismatches: drifts.filter((d) => d.firstDiff >= 0).length,
    driftErrors: ok.filter((t) => t.driftError !== undefined).length,
    meanDriftTokens: mean(drifts.map((d) => d.differingTokens)),
    wallMs,
    actionTokensPerSecond: wallMs > 0 ? actionTokens / (wallMs / 1000) : 0,
  };
}
