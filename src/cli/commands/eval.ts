import { openModel } from "../engines.js";
import { readTaskRowsFile, skippedRowsNote } from "../../data/index.js";
import type { EpisodeScore, Task, TaskRow } from "../../tasks/types.js";
import type { Trajectory } from "../../agent/trajectory.js";
import { writeFileSync } from "node:fs";
import { checkPlayed, playRows, type EpisodeSummary } from "../../train/evaluate.js";
import { InputError } from "../../util/errors.js";
import {
  noPositionals,
  optionalInt,
  optionalNumber,
  parseFlags,
  requireString,
  usageError,
  type FlagSpec,
  type Parsed,
} from "../args.js";
import { BACKEND_FLAG, announceBackend, parseBackendFlag } from "./backend-flag.js";
import type { Command } from "../command.js";
import { isModulePath, splitFlag, splitFromFlags, TASK_FLAGS, taskFromFlags, taskOptions } from "./task-flags.js";
import { loadModuleTask } from "../../tasks/module-task.js";
import { COMPACTION_DEFAULTS, type CompactionOptions } from "../../agent/compaction-options.js";
import { inTrainWorlds } from "../../tasks/worlds.js";

/** Episode limits of `eval` and of the main job's evaluations (recipes/multihop-grpo.yaml uses the same). */
export const EVAL_DEFAULTS = { maxTurns: 5, maxTokensPerTurn: 96, maxTotalTokens: 1024 } as const;

/** The episode limits `eval` and `chat` take from the command line. */
export const EPISODE_FLAGS: FlagSpec = {
  "max-turns": {
    type: "string",
    value: "N",
    description: "assistant turns per episode",
    fallback: EVAL_DEFAULTS.maxTurns,
  },
  "max-tokens-per-turn": {
    type: "string",
    value: "N",
    description: "tokens the model may write per turn",
    fallback: EVAL_DEFAULTS.maxTokensPerTurn,
  },
};

/** Agent-R1 rows from a parquet or JSONL file (the first bad row is an error naming its line or row). */
export async function readRowsFile(path: string): Promise<TaskRow[]> {
  return (await readTaskRowsFile(path)).rows;
}

/** One table row per labelled summary: exact match (or success), F1, turns, tool calls, tool errors, response tokens. */
export function summaryTable(rows: [string, EpisodeSummary][], taskName: string): string[] {
  const head = [
    "",
    taskName === "calc" ? "success" : "exact match",
    "F1",
    "turns",
    "tool calls",
    "tool errors",
    "tokens",
    "episodes",
  ];
  const body = rows.map(([label, s]) => [
    label,
    pct(s.em),
    pct(s.f1),
    s.turns.toFixed(2),
    s.toolCalls.toFixed(2),
    s.toolErrors.toFixed(2),
    s.responseTokens.toFixed(1),
    String(s.episodes),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(head), ...body.map(line)];
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The one JSON line `eval --json` ends with. */
export function summaryJson(s: EpisodeSummary): string {
  return JSON.stringify({
    em: s.em,
    f1: s.f1,
    turns: s.turns,
    tool_calls: s.toolCalls,
    tool_errors: s.toolErrors,
    response_tokens: s.responseTokens,
    reward: s.reward,
    episodes: s.episodes,
    failed: s.failed,
  });
}

const FLAGS: FlagSpec = {
  model: { type: "string", value: "DIR", description: "the model directory (required)" },
  ...TASK_FLAGS,
  ...splitFlag("the task's split to play", "test"),
  data: { type: "string", value: "FILE", description: "play the rows of a .parquet or .jsonl file instead of a split" },
  "skip-bad-rows": {
    type: "boolean",
    default: false,
    description: "with --data: skip and count rows that fail the schema instead of stopping",
  },
  worlds: {
    type: "string",
    value: "N",
    description:
      "play the train questions of N worlds generated from other seeds, as a recipe's task.worlds trains on (--option train=Q: Q in all), instead of a split",
  },
  "first-world": {
    type: "string",
    value: "K",
    description: "with --worlds: the first world's number (a run with task.worlds N trained on worlds 0 to N-1)",
  },
  limit: { type: "string", value: "N", description: "play only the first N rows" },
  json: { type: "boolean", default: false, description: "end with one JSON line of the summary" },
  episodes: {
    type: "string",
    value: "FILE",
    description:
      "also write one JSON line per episode (row, sample, em, f1, reward, end reason, turns, tool calls, tokens), to compare two models row by row",
  },
  ...EPISODE_FLAGS,
  seed: { type: "string", value: "N", description: "rollout seed", fallback: 0 },
  temperature: {
    type: "string",
    value: "T",
    description: "sample at temperature T instead of decoding greedily (0 is greedy)",
    fallback: 0,
  },
  samples: {
    type: "string",
    value: "K",
    description: "episodes per row, sampled (needs --temperature above 0); the summary is their mean",
    fallback: 1,
  },
  "compact-at": {
    type: "string",
    value: "N",
    description:
      "summarize and go on once the context passes N tokens, as rollout.compaction.atTokens does (for models trained with compaction)",
  },
  "keep-last": {
    type: "string",
    value: "K",
    description: "with --compact-at: turns kept verbatim after a summary",
    fallback: COMPACTION_DEFAULTS.keepLast,
  },
  ...BACKEND_FLAG,
};

/** `--compact-at` and `--keep-last` as rollout.compaction, or undefined (append only). */
function compactionFromFlags(flags: Parsed["flags"]): CompactionOptions | undefined {
  const atTokens = optionalInt("eval", flags, "compact-at", 1);
  const keepLast = optionalInt("eval", flags, "keep-last", 0);
  if (atTokens === undefined) {
    if (keepLast !== undefined) throw usageError("eval", "--keep-last applies with --compact-at N only");
    return undefined;
  }
  return keepLast === undefined ? { atTokens } : { atTokens, keepLast }; // the flow fills the other defaults
}

/**
 * The task of N worlds from seeds seed + 1000 + first + k sharing `task`'s train questions, as the
 * recipe's task.worlds draws them (tasks/worlds.ts), and their train rows: each row is played in its
 * own world (its env searches that world's documents), so play them with `task`, not the task given.
 */
export function worldsToPlay(
  task: Task,
  options: Record<string, unknown>,
  worlds: number,
  first: number,
): { task: Task; rows: TaskRow[]; label: string } {
  const played = inTrainWorlds(task, options, worlds, first);
  const label = `train questions of world${worlds === 1 ? ` ${first}` : `s ${first}-${first + worlds - 1}`}`;
  return { task: played, rows: played.rows("train"), label };
}

/** --worlds N [--first-world K] (worldsToPlay); undefined without --worlds. */
function playedWorldsFromFlags(flags: Parsed["flags"], task: Task): ReturnType<typeof worldsToPlay> | undefined {
  const worlds = optionalInt("eval", flags, "worlds", 1);
  const first = optionalInt("eval", flags, "first-world", 0);
  if (worlds === undefined) {
    if (first !== undefined) throw usageError("eval", "--first-world applies with --worlds N only");
    return undefined;
  }
  if (flags.split !== undefined || flags.data !== undefined)
    throw usageError("eval", "--worlds plays the worlds' train questions: give it without --split or --data");
  return worldsToPlay(task, taskOptions("eval", flags), worlds, first ?? 0);
}

/** --episodes FILE: one JSON line per episode, in row order then sample order. */
function writeEpisodes(path: string, trajectories: readonly Trajectory[], scores: readonly EpisodeScore[]): void {
  const lines = trajectories
    .map((t, i) => ({ t, s: scores[i] }))
    .sort((a, b) => a.t.rowIndex - b.t.rowIndex || a.t.sampleIndex - b.t.sampleIndex)
    .map(({ t, s }) =>
      JSON.stringify({
        row: t.rowIndex,
        sample: t.sampleIndex,
        em: s.em,
        f1: s.f1,
        reward: t.reward,
        end_reason: t.endReason,
        turns: t.metrics.turns,
        tool_calls: t.metrics.toolCalls,
        response_tokens: t.metrics.actionTokens,
      }),
    );
  writeOrFail(path, lines.join("\n") + "\n");
}

function writeOrFail(path: string, text: string): void {
  try {
    writeFileSync(path, text);
  } catch (e) {
    throw new InputError(`eval: --episodes ${path}: cannot write (${(e as Error).message.split("\n")[0]})`);
  }
}

/** `--temperature` and `--samples`: greedy (one episode a row) unless a temperature above 0 is given. */
function samplingFromFlags(flags: Parsed["flags"]): { temperature: number; samples: number } {
  const temperature = optionalNumber("eval", flags, "temperature") ?? 0;
  if (temperature < 0) throw usageError("eval", `--temperature must be 0 (greedy) or more, got ${temperature}`);
  const samples = optionalInt("eval", flags, "samples", 1) ?? 1;
  if (samples > 1 && temperature === 0)
    throw usageError(
      "eval",
      `--samples ${samples} needs --temperature above 0: greedy episodes of a row are all the same`,
    );
  return { temperature, samples };
}

export const evalCommand: Command = {
  name: "eval",
  summary:
    "play a task's held-out rows (greedily, or sampled) with a model and print exact match / success, F1, turns, tool calls",
  usage: "agent-r1 eval --model DIR --task NAME [flags]",
  flags: FLAGS,
  async run(argv, io) {
    const { flags, positionals } = parseFlags("eval", argv, FLAGS);
    noPositionals("eval", positionals);
    const modelDir = requireString("eval", flags, "model");
    if (isModulePath(flags.task) && flags.worlds !== undefined)
      throw usageError("eval", "--worlds generates a built-in task in other worlds, not an agent module's rows");
    const given = isModulePath(flags.task)
      ? await loadModuleTask({ module: flags.task as string, options: taskOptions("eval", flags) })
      : taskFromFlags("eval", flags);
    if (flags.data !== undefined && flags.split !== undefined)
      throw usageError("eval", "give --split or --data, not both");
    if (flags["skip-bad-rows"] && flags.data === undefined)
      throw usageError("eval", "--skip-bad-rows applies to --data FILE only");
    const fromWorlds = playedWorldsFromFlags(flags, given);
    const task = fromWorlds?.task ?? given;
    const split = flags.data === undefined && !fromWorlds ? splitFromFlags("eval", flags) : undefined;
    const limit = optionalInt("eval", flags, "limit", 1);
    const maxTurns = optionalInt("eval", flags, "max-turns", 1) ?? EVAL_DEFAULTS.maxTurns;
    const maxTokensPerTurn = optionalInt("eval", flags, "max-tokens-per-turn", 1) ?? EVAL_DEFAULTS.maxTokensPerTurn;
    const seed = optionalNumber("eval", flags, "seed") ?? 0;
    const { temperature, samples } = samplingFromFlags(flags);
    const compaction = compactionFromFlags(flags);
    const backend = parseBackendFlag("eval", flags);
    let rows: TaskRow[];
    let note: string | undefined;
    if (fromWorlds) rows = fromWorlds.rows;
    else if (split) rows = task.rows(split);
    else {
      const read = await readTaskRowsFile(flags.data as string, { skipBadRows: flags["skip-bad-rows"] === true });
      note = skippedRowsNote(flags.data as string, read);
      rows = read.rows;
    }
    if (limit !== undefined) rows = rows.slice(0, limit);
    if (rows.length === 0)
      throw new InputError(
        `eval: no rows to evaluate (${fromWorlds ? fromWorlds.label : split ? `split '${split}'` : String(flags.data)})`,
      );
    const episodesFile = typeof flags.episodes === "string" ? flags.episodes : undefined;
    if (episodesFile !== undefined) writeOrFail(episodesFile, ""); // before any episode is played
    const engine = await openModel(modelDir, { backend });
    announceBackend(backend, io);
    if (note) io.err(`eval: ${note}`); // after the last check that could fail, so an error stays the only line
    try {
      const maxTotalTokens = Math.min(EVAL_DEFAULTS.maxTotalTokens, engine.config.maxPositionEmbeddings);
      if (compaction && compaction.atTokens >= maxTotalTokens)
        throw usageError(
          "eval",
          `--compact-at ${compaction.atTokens} must be below the episode's token limit, ${maxTotalTokens} (the smaller of ${EVAL_DEFAULTS.maxTotalTokens} and the model's context)`,
        );
      const { summary, result, scores } = await playRows(engine, engine.tokenizer, task, rows, {
        greedy: temperature === 0,
        temperature,
        n: samples,
        maxTurns,
        maxTokensPerTurn,
        maxTotalTokens,
        ...(compaction ? { compaction } : {}),
        seed,
      });
      if (episodesFile !== undefined) writeEpisodes(episodesFile, result.trajectories, scores);
      const failures = checkPlayed("eval", rows, result);
      if (failures) io.err(failures);
      const how =
        (temperature === 0 ? "greedy" : `${samples} sampled a row at temperature ${temperature}`) +
        (compaction ? `, compacting past ${compaction.atTokens} tokens` : "");
      io.out(
        `eval: ${modelDir} on '${task.name}' ${fromWorlds ? fromWorlds.label : split ? `${split} split` : String(flags.data)} (${rows.length} rows, ${how})`,
      );
      for (const l of summaryTable([["model", summary]], task.name)) io.out(l);
      if (flags.json) io.out(summaryJson(summary));
    } finally {
      await engine.dispose();
    }
  },
};
