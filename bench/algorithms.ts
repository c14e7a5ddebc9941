/**
 * The algorithms x tasks table (docs/algorithms-table.md): each cell is the main job (src/train/main-job.ts)
 * on one task's GRPO recipe and committed base with one algorithm's overrides (algorithm-cells.ts),
 * the same wall-clock budget for every cell, evaluated greedily before and after on the held-out
 * test split (household: also val, its seen houses). Each cell appends one JSON line to
 * OUT_DIR/results.jsonl; --render prints the table from it.
 *   npm run build && node dist/bench/algorithms.js --task household --algorithm grpo,steppo [--budget-minutes 5]
 *   node dist/bench/algorithms.js --render [--out-dir runs/algorithms]
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { stdio } from "../src/cli/main.js";
import { mainJob } from "../src/cli/commands/main-job.js";
import type { EpisodeSummary } from "../src/train/evaluate.js";
import { packageRoot } from "../src/util/package-root.js";
import { cellPaths, TABLE_ALGORITHMS, TABLE_TASKS } from "./algorithm-cells.js";

const { values: args } = parseArgs({
  options: {
    task: { type: "string", default: Object.keys(TABLE_TASKS).join(",") },
    algorithm: { type: "string", default: Object.keys(TABLE_ALGORITHMS).join(",") },
    "budget-minutes": { type: "string", default: "5" },
    "out-dir": { type: "string", default: "runs/algorithms" },
    render: { type: "boolean", default: false },
  },
});

interface CellResult {
  task: string;
  algorithm: string;
  command: string;
  budgetMinutes: number;
  iterations: number;
  minutes: number;
  before: EpisodeSummary;
  after: EpisodeSummary;
  splits: Record<string, { before: EpisodeSummary; after: EpisodeSummary }>;
  /** The sampled training episodes' success and score (metrics.jsonl), means of the first and of the last three iterations. */
  sampled?: { first: { em: number; f1: number }; last: { em: number; f1: number } };
}

const outDir = args["out-dir"]!;
const resultsFile = join(outDir, "results.jsonl");

function pick<T>(list: string, known: Record<string, T>, what: string): string[] {
  const names = list.split(",").filter(Boolean);
  for (const n of names)
    if (!Object.hasOwn(known, n)) throw new Error(`--${what}: unknown ${n}; known: ${Object.keys(known).join(", ")}`);
  return names;
}

/**
 * The mean training-episode success (`em`) and score (`f1`) of the first and of the last `k`
 * iterations in a run's metrics.jsonl (undefined when the run has none).
 */
function sampledSuccess(runDir: string, k = 3): CellResult["sampled"] {
  const file = join(runDir, "metrics.jsonl");
  if (!existsSync(file)) return undefined;
  const ms = readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { iteration?: number; em?: number; f1?: number })
    .filter((m) => m.iteration !== undefined && typeof m.em === "number");
  if (ms.length === 0) return undefined;
  const mean = (xs: typeof ms, key: "em" | "f1") => xs.reduce((a, m) => a + (m[key] ?? 0), 0) / xs.length;
  const at = (xs: typeof ms) => ({ em: mean(xs, "em"), f1: mean(xs, "f1") });
  return { first: at(ms.slice(0, k)), last: at(ms.slice(-k)) };
}

async function runCell(task: string, algorithm: string, budgetMinutes: number): Promise<CellResult> {
  const cell = cellPaths(packageRoot(), task);
  const overrides = TABLE_ALGORITHMS[algorithm];
  const out = join(outDir, `${task}-${algorithm}`);
  const res = await mainJob(
    {
      recipe: cell.recipe,
      base: cell.base,
      out,
      overrides,
      budgetMinutes,
      alsoEvaluate: cell.alsoEvaluate,
      force: true, // the cell's own directory under --out-dir
    },
    stdio,
  );
  const splits: CellResult["splits"] = {};
  for (const [split, s] of Object.entries(res.splits)) splits[split] = { before: s!.before, after: s!.after };
  return {
    task,
    algorithm,
    command: `node dist/bench/algorithms.js --task ${task} --algorithm ${algorithm} --budget-minutes ${budgetMinutes}`,
    budgetMinutes,
    iterations: res.iterations,
    minutes: res.minutes,
    before: res.before,
    after: res.after,
    splits,
    sampled: sampledSuccess(out),
  };
}

const pct = (x: number | undefined) => (x === undefined ? "—" : `${(100 * x).toFixed(1)}`);

/** Columns: [header, the figure of a summary set]. */
const COLUMNS: [string, string, (r: CellResult, s: "before" | "after") => number | undefined][] = [
  ["multihop", "EM", (r, s) => r[s].em],
  ["calc", "EM", (r, s) => r[s].em],
  ["household", "seen", (r, s) => r.splits.val?.[s].em],
  ["household", "unseen", (r, s) => r[s].em],
  ["shop", "score", (r, s) => r[s].f1],
  ["shop", "success", (r, s) => r[s].em],
];

function render(results: CellResult[]): string[] {
  const latest = new Map<string, CellResult>();
  for (const r of results) latest.set(`${r.task}/${r.algorithm}`, r);
  const head = `| | ${COLUMNS.map(([t, what]) => `${t} ${what}`).join(" | ")} |`;
  const rule = `|---|${COLUMNS.map(() => "---:").join("|")}|`;
  const row = (name: string, f: (task: string) => [CellResult | undefined, "before" | "after"]) =>
    `| ${name} | ${COLUMNS.map(([task, , get]) => {
      const [r, s] = f(task);
      return r ? pct(get(r, s)) : "—";
    }).join(" | ")} |`;
  const anyOf = (task: string) => [...latest.values()].find((r) => r.task === task);
  const lines = [head, rule, row("base", (task) => [anyOf(task), "before"])];
  for (const a of Object.keys(TABLE_ALGORITHMS)) lines.push(row(a, (task) => [latest.get(`${task}/${a}`), "after"]));
  lines.push(
    "",
    "Iterations in the budget (minutes of the whole cell; sampled training success, first → last three iterations):",
  );
  for (const r of latest.values()) {
    // Lines written before the cells recorded it: read the cell's run directory.
    const sampled = r.sampled ?? sampledSuccess(join(outDir, `${r.task}-${r.algorithm}`));
    const scored = COLUMNS.some(([task, what]) => task === r.task && what === "score");
    lines.push(
      `- ${r.task} ${r.algorithm}: ${r.iterations} (${r.minutes.toFixed(1)} min)` +
        (sampled ? `; sampled ${pct(sampled.first.em)} → ${pct(sampled.last.em)}` : "") +
        (sampled && scored ? ` (score ${pct(sampled.first.f1)} → ${pct(sampled.last.f1)})` : ""),
    );
  }
  return lines;
}

if (args.render) {
  if (!existsSync(resultsFile)) throw new Error(`--render: no ${resultsFile}; run some cells first`);
  const results = readFileSync(resultsFile, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as CellResult);
  for (const l of render(results)) console.log(l);
} else {
  const budget = Number(args["budget-minutes"]);
  if (!(budget > 0)) throw new Error(`--budget-minutes must be > 0, got ${args["budget-minutes"]}`);
  mkdirSync(outDir, { recursive: true });
  for (const task of pick(args.task!, TABLE_TASKS, "task"))
    for (const algorithm of pick(args.algorithm!, TABLE_ALGORITHMS, "algorithm")) {
      const r = await runCell(task, algorithm, budget);
      appendFileSync(resultsFile, JSON.stringify(r) + "\n");
      console.log(
        JSON.stringify({ task, algorithm, before: r.before.em, after: r.after.em, iterations: r.iterations }),
      );
    }
}
