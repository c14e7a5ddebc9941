/** A trajectory decoded for people: text instead of token ids, tool calls summarized. Not for training. */
import type { Tokenizer } from "../model/tokenizer.js";
import type { EndReason, Trajectory } from "./trajectory.js";

export interface DecodedStep {
  /** Present where the step starts a segment (the first step, or after a rewrite). */
  context?: string;
  action: string;
  observation: string;
  reward: number;
  done: boolean;
  stopReason: string;
  toolCalls: { name: string | null; arguments: unknown; ok: boolean; error?: string; text: string; ms: number }[];
}

export interface DecodedTrajectory {
  id: string;
  rowIndex: number;
  sampleIndex: number;
  reward: number;
  endReason: EndReason;
  error?: string;
  driftTokens?: number;
  steps: DecodedStep[];
}

export function decodeTrajectory(t: Trajectory, tokenizer: Tokenizer): DecodedTrajectory {
  return {
    id: t.id,
    rowIndex: t.rowIndex,
    sampleIndex: t.sampleIndex,
    reward: t.reward,
    endReason: t.endReason,
    ...(t.error ? { error: `${t.error.stage}: ${t.error.name}: ${t.error.message}` } : {}),
    ...(t.drift ? { driftTokens: t.drift.differingTokens } : {}),
    steps: t.steps.map((s) => ({
      ...(s.context ? { context: tokenizer.decode(s.context) } : {}),
      action: tokenizer.decode(s.action),
      observation: tokenizer.decode(s.observation),
      reward: s.reward,
      done: s.done,
      stopReason: s.stopReason,
      toolCalls: s.toolCalls.map((c) => ({
        name: c.name,
        arguments: c.arguments,
        ok: c.ok,
        ...(c.error ? { error: c.error.kind } : {}),
        text: c.text,
        ms: Math.round(c.durationMs),
      })),
    })),
  };
}

/** The whole trajectory as one transcript, with each step's action marked. */
export function formatTrajectory(t: Trajectory, tokenizer: Tokenizer): string {
  const d = decodeTrajectory(t, tokenizer);
  const lines = [
    `# trajectory ${d.id} (row ${d.rowIndex}, sample ${d.sampleIndex}): reward ${d.reward}, ${d.endReason}${d.error ? ` (${d.error})` : ""}`,
  ];
  d.steps.forEach((s, i) => {
    if (s.context !== undefined) lines.push(`--- context${i > 0 ? " (rewritten)" : ""} ---`, s.context);
    lines.push(`--- action ${i} (${s.stopReason}, reward ${s.reward}) ---`, s.action);
    if (s.observation) lines.push(`--- observation ${i} ---`, s.observation);
  });
  return lines.join("\n");
}
