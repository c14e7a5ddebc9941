/**
 * A task module played in the built-in rollout instead of through the gateway. It exports its rows
 * (./user-module.ts) and one of
 *   tools:   the tools of a ToolEnv (./module-tools.ts: ours, AI SDK, Agents SDK, JSON Schema), with
 *            optionally reward: (row, answer) => number   the outcome; answer is the text inside the
 *                                                        answer pattern, else the last reply's text
 *                      system: string                    the system prompt, for rows without one
 *                      prompt: (row) => messages         the first messages, for rows of any shape
 *                      format: a ToolCallFormat, or "hermes" / "llama3_json"
 *                      answerPattern: RegExp | null      default <answer>...</answer>
 *   makeEnv: (row, { tools }) => Env                     an env of its own; `tools` are the MCP ones
 * The tools of the recipe's MCP servers (task.mcp) join the module's; with task.mcp a module may
 * export rows alone, and without a module the rows come from data.train.
 *
 * First messages, by default: `row.prompt` or `row.messages` (Agent-R1 rows), else the system
 * prompt and `row.question`. Without a `reward`, the outcome is exact match of the answer against
 * the row's ground truth (`reward_model.ground_truth`, `ground_truth` or `answer`). The first row
 * is tried when the task loads, so a module that cannot make a prompt or has no reward fails in one
 * line then, not in every episode.
 */
import { hermesFormat } from "../agent/formats/hermes.js";
import { llama3JsonFormat } from "../agent/formats/llama3.js";
import type { ToolCallFormat } from "../agent/formats/types.js";
import type { AgentMessage } from "../agent/chat-setup.js";
import type { Env } from "../agent/env.js";
import { toolSchema, type AnyTool } from "../agent/tool.js";
import { DEFAULT_ANSWER_PATTERN, ToolEnv, type OutcomeInput } from "../agent/tool-env.js";
import type { Trajectory } from "../agent/trajectory.js";
import type { Tokenizer } from "../model/tokenizer.js";
import { exactMatch, f1Score } from "../rewards/qa.js";
import { InputError } from "../util/errors.js";
import { actionTexts } from "./common/episode.js";
import type { EpisodeScore, Split, Task, TaskRow } from "./types.js";
import type { UserModule } from "./user-module.js";

type Obj = Record<string, unknown>;
const field = (row: unknown, key: string): unknown =>
  row !== null && typeof row === "object" ? (row as Obj)[key] : undefined;

export interface ToolTaskInput {
  /** The module's exports (none without a task.module). */
  mod: UserModule;
  where: string;
  name: string;
  rows: (split: Split) => TaskRow[];
  /** The module's tools, as ours. */
  tools: AnyTool[];
  /** The MCP servers' tools. */
  mcpTools: AnyTool[];
  close?: () => Promise<void>;
}

const FORMATS: Record<string, ToolCallFormat> = { hermes: hermesFormat, llama3_json: llama3JsonFormat };

function formatOf(x: unknown, where: string): ToolCallFormat {
  if (x === undefined) return hermesFormat;
  if (typeof x === "string" && Object.hasOwn(FORMATS, x)) return FORMATS[x];
  const f = x as Partial<ToolCallFormat> | null;
  if (f && typeof f === "object" && typeof f.parse === "function" && typeof f.resultMessages === "function")
    return f as ToolCallFormat;
  throw new InputError(
    `${where}: format must be a ToolCallFormat or one of ${Object.keys(FORMATS).join(", ")}, got ${typeof x === "string" ? `'${x}'` : typeof x}`,
  );
}

/** The row's ground truth where a row keeps one. */
export function groundTruthOf(row: unknown): unknown {
  return field(field(row, "reward_model"), "ground_truth") ?? field(row, "ground_truth") ?? field(row, "answer");
}

function promptOf(mod: UserModule, where: string): (row: TaskRow) => AgentMessage[] {
  if (mod.prompt !== undefined && typeof mod.prompt !== "function")
    throw new InputError(`${where}: prompt must be a function (row) => messages`);
  if (mod.system !== undefined && typeof mod.system !== "string")
    throw new InputError(`${where}: system must be a string`);
  const own = mod.prompt as ((row: TaskRow) => AgentMessage[]) | undefined;
  const system = mod.system as string | undefined;
  return (row) => {
    if (own) return own(row);
    const given = field(row, "prompt") ?? field(row, "messages");
    if (Array.isArray(given)) return given as AgentMessage[];
    const question = field(row, "question");
    if (typeof question !== "string")
      throw new InputError(
        `${where}: a row has no prompt, messages or question`,
        "export prompt: (row) => messages, or give rows a question",
      );
    return [...(system ? [{ role: "system", content: system }] : []), { role: "user", content: question }];
  };
}

function answerPatternOf(x: unknown, where: string): RegExp | null | undefined {
  if (x === undefined || x === null || x instanceof RegExp) return x;
  throw new InputError(`${where}: answerPattern must be a RegExp (group 1 is the answer) or null`);
}

/** The module's reward as ToolEnv's outcome, or exact match against the ground truth. */
function outcomeOf(mod: UserModule, where: string, format: ToolCallFormat) {
  if (mod.reward !== undefined && typeof mod.reward !== "function")
    throw new InputError(`${where}: reward must be a function (row, answer) => number`);
  const reward = mod.reward as ((row: TaskRow, answer: string | undefined) => unknown) | undefined;
  return async (o: OutcomeInput<TaskRow>): Promise<number> => {
    const answer = o.answer ?? format.parse(o.actions[o.actions.length - 1] ?? "").content;
    if (!reward) return exactMatch(answer, String(o.groundTruth ?? ""));
    const r = await reward(o.row, answer);
    if (typeof r !== "number" || !Number.isFinite(r))
      throw new Error(`${where}: reward returned ${String(r)}, not a finite number`);
    return r;
  };
}

/** em and f1 of the last reply against the row's ground truth (0 without one); reward as the env gave it. */
function scoreOf(format: ToolCallFormat, pattern: RegExp | null | undefined) {
  const answerIn = (text: string) =>
    (pattern === undefined ? DEFAULT_ANSWER_PATTERN : pattern)?.exec(text)?.[1] ?? format.parse(text).content;
  return (t: Trajectory, row: TaskRow, tokenizer: Tokenizer): EpisodeScore => {
    const done = t.endReason === "done" && t.steps.length > 0;
    const gold = groundTruthOf(row);
    if (!done || gold === undefined) return { reward: t.reward, em: 0, f1: 0, formatOk: done ? 1 : 0 };
    const actions = actionTexts(t, tokenizer);
    const answer = answerIn(actions[actions.length - 1]);
    return {
      reward: t.reward,
      em: exactMatch(answer, String(gold)),
      f1: f1Score(answer, String(gold)).f1,
      formatOk: 1,
    };
  };
}

function checkUniqueNames(input: ToolTaskInput): void {
  const seen = new Map<string, string>();
  for (const [tools, from] of [
    [input.tools, input.where],
    [input.mcpTools, "task.mcp"],
  ] as const)
    for (const t of tools) {
      const other = seen.get(t.name);
      if (other !== undefined)
        throw new InputError(
          `${from}: a tool named '${t.name}' is already offered by ${other}`,
          "exclude one of them (task.mcp[i].exclude)",
        );
      seen.set(t.name, from);
    }
}

function firstTrainRow(input: ToolTaskInput): TaskRow | undefined {
  try {
    return input.rows("train")[0];
  } catch {
    return undefined; // rows that come from data.train: nothing to try yet
  }
}

const noDemonstrations = (where: string) => () => {
  throw new InputError(`${where}: a module task has no scripted demonstrations (pretrain needs a built-in task)`);
};

/** A task whose episodes run in ToolEnv with the module's tools and the MCP servers'. */
export function toolTask(input: ToolTaskInput): Task {
  const { mod, where } = input;
  checkUniqueNames(input);
  const tools = [...input.tools, ...input.mcpTools];
  if (tools.length === 0) throw new InputError(`${where}: no tools (the module exports none, and task.mcp kept none)`);
  const format = formatOf(mod.format, where);
  const answerPattern = answerPatternOf(mod.answerPattern, where);
  const prompt = promptOf(mod, where);
  const outcomeReward = outcomeOf(mod, where, format);
  const row = firstTrainRow(input);
  if (row !== undefined) {
    const first = prompt(row);
    if (!Array.isArray(first) || first.length === 0)
      throw new InputError(`${where}: the first messages of the first row are not a list of chat messages`);
    if (mod.reward === undefined && groundTruthOf(row) === undefined)
      throw new InputError(
        `${where}: no reward, and the first row has no ground truth to match`,
        "export reward: (row, answer) => number, or give rows answer (or reward_model.ground_truth)",
      );
  }
  return {
    name: input.name,
    rows: input.rows,
    tools: tools.map(toolSchema),
    makeEnv: () =>
      new ToolEnv<TaskRow>({
        tools,
        format,
        ...(answerPattern !== undefined ? { answerPattern } : {}),
        prompt,
        groundTruth: groundTruthOf,
        outcomeReward,
      }),
    score: scoreOf(format, answerPattern),
    demonstrations: noDemonstrations(where),
    corpus: () => [],
    ...(input.close ? { close: input.close } : {}),
  };
}

/** A task whose episodes run in the module's own env; `makeEnv(row, { tools })` gets the MCP servers' tools. */
export function envTask(input: ToolTaskInput): Task {
  const { mod, where } = input;
  if (typeof mod.makeEnv !== "function") throw new InputError(`${where}: makeEnv must be a function (row) => Env`);
  if (mod.reward !== undefined)
    throw new InputError(`${where}: exports makeEnv and reward; an env gives its own rewards (reward goes with tools)`);
  const make = mod.makeEnv as (row: TaskRow, extra: { tools: AnyTool[] }) => Env<TaskRow>;
  const tools = input.mcpTools;
  return {
    name: input.name,
    rows: input.rows,
    ...(tools.length ? { tools: tools.map(toolSchema) } : {}),
    makeEnv(row) {
      const env = make(row, { tools });
      if (env === null || typeof env !== "object" || typeof env.reset !== "function" || typeof env.step !== "function")
        throw new InputError(
          `${where}: makeEnv returned ${env === null ? "null" : typeof env}, not an Env (reset, step)`,
        );
      return env;
    },
    score: scoreOf(hermesFormat, undefined),
    demonstrations: noDemonstrations(where),
    corpus: () => [],
    ...(input.close ? { close: input.close } : {}),
  };
}
