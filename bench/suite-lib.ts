/**
 * Pure parts of the benchmark suite (bench/run-all.ts): reading benchmark output, assembling
 * bench/results.json, the PyTorch comparison (also bench/engine.ts's torch_ratio) and the markdown
 * table. No I/O here, so test/bench-suite.test.ts can check it without running a benchmark.
 */

export type Json = Record<string, unknown>;

/** Every line of `text` that is a JSON object, in order. Other lines (progress, logs) are skipped. */
export function jsonLines(text: string): Json[] {
  const out: Json[] = [];
  for (const raw of text.split(/\r?\n|\r/)) {
    const line = raw.trim();
    if (!line.startsWith("{") || !line.endsWith("}")) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (v !== null && typeof v === "object" && !Array.isArray(v)) out.push(v as Json);
    } catch {
      /* not JSON after all */
    }
  }
  return out;
}

/** The last line of `text` that is a JSON object: a benchmark's result line. */
export function lastJsonLine(text: string): Json | undefined {
  const all = jsonLines(text);
  return all[all.length - 1];
}

/**
 * One line saying why a benchmark process failed: the thrown error's line from Node's or Python's
 * report on stderr (`Error: ...`, `InputError [code]: ...`, `RuntimeError: ...`), else the last
 * meaningful stderr line, else the exit status.
 */
export function errorReason(
  stderr: string,
  exit: { code: number | null; signal?: string | null; timedOutMinutes?: number },
): string {
  if (exit.timedOutMinutes !== undefined) return `timed out after ${exit.timedOutMinutes} min`;
  const lines = stderr
    .split(/\r?\n|\r/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  const isError = (l: string) =>
    /^[A-Za-z_][\w.]*(Error|Exception)\b(\s*\[[^\]]*\])?:\s*\S/.test(l) && !l.startsWith("at ");
  const errorLine = lines.find(isError);
  if (errorLine) return clip(errorLine);
  const rest = lines.filter((l) => !l.startsWith("at ") && !/^Node\.js v\d/.test(l) && l !== "^");
  if (rest.length > 0) return clip(rest[rest.length - 1]);
  return exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
}

const clip = (s: string, n = 300) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

/** What running one benchmark process gave. */
export interface RunOutcome {
  command: string;
  stdout: string;
  stderr: string;
  code: number | null;
  signal?: string | null;
  seconds: number;
  timedOutMinutes?: number;
}

export interface RanEntry {
  command: string;
  date: string;
  commit: string;
  seconds: number;
  quick?: true;
  /** The benchmark's last JSON line. */
  result: Json;
  /** All its JSON lines (per-workload detail), the last one included. */
  lines: Json[];
}
export interface SkippedEntry {
  command: string;
  date: string;
  commit: string;
  skipped: string;
}
export type BenchEntry = RanEntry | SkippedEntry;

export const isRan = (e: BenchEntry | undefined): e is RanEntry => e !== undefined && "result" in e;

/** A process's outcome as a results.json entry: its result line, or `skipped` with the reason. */
export function entryFromRun(run: RunOutcome, meta: { date: string; commit: string; quick?: boolean }): BenchEntry {
  const base = { command: run.command, date: meta.date, commit: meta.commit };
  if (run.code !== 0 || run.timedOutMinutes !== undefined) {
    return { ...base, skipped: errorReason(run.stderr, run) };
  }
  const lines = jsonLines(run.stdout);
  if (lines.length === 0) return { ...base, skipped: "no JSON line on stdout" };
  return {
    ...base,
    seconds: Math.round(run.seconds * 10) / 10,
    ...(meta.quick ? { quick: true as const } : {}),
    result: lines[lines.length - 1],
    lines,
  };
}

/** Benchmarks that run together: `--only engine` also runs PyTorch and the peak measurement. */
export const GROUPS = {
  engine: ["engine", "torch_engine", "peak"],
  rollout: ["rollout"],
  demo: ["demo"],
} as const;
export type GroupName = keyof typeof GROUPS;
export const GROUP_NAMES = Object.keys(GROUPS) as GroupName[];

export function parseOnly(only: string | undefined): GroupName[] {
  if (only === undefined || only.trim() === "") return [...GROUP_NAMES];
  const names = only
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const n of names) {
    if (!(GROUP_NAMES as string[]).includes(n))
      throw new Error(`--only: unknown benchmark '${n}'; known: ${GROUP_NAMES.join(", ")}`);
  }
  return GROUP_NAMES.filter((g) => names.includes(g));
}

export interface Machine {
  cpu: string;
  cores: number;
  node: string;
  platform: string;
  total_mem_gb: number;
  date: string;
  git_commit: string;
  git_dirty: boolean;
}

type NumMap = Record<string, number>;
export interface FrameworkFigures {
  train_tokens_per_s: NumMap;
  sample_tokens_per_s: NumMap;
  /** Achieved GFLOPS with bench/engine.ts's formulas: 6 * params * tokens/s (train), 2 * params * tokens/s (sample). */
  train_gflops: NumMap;
  sample_gflops: NumMap;
  /** train_gflops / the machine's peak. */
  train_fraction_of_peak: NumMap;
  peak_rss_mb?: number;
  /** The compute backend the benchmark names, if it does (bench/engine.ts: "native" | "tfjs"). */
  backend?: string;
}
export interface Comparison {
  params: NumMap;
  peak_gflops: number | null;
  peak_via?: string;
  ours: FrameworkFigures | null;
  torch: (FrameworkFigures & { version?: string; threads?: number }) | null;
  /** ours / PyTorch for every workload both measured; null without a PyTorch run. */
  ratios: { train: NumMap; sample: NumMap } | null;
}

export interface Results {
  machine: Machine;
  /** How this file was last written. */
  run: { only: GroupName[]; quick: boolean; torch_python?: string };
  benchmarks: Partial<Record<string, BenchEntry>>;
  comparison: Comparison;
}

const r = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;
const nums = (v: unknown): NumMap => {
  const out: NumMap = {};
  if (v && typeof v === "object")
    for (const [k, x] of Object.entries(v)) if (typeof x === "number" && Number.isFinite(x)) out[k] = x;
  return out;
};
/** "S" -> "S", "M_b32" -> "M". */
const shapeOf = (key: string) => key.split("_")[0];

function figures(result: Json, params: NumMap, peak: number | null): FrameworkFigures {
  const train = nums(result.train_tokens_per_s),
    sample = nums(result.sample_tokens_per_s);
  const trainG: NumMap = {},
    sampleG: NumMap = {},
    frac: NumMap = {};
  for (const [k, tps] of Object.entries(train)) {
    const p = params[shapeOf(k)];
    if (p === undefined) continue;
    trainG[k] = r((6 * p * tps) / 1e9, 2);
    if (peak) frac[k] = r((6 * p * tps) / 1e9 / peak, 4);
  }
  for (const [k, tps] of Object.entries(sample)) {
    const p = params[shapeOf(k)];
    if (p !== undefined) sampleG[k] = r((2 * p * tps) / 1e9, 2);
  }
  const rss = typeof result.peak_rss_mb === "number" ? result.peak_rss_mb : undefined;
  return {
    train_tokens_per_s: train,
    sample_tokens_per_s: sample,
    train_gflops: trainG,
    sample_gflops: sampleG,
    train_fraction_of_peak: frac,
    ...(rss !== undefined ? { peak_rss_mb: rss } : {}),
    ...(typeof result.backend === "string" ? { backend: result.backend } : {}),
  };
}

/** a / b for every key both have (b > 0), rounded to `digits` decimals. */
export function ratioMap(a: NumMap, b: NumMap, digits = 3): NumMap {
  const out: NumMap = {};
  for (const [k, x] of Object.entries(a)) if (b[k] !== undefined && b[k] > 0) out[k] = r(x / b[k], digits);
  return out;
}

/** bench/engine.ts's torch_ratio keys: [key, field of the result lines, workload]. */
const TORCH_RATIO_KEYS = [
  ["train_S", "train_tokens_per_s", "S"],
  ["train_M", "train_tokens_per_s", "M"],
  ["sample_S_b32", "sample_tokens_per_s", "S_b32"],
  ["sample_M_b32", "sample_tokens_per_s", "M_b32"],
  // --model NAME (bench/qwen-model.ts REAL_MODELS keys)
  ...(["qwen05b", "qwen15b", "qwen3_4b"] as const).flatMap(
    (m) =>
      [
        [`${m}_sample_b32`, m, "sample_b32"],
        [`${m}_sample_b1`, m, "sample_b1"],
        [`${m}_lora_train`, m, "lora_train"],
      ] as const,
  ),
] as const;

/**
 * bench/engine.ts's torch_ratio: ours / PyTorch (2 decimals) for train S and M and batch-32
 * sampling S and M, or with --model NAME for its sampling at batch 32 and 1 and its LoRA
 * training, from the two result lines; only the keys both measured.
 */
export function torchRatio(ours: Json, torch: Json): NumMap {
  const out: NumMap = {};
  for (const [key, field, workload] of TORCH_RATIO_KEYS) {
    const x = ratioMap(nums(ours[field]), nums(torch[field]), 2)[workload];
    if (x !== undefined) out[key] = x;
  }
  return out;
}

/** The torch_ratio for bench/engine.ts's summary from a run of bench/torch_engine.py, or why there is none. */
export function torchRatioFromRun(ours: Json, run: RunOutcome): { ratio: NumMap } | { skipped: string } {
  if (run.code !== 0 || run.timedOutMinutes !== undefined) return { skipped: errorReason(run.stderr, run) };
  const result = lastJsonLine(run.stdout);
  if (!result) return { skipped: "no JSON line on stdout" };
  const ratio = torchRatio(ours, result);
  return Object.keys(ratio).length > 0 ? { ratio } : { skipped: "no workload measured by both" };
}

/** Our figures, PyTorch's, their ratios (ours / PyTorch) and achieved GFLOPS against the peak. */
export function compare(entries: Partial<Record<string, BenchEntry>>, params: NumMap): Comparison {
  const engine = entries.engine,
    torch = entries.torch_engine,
    peakE = entries.peak;
  const peakRaw = isRan(peakE) ? peakE.result.peak_gflops : undefined;
  const peak = typeof peakRaw === "number" && peakRaw > 0 ? peakRaw : null;
  const ours = isRan(engine) ? figures(engine.result, params, peak) : null;
  let torchFig: Comparison["torch"] = null;
  if (isRan(torch)) {
    const info = torch.lines.find((l) => l.workload === "info");
    torchFig = {
      ...figures(torch.result, params, peak),
      ...(typeof info?.torch_version === "string" ? { version: info.torch_version } : {}),
      ...(typeof info?.threads === "number" ? { threads: info.threads } : {}),
    };
  }
  const ratios =
    ours && torchFig
      ? {
          train: ratioMap(ours.train_tokens_per_s, torchFig.train_tokens_per_s),
          sample: ratioMap(ours.sample_tokens_per_s, torchFig.sample_tokens_per_s),
        }
      : null;
  return {
    params,
    peak_gflops: peak === null ? null : r(peak, 1),
    ...(isRan(peakE) && typeof peakE.result.via === "string"
      ? { peak_via: `${peakE.result.via}, ${peakE.result.threads} threads, ${peakE.result.matmul_n}² float32 matmul` }
      : {}),
    ours,
    torch: torchFig,
    ratios,
  };
}

/**
 * results.json: this run's entries, plus the previous file's entries for benchmark groups not run
 * this time (each entry keeps its own date and commit).
 */
export function assembleResults(opts: {
  machine: Machine;
  run: Results["run"];
  entries: Partial<Record<string, BenchEntry>>;
  params: NumMap;
  previous?: unknown;
}): Results {
  const benchmarks: Partial<Record<string, BenchEntry>> = {};
  const prev = (
    opts.previous && typeof opts.previous === "object"
      ? (opts.previous as { benchmarks?: unknown }).benchmarks
      : undefined
  ) as Partial<Record<string, BenchEntry>> | undefined;
  for (const g of GROUP_NAMES) {
    const source = opts.run.only.includes(g) ? opts.entries : (prev ?? {});
    for (const name of GROUPS[g]) {
      const e = source[name];
      if (e && typeof e === "object") benchmarks[name] = e;
    }
  }
  return { machine: opts.machine, run: opts.run, benchmarks, comparison: compare(benchmarks, opts.params) };
}

// ---------------------------------------------------------------- markdown

const fmt = (x: number | undefined): string => {
  if (x === undefined || !Number.isFinite(x)) return "—";
  if (Math.abs(x) >= 10) return Math.round(x).toLocaleString("en-US");
  return String(r(x, 3));
};
const pct = (f: number | undefined) => (f === undefined ? "" : ` (${(f * 100).toFixed(f < 0.1 ? 1 : 0)}%)`);

const ENGINE_ROWS: { label: string; kind: "train" | "sample"; key: string }[] = [
  { label: "S train tokens/s", kind: "train", key: "S" },
  { label: "S sample tokens/s, batch 32", kind: "sample", key: "S_b32" },
  { label: "M train tokens/s", kind: "train", key: "M" },
  { label: "M sample tokens/s, batch 32", kind: "sample", key: "M_b32" },
  { label: "M sample tokens/s, batch 1", kind: "sample", key: "M_b1" },
];

function describeEntry(name: string, e: BenchEntry | undefined, machine: Machine): string {
  if (!e) return `${name}: not run`;
  const when =
    e.date.slice(0, 10) !== machine.date.slice(0, 10) || e.commit !== machine.git_commit
      ? ` (${e.date.slice(0, 10)}, ${e.commit.slice(0, 7)})`
      : "";
  return isRan(e)
    ? `${name}: \`${e.command}\`${e.quick ? " (quick settings)" : ""}${when}`
    : `${name} skipped: ${e.skipped}${when}`;
}

/** A results file as markdown: machine line, engine table (with PyTorch when measured), rollout and main-job tables. */
export function markdown(res: Results): string {
  const m = res.machine,
    c = res.comparison,
    b = res.benchmarks;
  const out: string[] = [];
  out.push(
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.total_mem_gb} GB, Node ${m.node}, ${m.platform}; ${m.date.slice(0, 16).replace("T", " ")} UTC, commit ${m.git_commit.slice(0, 7)}${m.git_dirty ? " (with uncommitted changes)" : ""}.`,
  );
  if (c.peak_gflops !== null) out.push(`Peak: ${fmt(c.peak_gflops)} GFLOPS (${c.peak_via ?? "float32 matmul"}).`);
  out.push("");

  // Engine
  if (b.engine || b.torch_engine) {
    out.push(
      `${describeEntry("engine", b.engine, m)}${b.torch_engine ? `; ${describeEntry("PyTorch", b.torch_engine, m)}` : ""}.`,
    );
    out.push("");
  }
  if (c.ours || c.torch) {
    const t = c.torch;
    const torchName = t
      ? `PyTorch ${t.version ?? ""}${t.threads ? ` (${t.threads} threads)` : ""}`.replace("  ", " ")
      : "";
    const ourName = `agent-r1${c.ours?.backend ? ` (${c.ours.backend})` : ""}`;
    out.push(t ? `| engine | ${ourName} | ${torchName} | agent-r1 / PyTorch |` : `| engine | ${ourName} |`);
    out.push(t ? "|---|---:|---:|---:|" : "|---|---:|");
    const row = (label: string, ours: string, theirs: string, ratio: string) =>
      out.push(t ? `| ${label} | ${ours} | ${theirs} | ${ratio} |` : `| ${label} | ${ours} |`);
    for (const e of ENGINE_ROWS) {
      const field = e.kind === "train" ? "train_tokens_per_s" : "sample_tokens_per_s";
      const ours = c.ours?.[field][e.key],
        theirs = t?.[field][e.key];
      if (ours === undefined && theirs === undefined) continue;
      const ratio = c.ratios?.[e.kind][e.key];
      row(e.label, fmt(ours), fmt(theirs), ratio === undefined ? "—" : ratio.toFixed(2));
    }
    for (const shape of ["S", "M"]) {
      const ours = c.ours?.train_gflops[shape],
        theirs = t?.train_gflops[shape];
      if (ours === undefined && theirs === undefined) continue;
      row(
        `${shape} train GFLOPS${c.peak_gflops !== null ? " (of peak)" : ""}`,
        fmt(ours) + pct(c.ours?.train_fraction_of_peak[shape]),
        fmt(theirs) + pct(t?.train_fraction_of_peak[shape]),
        "",
      );
    }
    if (c.ours?.peak_rss_mb !== undefined || t?.peak_rss_mb !== undefined)
      row("peak RSS, MB", fmt(c.ours?.peak_rss_mb), fmt(t?.peak_rss_mb), "");
    out.push("");
  }

  // Rollout and main job: their result lines as key/value tables.
  for (const [name, title] of [
    ["rollout", "rollout"],
    ["demo", "main job"],
  ] as const) {
    const e = b[name];
    if (!isRan(e)) {
      if (e) out.push(`${describeEntry(title, e, m)}.`, "");
      continue;
    }
    out.push(`${describeEntry(title, e, m)}:`, "", `| ${title} | value |`, "|---|---:|");
    for (const [k, v] of Object.entries(e.result))
      out.push(
        `| ${k.replace(/_/g, " ")} | ${typeof v === "number" ? fmt(v) : typeof v === "string" ? v : JSON.stringify(v)} |`,
      );
    out.push("");
  }
  return out.join("\n").trimEnd() + "\n";
}
