/**
 * A trajectory: one episode as a list of steps, in token ids exactly as the
 * policy saw and sampled them. Step k's context is either stored, or (when
 * `extendsPrevious`) it is step k-1's context + action + observation; a flow
 * that rewrites history stores the new context and so starts a new segment
 * (a new training datum). Plain JSON: no classes, no undefined in arrays.
 */
import type { StopReason } from "../engine/types.js";
import type { DriftReport } from "./drift.js";
import { countToolErrors, type ToolCallRecord, type ToolErrorKind } from "./tool-runner.js";

export interface TrajectoryStep {
  /** The context at the step's start; omitted when `extendsPrevious`. */
  context?: number[];
  extendsPrevious: boolean;
  /** Sampled token ids and their sampling logprobs. */
  action: number[];
  logprobs: number[];
  stopReason: StopReason;
  /** Tokens appended after the action (the tokenized observation delta); [] when no turn follows. */
  observation: number[];
  reward: number;
  done: boolean;
  toolCalls: ToolCallRecord[];
  /** The env's info without toolCalls. */
  info: Record<string, unknown>;
  timing: { sampleMs: number; envMs: number };
  /** The policy version (optimizer steps) that sampled the action, when the engine reported one (train.async). */
  policyVersion?: number;
}

export type EndReason = "done" | "max_turns" | "max_total_tokens" | "failed";

export interface TrajectoryError {
  stage: "reset" | "step" | "close";
  name: string;
  message: string;
}

export interface TrajectoryMetrics {
  turns: number;
  actionTokens: number;
  observationTokens: number;
  /** Length of the last context + action + observation. */
  finalTokens: number;
  toolCalls: number;
  toolErrors: Record<ToolErrorKind, number>;
  wallMs: number;
}

export interface Trajectory {
  id: string;
  /** Which row, and which of its n samples (rows x n form the groups). */
  rowIndex: number;
  sampleIndex: number;
  steps: TrajectoryStep[];
  /** Sum of the step rewards. */
  reward: number;
  endReason: EndReason;
  error?: TrajectoryError;
  drift?: DriftReport;
  /** Why the drift check could not run (the template refused the re-rendered conversation). */
  driftError?: string;
  metrics: TrajectoryMetrics;
}

/** Materializes step i's context. */
export function stepContext(t: Trajectory, i: number): number[] {
  let start = i;
  while (start > 0 && t.steps[start].extendsPrevious) start--;
  const first = t.steps[start].context;
  if (!first) throw new Error(`internal: step ${start} of trajectory ${t.id} stores no context`);
  const out = first.slice();
  for (let k = start; k < i; k++) out.push(...t.steps[k].action, ...t.steps[k].observation);
  return out;
}

/** The last context + action + observation: every token of the final segment. */
export function finalTokens(t: Trajectory): number[] {
  if (t.steps.length === 0) return [];
  const last = t.steps.length - 1;
  return [...stepContext(t, last), ...t.steps[last].action, ...t.steps[last].observation];
}

/** Steps grouped into segments: each starts at a stored context and extends it to its end. */
export function segments(t: Trajectory): number[][] {
  const out: number[][] = [];
  t.steps.forEach((s, i) => (s.extendsPrevious && out.length ? out[out.length - 1].push(i) : out.push([i])));
  return out;
}

export type StepInput = Omit<TrajectoryStep, "context" | "extendsPrevious">;

/** Collects steps, storing a context only where it does not extend the previous step's tokens. */
export class TrajectoryBuilder {
  private steps: TrajectoryStep[] = [];
  private end: number[] | undefined; // previous context + action + observation
  private readonly started = performance.now();

  constructor(
    readonly id: string,
    readonly rowIndex: number,
    readonly sampleIndex: number,
  ) {}

  add(context: number[], step: StepInput): void {
    const extendsPrevious =
      this.end !== undefined && this.end.length === context.length && this.end.every((t, i) => t === context[i]);
    this.steps.push({ ...(extendsPrevious ? {} : { context: context.slice() }), extendsPrevious, ...step });
    this.end = [...context, ...step.action, ...step.observation];
  }

  get length(): number {
    return this.steps.length;
  }

  finish(endReason: EndReason, extra: Pick<Trajectory, "error" | "drift" | "driftError"> = {}): Trajectory {
    const calls = this.steps.flatMap((s) => s.toolCalls);
    const t: Trajectory = {
      id: this.id,
      rowIndex: this.rowIndex,
      sampleIndex: this.sampleIndex,
      steps: this.steps,
      reward: this.steps.reduce((s, x) => s + x.reward, 0),
      endReason,
      ...extra,
      metrics: {
        turns: this.steps.length,
        actionTokens: this.steps.reduce((s, x) => s + x.action.length, 0),
        observationTokens: this.steps.reduce((s, x) => s + x.observation.length, 0),
        finalTokens: this.end?.length ?? 0,
        toolCalls: calls.length,
        toolErrors: countToolErrors(calls),
        wallMs: performance.now() - this.started,
      },
    };
    return t;
  }
}
