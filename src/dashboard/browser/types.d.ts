/**
 * The dashboard script's types (./app.ts): the part of Chart.js it uses (the page loads it as the
 * global `Chart`), the answers of the server's /api routes (../server.ts), and its own chart state.
 * Declarations only: global, as app.ts is a classic script, and nothing is emitted for them.
 */

// ---------- the part of Chart.js this page uses ----------

interface ChartPoint {
  x: number;
  y: number;
}

interface LineDataset {
  label: string;
  metricKey: string;
  data: ChartPoint[];
  borderColor: string;
  backgroundColor: string;
  borderWidth: number;
  borderDash: number[];
  pointRadius: number;
  pointHoverRadius: number;
  tension: number;
  spanGaps: boolean;
}

interface LineTooltipItem {
  dataset: { label?: string };
  parsed: { y: number | null };
}

interface LineChartOptions {
  animation: false;
  responsive: boolean;
  maintainAspectRatio: boolean;
  interaction: { mode: "nearest"; axis: "x"; intersect: boolean };
  scales: {
    x: { type: "linear"; title: { display: boolean; text: string }; ticks: { precision: number } };
    y: { suggestedMin?: number; ticks: { callback: (value: number | string) => string } };
  };
  plugins: {
    legend: { position: "bottom"; labels: { boxWidth: number; boxHeight: number } };
    tooltip: { callbacks: { label: (item: LineTooltipItem) => string } };
  };
}

interface LineChart {
  data: { datasets: LineDataset[] };
  update(mode?: "none"): void;
  destroy(): void;
}

/** Chart.js's UMD build, loaded by the page as a global. */
declare const Chart: new (
  canvas: HTMLCanvasElement,
  config: { type: "line"; data: { datasets: LineDataset[] }; options: LineChartOptions },
) => LineChart;

// ---------- what the server answers (server.ts); the run's files are JSON of any shape ----------

type MetricRecord = Record<string, unknown>;

interface InfoResponse {
  run: string;
  runDir: string;
  config: string | null;
}

interface MetricsResponse {
  generation: number;
  reset: boolean;
  after: number;
  total: number;
  skipped: number;
  records: MetricRecord[];
}

interface SampleListResponse {
  iterations: number[];
}

interface ToolCallRecord {
  name?: unknown;
  arguments?: unknown;
  ok?: unknown;
  error?: unknown;
  ms?: unknown;
  text?: unknown;
}

interface StepRecord {
  context?: unknown;
  action?: unknown;
  stopReason?: unknown;
  reward?: unknown;
  toolCalls?: unknown;
  observation?: unknown;
}

interface TrajectoryRecord {
  id?: unknown;
  rowIndex?: unknown;
  sampleIndex?: unknown;
  reward?: unknown;
  endReason?: unknown;
  driftTokens?: unknown;
  error?: unknown;
  steps?: unknown;
}

interface SamplesResponse {
  iteration: number;
  trajectories: TrajectoryRecord[];
  skipped: number;
}

// ---------- the page's own ----------

interface MetricGroup {
  id: string;
  title: string;
  min?: number;
  test: (base: string, prefix: string) => boolean;
}

/** Where a metric key is drawn. */
interface Placement {
  group: string;
  base: string;
  prefix: string;
  val: boolean;
  other?: true;
}

/** One line of a chart: a metric key, or the sum of several (`parts`). */
interface Series {
  key: string;
  base: string;
  val: boolean;
  other?: boolean;
  label?: string;
  parts?: string[];
}

interface GroupInfo {
  title: string;
  min?: number;
  main: boolean;
  order: number;
}

interface ChartEntry {
  chart: LineChart;
  signature: string;
  card: HTMLElement;
}
