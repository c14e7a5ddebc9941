/**
 * Why twelve-hop compaction episodes fail (docs/compaction.md): each episode is read on its own
 * terms (the question's names, the searches it made, the years its tool responses gave, the ledger
 * notes and summaries it wrote, its final answer) and put in the first class that applies:
 *
 * - `correct`: the reward pays for the answer;
 * - `cut-off`: no answer (a turn or token limit);
 * - `query-copy`: a search asked for a name the question does not list (a garbled copy of one it
 *   does), and the company it stood for was never searched;
 * - `missed-search`: answered before every listed company was searched, with no garbled query;
 * - `ledger-copy`: a note or summary wrote a year-name pair that no search returned (a garbled name
 *   or a wrong year), and the answer is wrong;
 * - `wrong-year`: the ledger was right, but the answer's year is not the earliest;
 * - `wrong-name`: the answer's year is the earliest, the name after it is not its company's.
 *
 * Reads saved training samples (samples/iter-N.jsonl in a run directory, episodes on questions new to the
 * policy when the run trains with task.worlds) or, from ledger-probe.ts, freshly played episodes:
 *   node --import tsx dev/experiments/compaction-failures.ts runs/X [--from 1] [--to 999] [--window 20]
 *     [--coverage-reward W]   (a run trained with the task option coverageReward: W)
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { LEDGER, ledgerPairs, questionNames } from "../../src/tasks/multihop/compaction-expert.js";
import { searchCoverage } from "../../src/tasks/multihop/coverage.js";
import { required } from "./usage.js";

export const FAILURE_CLASSES = [
  "correct",
  "cut-off",
  "query-copy",
  "missed-search",
  "ledger-copy",
  "wrong-year",
  "wrong-name",
] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

/** What an episode of the twelve-hop task shows, as text. */
export interface EpisodeText {
  /** The first context (system prompt and question). */
  context: string;
  /** Each assistant turn, decoded. */
  actions: string[];
  /** Each search's query and the text it returned. */
  searches: { query: string; text: string }[];
  /** Whether the answer was right (the task's exact match). */
  correct: boolean;
  /** Whether the episode ended with an answer. */
  answered: boolean;
}

const FOUNDED = /^(.+?) is a company founded in (\d+)/gm;
/** A turn's note of what its search found, year first (`<think>1885 A. Find ...`, or `1885 A, 1901 B. `). */
const NOTE = /<think>(\d{3,4} [^.<]*?)\. /g;
const EARLIEST = /The earliest is (\d{3,4}) ([^.<]+?)\./;

/** The year-name pairs an action wrote: its note and any ledger summary (the ledger style of compaction-expert.ts). */
function writtenPairs(action: string): [string, number][] {
  return [...action.matchAll(NOTE), ...action.matchAll(LEDGER)].flatMap((m) => ledgerPairs(m[1]));
}

/** A trajectory's searches: each search call's query and the text it returned. */
export function searchesOf(
  calls: { name: string | null; arguments: Record<string, unknown> | null; text?: string }[],
): EpisodeText["searches"] {
  return calls
    .filter((c) => c.name === "search")
    .map((c) => ({ query: String(c.arguments?.query ?? ""), text: c.text ?? "" }));
}

/** The class of one episode (the first that applies, in FAILURE_CLASSES order). */
export function classifyEpisode(e: EpisodeText): FailureClass {
  if (e.correct) return "correct";
  if (!e.answered) return "cut-off";
  const names = questionNames(e.context);
  const years = new Map<string, number>();
  for (const s of e.searches) for (const m of s.text.matchAll(FOUNDED)) years.set(m[1], Number(m[2]));
  const searched = new Set(e.searches.map((s) => s.query.trim()));
  if (names.some((n) => !searched.has(n)))
    return [...searched].some((q) => !names.includes(q)) ? "query-copy" : "missed-search";
  const answerTurn = e.actions[e.actions.length - 1] ?? "";
  const notes = e.actions.flatMap((a, i) => writtenPairs(i === e.actions.length - 1 ? a.replace(EARLIEST, "") : a));
  if (notes.some(([n, y]) => !names.includes(n) || years.get(n) !== y)) return "ledger-copy";
  const earliest = Math.min(...names.map((n) => years.get(n) ?? Infinity));
  const said = EARLIEST.exec(answerTurn);
  if (!said || Number(said[1]) !== earliest) return "wrong-year";
  return "wrong-name";
}

/** Counts per class, as `class n (share)`. */
export function classTable(classes: FailureClass[]): string {
  return FAILURE_CLASSES.map((c) => {
    const n = classes.filter((x) => x === c).length;
    return `${c} ${n} (${((100 * n) / Math.max(1, classes.length)).toFixed(1)} %)`;
  }).join(", ");
}

interface SavedStep {
  context?: string;
  action: string;
  toolCalls?: { name: string | null; arguments: Record<string, unknown> | null; text?: string }[];
}
interface SavedEpisode {
  reward: number;
  endReason: string;
  steps: SavedStep[];
}

/** Whether an episode's reward pays for a right answer (rewards/format.ts: at least 0.5 when right, at most 0.1 when not). */
export const answeredRight = (reward: number): boolean => reward >= 0.5;

/**
 * A saved training sample as EpisodeText. `coverageReward`: the run's task option of that name, whose share
 * of the reward (coverage.ts) is taken off before the reward is read as right or wrong.
 */
export function savedEpisode(t: SavedEpisode, coverageReward = 0): EpisodeText {
  const context = t.steps[0].context ?? "";
  const calls = t.steps.flatMap((s) => s.toolCalls ?? []);
  const shaped = coverageReward === 0 ? 0 : coverageReward * searchCoverage(questionNames(context), calls);
  return {
    context,
    actions: t.steps.map((s) => s.action),
    searches: searchesOf(calls),
    correct: t.endReason === "done" && answeredRight(t.reward - shaped),
    answered: t.endReason === "done",
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const USAGE =
    "node --import tsx dev/experiments/compaction-failures.ts RUN_DIR [--from N] [--to N] [--window N] [--coverage-reward W]";
  const { values: a, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      from: { type: "string", default: "1" },
      to: { type: "string", default: "100000" },
      window: { type: "string", default: "20" },
      "coverage-reward": { type: "string", default: "0" },
    },
  });
  const dir = join(required(positionals[0], "RUN_DIR", USAGE), "samples");
  if (!existsSync(dir)) {
    console.error(`compaction-failures: ${dir} does not exist (a run directory holds samples/iter-N.jsonl)`);
    process.exit(2);
  }
  const iters = readdirSync(dir)
    .map((f) => /^iter-(\d+)\.jsonl$/.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .filter((i) => i >= Number(a.from) && i <= Number(a.to))
    .sort((x, y) => x - y);
  const w = Number(a.window);
  for (let k = 0; k < iters.length; k += w) {
    const span = iters.slice(k, k + w);
    const classes = span.flatMap((i) =>
      readFileSync(join(dir, `iter-${i}.jsonl`), "utf8")
        .trim()
        .split("\n")
        .map((l) => classifyEpisode(savedEpisode(JSON.parse(l) as SavedEpisode, Number(a["coverage-reward"])))),
    );
    console.log(`iterations ${span[0]}-${span[span.length - 1]} (${classes.length} episodes): ${classTable(classes)}`);
  }
}
