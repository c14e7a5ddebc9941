/**
 * A task: the rows of a dataset split, the environment (tools + reward) each
 * row is played in, per-episode metrics, and a scripted expert for warm-start
 * demonstrations. The trainer, `eval`, `pretrain` and `data` see tasks only
 * through this interface.
 */
import type { ChatMessage, ToolSchema } from "../model/chat-template.js";
import type { Env } from "../agent/env.js";
import type { Trajectory } from "../agent/trajectory.js";
import type { Tokenizer } from "../model/tokenizer.js";
import type { Engine } from "../engine/types.js";
import type { RolloutResult } from "../agent/rollout.js";

export type Split = "train" | "val" | "test";

/** One example, in Agent-R1's row format (the fields of its parquet files). */
export interface TaskRow {
  data_source: string;
  agent_name: string;
  /** The first messages (system + user). */
  prompt: ChatMessage[];
  ability?: string;
  reward_model: { style: "rule"; ground_truth: string };
  extra_info: { split: string; index: number; question?: string; answer?: string; [k: string]: unknown };
  /** JSON string: {"env_type":"tool","tools":[...],"tool_format":"hermes","tools_kwargs":{...}}. */
  env_kwargs?: string;
}

/** Per-episode numbers the trainer averages and logs (all in [0, 1] unless counts). */
export interface EpisodeScore {
  /** The outcome reward the env gave. */
  reward: number;
  /** Exact match (multihop) / success (calc), 0 or 1. */
  em: number;
  f1: number;
  /** 1 when the final answer was well-formed (e.g. inside <answer>...</answer>). */
  formatOk: number;
}

export interface Task {
  name: string;
  /** Rows of a split, deterministic for the task's seed option. */
  rows(split: Split): TaskRow[];
  /** A fresh environment for one row. */
  makeEnv(row: TaskRow): Env<TaskRow>;
  /** Scores a finished trajectory (decoding it with the tokenizer as needed). */
  score(trajectory: Trajectory, row: TaskRow, tokenizer: Tokenizer): EpisodeScore;
  /**
   * Scripted expert demonstrations for warm start: whole conversations (prompt,
   * assistant turns with tool calls, tool results, final answer), in the
   * messages the chat template renders. `quality` in [0, 1] mixes in imperfect
   * behaviour (answering without searching, guessing) at rate 1 - quality.
   */
  demonstrations(rows: TaskRow[], opts: { seed: number; quality: number }): ChatMessage[][];
  /** Text for building a task tokenizer (documents, questions, answers, tool calls). */
  corpus(): Iterable<string>;
  /**
   * Plays rows its own way instead of `makeEnv` envs (an agent of the user's through the recording
   * gateway): the same result a rollout gives.
   */
  play?(engine: Engine, rows: TaskRow[], opts: TaskPlayOptions): Promise<RolloutResult>;
  /** The tool schemas its envs list in the prompt, when known (the trainer warns when they fill the context). */
  readonly tools?: ToolSchema[];
  /** Releases what the task holds open (the MCP servers of a recipe's task.mcp); called once the run ends. */
  close?(): Promise<void>;
}

export interface TaskPlayOptions {
  n: number;
  seed: number;
  temperature?: number;
  topP?: number;
  /** Whose sampling settings an agent task's completions use: the recipe's (default) or the agent's requests'. */
  agentSampling?: "recipe" | "agent";
  maxTurns: number;
  maxTokensPerTurn: number;
  maxTotalTokens: number;
  log?: (line: string) => void;
}

export type TaskFactory = (options: Record<string, unknown>) => Task;
