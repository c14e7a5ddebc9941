/**
 * `agent-r1 chat`: ask a model questions in the terminal and watch it work a
 * task's tools. Each line is one question, played as one episode of the task
 * (same system prompt, tools and env as the task's rows) by the agent loop;
 * every assistant turn, tool call and tool response is printed as it happens,
 * then the answer. Questions do not share context.
 */
import { openModel } from "../engines.js";
import { AgentLoop } from "../../agent/agent-loop.js";
import { chatSetup, type ChatSetup } from "../../agent/chat-setup.js";
import type { Action, Env, StepResult } from "../../agent/env.js";
import { LOOP_DEFAULTS } from "../../agent/loop-options.js";
import { defaultWorkers } from "../../engine/local/local-engine.js";
import type { Engine } from "../../engine/types.js";
import type { Task, TaskRow } from "../../tasks/types.js";
import { InputError } from "../../util/errors.js";
import { Rng } from "../../util/rng.js";
import { noPositionals, optionalNumber, parseFlags, requireString, usageError, type FlagSpec } from "../args.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";
import { answerLines, assistantLines, questionLines, toolCallLines } from "../chat-view.js";
import { inputLines, type Command } from "../command.js";
import { EPISODE_FLAGS, EVAL_DEFAULTS } from "./eval.js";
import { SPLIT_NAMES, TASK_FLAGS, taskFromFlags } from "./task-flags.js";

export interface ChatOptions {
  /** 0: greedy. */
  temperature: number;
  maxTurns: number;
  maxTokensPerTurn: number;
  maxTotalTokens: number;
  /** Question i samples with seeds derived from (seed, i). */
  seed?: number;
  color: boolean;
  /** Echo each question (`you> ...`), for input that was not typed at a terminal. */
  echo: boolean;
}

/** The first row of the task (its system prompt and tool list are what every question is asked with). */
export function templateRow(task: Task): TaskRow {
  const row = SPLIT_NAMES.map((s) => task.rows(s)[0]).find((r) => r !== undefined);
  if (!row)
    throw new InputError(
      `chat: task '${task.name}' has no rows to take its prompt from`,
      "do not set every split size to 0 with --option",
    );
  return row;
}

/** A row like the task's rows with `question` as the user message, and no ground truth. */
export function questionRow(template: TaskRow, question: string, index: number): TaskRow {
  const prompt = template.prompt.map((m) => ({ ...m }));
  let user = -1;
  prompt.forEach((m, i) => (m.role === "user" ? (user = i) : undefined));
  if (user < 0) prompt.push({ role: "user", content: question });
  else prompt[user] = { ...prompt[user], content: question };
  return {
    ...template,
    prompt,
    reward_model: { style: "rule", ground_truth: "" },
    extra_info: { split: "chat", index, question },
  };
}

/** The task's env with every step shown as it happens: the assistant's turn, then each tool call with its response. */
class LiveEnv implements Env<TaskRow> {
  constructor(
    private readonly inner: Env<TaskRow>,
    private readonly show: (lines: string[]) => void,
    private readonly color: boolean,
  ) {}

  get tools() {
    return this.inner.tools;
  }

  reset(row: TaskRow) {
    return this.inner.reset(row);
  }

  async step(action: Action): Promise<StepResult> {
    this.show(assistantLines(action.text, action.stopReason, this.color));
    const result = await this.inner.step(action);
    for (const call of result.info?.toolCalls ?? []) this.show(toolCallLines(call, this.color));
    return result;
  }

  assistantMessage(action: Action) {
    return this.inner.assistantMessage?.(action) ?? { role: "assistant", content: action.text };
  }

  close() {
    return this.inner.close?.();
  }
}

/** Plays one episode per question, printing as it goes. Returns how many questions were answered (episodes run). */
export async function chatSession(
  engine: Engine,
  chat: ChatSetup,
  task: Task,
  questions: AsyncIterable<string>,
  out: (line: string) => void,
  o: ChatOptions,
): Promise<number> {
  const loop = new AgentLoop<TaskRow>(engine, chat, {
    temperature: o.temperature,
    topP: 1,
    maxTurns: o.maxTurns,
    maxTokensPerTurn: o.maxTokensPerTurn,
    maxTotalTokens: o.maxTotalTokens,
    driftCheck: false,
  });
  const show = (lines: string[]) => lines.forEach((l) => out(l));
  const template = templateRow(task);
  let n = 0;
  for await (const line of questions) {
    const question = line.trim();
    if (question === "") continue;
    if (o.echo) show(questionLines(question, o.color));
    const row = questionRow(template, question, n);
    const env = new LiveEnv(task.makeEnv(row), show, o.color);
    const seed = o.seed === undefined ? undefined : new Rng(o.seed, n).int(0x7fffffff);
    const t = await loop.run(env, row, { id: `chat-${n}`, rowIndex: n, seed });
    show(answerLines(t, o.color));
    out("");
    n++;
  }
  return n;
}

const FLAGS: FlagSpec = {
  model: { type: "string", value: "DIR", description: "the model directory (required)" },
  ...TASK_FLAGS,
  temperature: { type: "string", value: "T", description: "sampling temperature; 0 is greedy", fallback: 0 },
  ...EPISODE_FLAGS,
  seed: {
    type: "string",
    value: "S",
    description: "sampling seed (question i samples with seeds derived from S and i)",
  },
  ...BACKEND_FLAG,
};

export const chatCommand: Command = {
  name: "chat",
  summary: "ask a model questions in the terminal and watch it use a task's tools",
  usage: "agent-r1 chat --model DIR --task NAME [flags]  (one question per line on stdin, until EOF)",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("chat", argv, FLAGS);
    noPositionals("chat", positionals, "questions are read from stdin, one per line");
    const modelDir = requireString("chat", flags, "model");
    const task = taskFromFlags("chat", flags);
    const temperature = optionalNumber("chat", flags, "temperature") ?? 0;
    if (temperature < 0) throw usageError("chat", `--temperature must be >= 0, got ${temperature}`);
    const positiveInt = (name: string, fallback: number) => {
      const v = optionalNumber("chat", flags, name) ?? fallback;
      if (!(Number.isInteger(v) && v > 0)) throw usageError("chat", `--${name} must be a positive integer, got ${v}`);
      return v;
    };
    const maxTurns = positiveInt("max-turns", EVAL_DEFAULTS.maxTurns);
    const maxTokensPerTurn = positiveInt("max-tokens-per-turn", EVAL_DEFAULTS.maxTokensPerTurn);
    const seed = optionalNumber("chat", flags, "seed");
    if (seed !== undefined && !Number.isInteger(seed))
      throw usageError("chat", `--seed must be an integer, got ${seed}`);

    // One trajectory at a time: one worker thread keeps the terminal responsive without a second model copy.
    const backend = parseBackendFlag("chat", flags);
    const engine = await openModel(modelDir, { workers: Math.min(1, defaultWorkers()), backend });
    announceBackend(backend, io);
    try {
      const chat = chatSetup(engine.tokenizer);
      const color = io.color ?? false;
      if (io.interactive) io.out(`chat: ${modelDir} on task '${task.name}'. One question per line; Ctrl-D to quit.`);
      await chatSession(engine, chat, task, inputLines(io, "you> "), (l) => io.out(l), {
        temperature,
        maxTurns,
        maxTokensPerTurn,
        maxTotalTokens: Math.min(LOOP_DEFAULTS.maxTotalTokens, engine.config.maxPositionEmbeddings),
        seed,
        color,
        echo: !io.interactive,
      });
    } finally {
      await engine.dispose();
    }
  },
};
