/**
 * The built-in multi-turn tool environment. Each step parses the action's
 * tool calls with the format, runs them all concurrently, and answers with
 * their results as messages. The episode ends on a turn with an answer
 * (default `<answer>...</answer>`; tool calls in that turn are not run) or a
 * turn without tool calls.
 *
 * Rewards: each call's process reward is summed onto the step that made it;
 * `outcomeReward`, when given, is added on the final step. Both are also in
 * `info.rewards` so they can be normalized apart.
 */
import type { ToolSchema } from "../model/chat-template.js";
import { InputError } from "../util/errors.js";
import type { AgentMessage } from "./chat-setup.js";
import type { Action, Env, Observation, StepResult } from "./env.js";
import { hermesFormat } from "./formats/hermes.js";
import type { ToolCallFormat } from "./formats/types.js";
import { toolSchema, type AnyTool } from "./tool.js";
import { countToolErrors, runToolCall, type ToolCallRecord } from "./tool-runner.js";

export interface OutcomeInput<Row> {
  /** Text of the answer (inside the answer pattern's first group), or undefined when the episode ended without one. */
  answer: string | undefined;
  row: Row;
  groundTruth: unknown;
  /** Every action's text, in order. */
  actions: string[];
  /** Every tool call the episode ran, in order (with its parsed arguments and what it returned). */
  calls: ToolCallRecord[];
}

export interface ToolEnvOptions<Row> {
  tools: AnyTool[];
  /** Default: Hermes/Qwen. */
  format?: ToolCallFormat;
  /** Matches an answer; group 1 is the answer text. null: only a turn without tool calls ends the episode. */
  answerPattern?: RegExp | null;
  outcomeReward?: (o: OutcomeInput<Row>) => number | Promise<number>;
  /** The first messages. Default: `row.prompt` (Agent-R1 rows), else `row.messages`. */
  prompt?: (row: Row) => AgentMessage[];
  /** Default: `row.reward_model.ground_truth`, else `row.ground_truth`. */
  groundTruth?: (row: Row) => unknown;
}

export const DEFAULT_ANSWER_PATTERN = /<answer>([\s\S]*?)<\/answer>/;

function field(row: unknown, key: string): unknown {
  return typeof row === "object" && row !== null ? (row as Record<string, unknown>)[key] : undefined;
}

function defaultPrompt(row: unknown): AgentMessage[] {
  const p = field(row, "prompt") ?? field(row, "messages");
  if (!Array.isArray(p))
    throw new InputError(
      "ToolEnv: the row has no 'prompt' (or 'messages') list of chat messages",
      "pass ToolEnvOptions.prompt = (row) => messages",
    );
  return p as AgentMessage[];
}

function defaultGroundTruth(row: unknown): unknown {
  return field(field(row, "reward_model"), "ground_truth") ?? field(row, "ground_truth");
}

export class ToolEnv<Row = unknown> implements Env<Row> {
  readonly tools: ToolSchema[];
  readonly format: ToolCallFormat;
  private readonly byName: Map<string, AnyTool>;
  private readonly answerPattern: RegExp | null;
  private row: Row | undefined;
  private started = false;
  private groundTruth: unknown;
  private calls: ToolCallRecord[] = [];
  private actions: string[] = [];

  constructor(private readonly opts: ToolEnvOptions<Row>) {
    this.byName = new Map();
    for (const t of opts.tools) {
      if (this.byName.has(t.name))
        throw new InputError(`ToolEnv: two tools are named '${t.name}'`, "give each tool a unique name");
      this.byName.set(t.name, t);
    }
    this.tools = opts.tools.map(toolSchema);
    this.format = opts.format ?? hermesFormat;
    const p = opts.answerPattern === undefined ? DEFAULT_ANSWER_PATTERN : opts.answerPattern;
    // exec() on a global or sticky pattern is stateful (lastIndex); drop those flags.
    this.answerPattern = p && new RegExp(p.source, p.flags.replace(/[gy]/g, ""));
  }

  reset(row: Row): Observation {
    this.row = row;
    this.started = true;
    this.groundTruth = (this.opts.groundTruth ?? defaultGroundTruth)(row);
    this.calls = [];
    this.actions = [];
    return { messages: [...(this.opts.prompt ?? defaultPrompt)(row)] };
  }

  async step(action: Action): Promise<StepResult> {
    if (!this.started) throw new InputError("ToolEnv.step called before reset");
    this.actions.push(action.text);
    const answer = this.answerPattern?.exec(action.text)?.[1];
    const parsed = this.format.parse(action.text);
    if (answer !== undefined || parsed.calls.length === 0) return this.finish(answer, parsed.calls.length);

    const records = await Promise.all(
      parsed.calls.map((call, i) =>
        runToolCall(call, this.byName, {
          row: this.row,
          groundTruth: this.groundTruth,
          callIndex: this.calls.length + i,
          turn: action.turn,
          usage: this.format.usage,
        }),
      ),
    );
    this.calls.push(...records);
    const process = records.reduce((s, r) => s + (r.reward ?? 0), 0);
    return {
      observation: { messages: this.format.resultMessages(records.map((r) => ({ name: r.name, text: r.text }))) },
      reward: process,
      done: false,
      info: { toolCalls: records, toolErrors: countToolErrors(records), rewards: { process, outcome: 0 } },
    };
  }

  assistantMessage(action: Action): AgentMessage {
    return this.format.assistantMessage(action.text);
  }

  private async finish(answer: string | undefined, skippedCalls: number): Promise<StepResult> {
    const outcome = this.opts.outcomeReward
      ? await this.opts.outcomeReward({
          answer,
          row: this.row as Row,
          groundTruth: this.groundTruth,
          actions: [...this.actions],
          calls: [...this.calls],
        })
      : 0;
    return {
      observation: { messages: [] },
      reward: outcome,
      done: true,
      info: { toolCalls: [], answer: answer ?? null, skippedCalls, rewards: { process: 0, outcome } },
    };
  }
}
