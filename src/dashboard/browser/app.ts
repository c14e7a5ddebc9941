/**
 * The dashboard page's script, run in the browser: it polls /api/metrics for the records after
 * the ones it holds, draws them with Chart.js (the global `Chart`, which the page loads from
 * /chart.js before this script), and lists samples/iter-N.jsonl newest first.
 *
 * Compiled on its own by tsconfig.browser.json (DOM types, no Node's) to dist/browser/app.js,
 * which the server reads at start and serves as /app.js. The page loads it as a classic
 * <script>, so this file has no import or export (one would make it a module) and keeps its
 * names inside a function. Its types (the API's answers, the part of Chart.js it uses) are
 * declarations in ./types.d.ts, which compile to nothing.
 */

(() => {
  const params = new URLSearchParams(location.search);
  const POLL_MS = Math.max(100, Number(params.get("poll")) || 1000);
  const PALETTE = [
    "#2563eb",
    "#dc2626",
    "#16a34a",
    "#9333ea",
    "#ea580c",
    "#0891b2",
    "#ca8a04",
    "#db2777",
    "#4b5563",
    "#65a30d",
  ];
  const VAL_PREFIXES = new Set(["val", "validation", "eval", "test"]);
  const TOTAL_KEY = "\u0000total";

  /** The main charts, in page order; a key joins the first whose test accepts its base name. */
  const GROUPS: MetricGroup[] = [
    {
      id: "reward",
      title: "Reward and exact match / success",
      min: 0,
      test: (b) =>
        /^(reward|reward_std|reward_mean|score|em|exact_match|success|success_rate|acc|accuracy|f1|format)$/.test(b),
    },
    {
      id: "tools",
      title: "Turns and tool calls per episode",
      min: 0,
      test: (b) => /^(turns|num_turns|tool_calls|num_tool_calls|tool_errors|tool_error_rate)$/.test(b),
    },
    {
      id: "length",
      title: "Response length (tokens)",
      min: 0,
      test: (b) => /^(response_tokens|response_length|response_len|mean_response_length|response_tokens_mean)$/.test(b),
    },
    { id: "kl", title: "KL", test: (b) => /(^|_)kl($|_)/.test(b) },
    { id: "entropy", title: "Entropy", test: (b) => /entropy/.test(b) },
    { id: "timing", title: "Timings (seconds)", min: 0, test: (b, p) => isTiming(b, p) },
    { id: "throughput", title: "Throughput (tokens/s)", min: 0, test: (b, p) => isThroughput(b, p) },
    { id: "loss", title: "Loss", test: (b) => /loss/.test(b) },
    { id: "optim", title: "Optimizer", test: (b) => /^(grad_norm|clip_fraction|clipfrac|skipped_steps)$/.test(b) },
  ];

  function isThroughput(b: string, p: string): boolean {
    return p === "throughput" || /(tokens?_per_s(ec)?|tok_per_s|tokens_s|tps|throughput)$/.test(b);
  }
  function isTiming(b: string, p: string): boolean {
    if (isThroughput(b, p)) return false;
    return p === "timing" || p === "timings" || p === "time" || /(_s|_sec|_secs|_seconds)$/.test(b);
  }

  /** Where a metric key is drawn, or null for the x axis. */
  function classify(key: string): Placement | null {
    if (key === "iteration" || key === "step") return null;
    const slash = key.indexOf("/");
    const prefix = slash >= 0 ? key.slice(0, slash) : "";
    const base = slash >= 0 ? key.slice(slash + 1) : key;
    const val = VAL_PREFIXES.has(prefix);
    const ownPrefix = val ? "" : prefix;
    // A throughput key can end in _s too, so it is checked before the timings.
    const order = [6, 5, 0, 1, 2, 3, 4, 7, 8];
    for (const i of order) {
      const g = GROUPS[i];
      if (g.test(base, ownPrefix)) return { group: g.id, base, prefix, val };
    }
    // Everything else: one small chart per prefix (per name for keys without one).
    return { group: "other:" + (ownPrefix || base), base, prefix, val, other: true };
  }

  const state = {
    gen: null as number | null,
    records: [] as MetricRecord[],
    skipped: 0,
    /** group id -> its chart */
    charts: new Map<string, ChartEntry>(),
    /** other group ids in first-seen order */
    otherOrder: [] as string[],
    /** iteration -> its <details> */
    sampleEls: new Map<number, HTMLDetailsElement>(),
    sampleSeen: false,
  };

  /** An element the page holds (page.ts). */
  function $<T extends HTMLElement = HTMLElement>(id: string): T {
    return document.getElementById(id) as T;
  }
  function el<K extends keyof HTMLElementTagNameMap>(
    tag: K,
    cls?: string | null,
    text?: unknown,
  ): HTMLElementTagNameMap[K] {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function isNum(v: unknown): v is number {
    return typeof v === "number" && isFinite(v);
  }
  function fmt(v: unknown): string {
    if (!isNum(v)) return "–";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    if (Number.isInteger(v)) return String(v);
    return a >= 100 ? v.toFixed(1) : v.toFixed(3);
  }
  /** Axis labels: short, without trailing zeros. */
  function axisLabel(v: unknown): string {
    if (!isNum(v)) return "";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(1);
    return String(parseFloat(v.toPrecision(4)));
  }
  async function getJson<T>(url: string): Promise<T> {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) throw new Error(url + ": HTTP " + r.status);
    return (await r.json()) as T;
  }
  function xOf(rec: MetricRecord, i: number): number {
    return isNum(rec.iteration) ? rec.iteration : isNum(rec.step) ? rec.step : i + 1;
  }

  // ---------- charts ----------

  /** Series per group, keys in order of first appearance (training keys before validation ones). */
  function seriesByGroup(records: MetricRecord[]): Map<string, Series[]> {
    const seen = new Set<string>();
    const keys: string[] = [];
    for (const r of records) {
      for (const k of Object.keys(r)) {
        if (!seen.has(k) && isNum(r[k])) {
          seen.add(k);
          keys.push(k);
        }
      }
    }
    const groups = new Map<string, Series[]>();
    for (const k of keys) {
      const c = classify(k);
      if (!c) continue;
      let list = groups.get(c.group);
      if (!list) groups.set(c.group, (list = []));
      list.push({ key: k, base: c.base, val: c.val, other: !!c.other });
    }
    for (const [g, list] of groups) {
      list.sort((a, b) => (a.val ? 1 : 0) - (b.val ? 1 : 0));
      if (g === "timing") {
        const parts = list.filter((s) => !s.val).map((s) => s.key);
        const hasTotal = list.some((s) => !s.val && /total/.test(s.base));
        if (!hasTotal && parts.length >= 2) {
          list.push({ key: TOTAL_KEY, base: "total", val: false, label: "total (" + parts.join(" + ") + ")", parts });
        }
      }
    }
    return groups;
  }

  function points(records: MetricRecord[], s: Series): ChartPoint[] {
    const out: ChartPoint[] = [];
    records.forEach((r, i) => {
      let y: unknown;
      if (s.parts) {
        let sum: number | null = 0;
        for (const part of s.parts) {
          const v = r[part];
          if (!isNum(v)) {
            sum = null;
            break;
          }
          sum += v;
        }
        y = sum;
      } else {
        y = r[s.key];
      }
      if (isNum(y)) out.push({ x: xOf(r, i), y });
    });
    return out;
  }

  function datasets(records: MetricRecord[], series: Series[]): LineDataset[] {
    const colorOf = new Map<string, string>();
    let next = 0;
    return series.map((s) => {
      if (!colorOf.has(s.base)) colorOf.set(s.base, PALETTE[next++ % PALETTE.length]);
      const color = s.parts ? "#111827" : colorOf.get(s.base)!;
      const data = points(records, s);
      return {
        label: s.label || s.key,
        metricKey: s.key,
        data,
        borderColor: color,
        backgroundColor: color,
        borderWidth: s.parts ? 1.5 : 2,
        borderDash: s.val ? [6, 4] : s.parts ? [2, 3] : [],
        pointRadius: s.val ? 3 : data.length <= 60 ? 2 : 0,
        pointHoverRadius: 4,
        tension: 0,
        spanGaps: true,
      };
    });
  }

  function groupInfo(id: string): GroupInfo {
    const i = GROUPS.findIndex((g) => g.id === id);
    if (i >= 0) return { title: GROUPS[i].title, min: GROUPS[i].min, main: true, order: i };
    return { title: id.slice("other:".length), main: false, order: state.otherOrder.indexOf(id) };
  }

  function makeCard(id: string, info: GroupInfo): HTMLElement {
    const card = el("div", "chart-card");
    card.dataset.group = id;
    card.dataset.order = String(info.order);
    card.appendChild(el("h3", null, info.title));
    const box = el("div", "chart-box");
    const canvas = el("canvas");
    canvas.dataset.group = id;
    box.appendChild(canvas);
    card.appendChild(box);
    const parent = info.main ? $("charts") : $("other-charts");
    let before: Element | null = null;
    for (let c = parent.firstElementChild; c; c = c.nextElementSibling) {
      if (c instanceof HTMLElement && c.dataset.order !== undefined && Number(c.dataset.order) > info.order) {
        before = c;
        break;
      }
    }
    parent.insertBefore(card, before);
    return card;
  }

  function chartOptions(info: GroupInfo): LineChartOptions {
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: "nearest", axis: "x", intersect: false },
      scales: {
        x: { type: "linear", title: { display: true, text: "iteration" }, ticks: { precision: 0 } },
        y: { suggestedMin: info.min, ticks: { callback: (v) => axisLabel(v) } },
      },
      plugins: {
        legend: { position: "bottom", labels: { boxWidth: 14, boxHeight: 2 } },
        tooltip: { callbacks: { label: (ctx) => ctx.dataset.label + ": " + fmt(ctx.parsed.y) } },
      },
    };
  }

  function drawCharts(): void {
    const groups = seriesByGroup(state.records);
    for (const id of groups.keys()) {
      if (id.startsWith("other:") && !state.otherOrder.includes(id)) state.otherOrder.push(id);
    }
    // Drop charts whose metrics are gone (the file was rewritten).
    for (const [id, entry] of state.charts) {
      if (!groups.has(id)) {
        entry.chart.destroy();
        entry.card.remove();
        state.charts.delete(id);
      }
    }
    for (const [id, series] of groups) {
      const signature = series.map((s) => s.key).join("\n");
      const ds = datasets(state.records, series);
      const entry = state.charts.get(id);
      if (entry && entry.signature === signature) {
        entry.chart.data.datasets.forEach((d, i) => {
          d.data = ds[i].data;
          d.pointRadius = ds[i].pointRadius;
        });
        entry.chart.update("none");
        continue;
      }
      const info = groupInfo(id);
      if (entry) entry.chart.destroy();
      const card = entry ? entry.card : makeCard(id, info);
      const canvas = card.querySelector("canvas")!;
      const chart = new Chart(canvas, { type: "line", data: { datasets: ds }, options: chartOptions(info) });
      state.charts.set(id, { chart, signature, card });
    }
    $("no-metrics").hidden = state.records.length > 0;
    $("other-title").hidden = $("other-charts").childElementCount === 0;
  }

  const HEADLINE = [
    "iteration",
    "reward",
    "em",
    "success",
    "f1",
    "turns",
    "tool_calls",
    "response_tokens",
    "entropy",
    "approx_kl",
    "kl_ref",
    "rollout_tokens_per_s",
    "val/reward",
    "val/em",
    "val/success",
  ];

  function drawSummary(): void {
    const box = $("summary");
    box.textContent = "";
    if (state.records.length === 0) return;
    const latest = new Map<string, unknown>();
    for (const r of state.records) for (const k of Object.keys(r)) latest.set(k, r[k]);
    for (const k of HEADLINE) {
      const v = latest.get(k);
      if (!isNum(v)) continue;
      const s = el("div", "stat");
      s.dataset.key = k;
      s.appendChild(el("div", "k", k === "iteration" ? "iteration" : "latest " + k));
      s.appendChild(el("div", "v", fmt(v)));
      box.appendChild(s);
    }
  }

  async function pollMetrics(): Promise<void> {
    const url = "/api/metrics?after=" + state.records.length + (state.gen === null ? "" : "&gen=" + state.gen);
    const res = await getJson<MetricsResponse>(url);
    let changed = false;
    if (res.reset || res.generation !== state.gen) {
      if (state.gen !== null) resetSamples();
      state.records = [];
      state.gen = res.generation;
      changed = true;
    }
    if (res.records.length > 0) {
      state.records = state.records.concat(res.records);
      changed = true;
    }
    state.skipped = res.skipped || 0;
    if (changed) {
      drawCharts();
      drawSummary();
    }
  }

  // ---------- samples ----------

  function resetSamples(): void {
    for (const d of state.sampleEls.values()) d.remove();
    state.sampleEls = new Map();
    state.sampleSeen = false;
  }

  async function pollSamples(): Promise<void> {
    const res = await getJson<SampleListResponse>("/api/samples");
    const list = res.iterations;
    const known = state.sampleEls;
    const wanted = new Set(list);
    for (const [n, d] of known) {
      if (!wanted.has(n)) {
        d.remove();
        known.delete(n);
      }
    }
    const fresh = list.filter((n) => !known.has(n));
    const container = $("samples");
    for (const n of fresh) {
      const d = el("details", "iteration");
      d.dataset.iteration = String(n);
      d.appendChild(el("summary", null, "iteration " + n));
      d.appendChild(el("div", "body"));
      d.addEventListener("toggle", () => {
        if (d.open && !d.dataset.loaded) void loadIteration(d, n);
      });
      let before: Element | null = null;
      for (let c = container.firstElementChild; c; c = c.nextElementSibling) {
        if (c instanceof HTMLElement && c.dataset.iteration !== undefined && Number(c.dataset.iteration) < n) {
          before = c;
          break;
        }
      }
      container.insertBefore(d, before);
      known.set(n, d);
    }
    const newest = list.length > 0 ? list[0] : null;
    if (newest !== null && fresh.includes(newest) && (!state.sampleSeen || $<HTMLInputElement>("follow").checked))
      known.get(newest)!.open = true;
    if (list.length > 0) state.sampleSeen = true;
    $("no-samples").hidden = list.length > 0;
  }

  async function loadIteration(d: HTMLDetailsElement, n: number): Promise<void> {
    d.dataset.loaded = "loading";
    const body = d.querySelector<HTMLElement>(".body")!;
    body.textContent = "loading…";
    try {
      const res = await getJson<SamplesResponse>("/api/samples/" + n);
      body.textContent = "";
      const trajs = res.trajectories;
      const rewards = trajs.map((t) => t.reward).filter(isNum);
      const mean = rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : NaN;
      d.querySelector("summary")!.textContent =
        "iteration " +
        n +
        " · " +
        trajs.length +
        " trajectories" +
        (rewards.length ? " · mean reward " + fmt(mean) : "");
      for (const t of trajs) body.appendChild(renderTrajectory(t));
      if (res.skipped) body.appendChild(el("p", "empty", res.skipped + " unreadable line(s) skipped"));
      if (trajs.length === 0) body.appendChild(el("p", "empty", "no trajectories in this file"));
      d.dataset.loaded = "yes";
    } catch (e) {
      body.textContent = "could not load: " + (e as Error).message;
      delete d.dataset.loaded;
    }
  }

  /** Assistant text with tool calls, answers and thinking spans marked inline. */
  function assistantText(text: string): HTMLPreElement {
    const pre = el("pre");
    const re =
      /(<tool_call>[\s\S]*?(?:<\/tool_call>|$)|<answer>[\s\S]*?(?:<\/answer>|$)|<think>[\s\S]*?(?:<\/think>|$))/g;
    let last = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(text)) !== null) {
      if (m[0].length === 0) {
        re.lastIndex++;
        continue;
      }
      if (m.index > last) pre.appendChild(document.createTextNode(text.slice(last, m.index)));
      const cls = m[0].startsWith("<tool_call>")
        ? "inline-call"
        : m[0].startsWith("<answer>")
          ? "inline-answer"
          : "inline-think";
      pre.appendChild(el("span", cls, m[0]));
      last = m.index + m[0].length;
    }
    if (last < text.length) pre.appendChild(document.createTextNode(text.slice(last)));
    return pre;
  }

  function block(cls: string, label: string, content: string | Node): HTMLDivElement {
    const b = el("div", "msg " + cls);
    b.appendChild(el("div", "label", label));
    b.appendChild(typeof content === "string" ? el("pre", null, content) : content);
    return b;
  }

  function renderTrajectory(t: TrajectoryRecord): HTMLElement {
    const art = el("article", "trajectory");
    const head = el("div", "head");
    head.appendChild(el("span", "id", t.id !== undefined ? t.id : "trajectory"));
    if (t.rowIndex !== undefined)
      head.appendChild(el("span", null, "row " + String(t.rowIndex) + ", sample " + String(t.sampleIndex)));
    head.appendChild(el("span", "reward", "reward " + fmt(t.reward)));
    if (t.endReason) head.appendChild(el("span", null, "end: " + String(t.endReason)));
    if (isNum(t.driftTokens) && t.driftTokens > 0) head.appendChild(el("span", null, "drift tokens " + t.driftTokens));
    if (t.error) head.appendChild(el("span", "error", t.error));
    art.appendChild(head);
    const steps: StepRecord[] = Array.isArray(t.steps) ? t.steps : [];
    steps.forEach((s, i) => {
      if (typeof s.context === "string") {
        const ctx = el("details", "context");
        ctx.appendChild(
          el("summary", null, (i > 0 ? "context (rewritten)" : "prompt") + " · " + s.context.length + " chars"),
        );
        ctx.appendChild(el("pre", null, s.context));
        art.appendChild(ctx);
      }
      const label =
        "assistant · turn " +
        (i + 1) +
        (s.stopReason ? " · stop: " + String(s.stopReason) : "") +
        (isNum(s.reward) && s.reward !== 0 ? " · reward " + fmt(s.reward) : "");
      art.appendChild(block("assistant", label, assistantText(String(s.action || ""))));
      const calls: ToolCallRecord[] = Array.isArray(s.toolCalls) ? s.toolCalls : [];
      for (const c of calls) {
        const name = c.name === null || c.name === undefined ? "(unparsed)" : String(c.name);
        const args =
          c.arguments === null || c.arguments === undefined
            ? "(no arguments parsed)"
            : JSON.stringify(c.arguments, null, 2);
        art.appendChild(block("tool-call", "tool call → " + name, args));
        const status = c.ok === false ? "error" + (c.error ? ": " + String(c.error) : "") : "ok";
        const resp = block(
          "tool-response" + (c.ok === false ? " failed" : ""),
          "tool response ← " + name + " · " + status + (isNum(c.ms) ? " · " + c.ms + " ms" : ""),
          String(c.text === undefined ? "" : c.text),
        );
        art.appendChild(resp);
      }
      if (calls.length === 0 && typeof s.observation === "string" && s.observation.trim() !== "") {
        art.appendChild(block("observation", "environment", s.observation));
      }
    });
    return art;
  }

  // ---------- main loop ----------

  function setStatus(ok: boolean, text: string): void {
    const s = $("status");
    s.className = ok ? "live" : "down";
    s.textContent = text;
  }

  function tick(): void {
    Promise.all([pollMetrics(), pollSamples()])
      .then(
        () => {
          const n = state.records.length;
          setStatus(
            true,
            "live · " +
              n +
              " iteration" +
              (n === 1 ? "" : "s") +
              (state.skipped ? " · " + state.skipped + " unreadable line(s) skipped" : "") +
              " · updated " +
              new Date().toLocaleTimeString(),
          );
        },
        (e: unknown) => {
          setStatus(false, "cannot reach the dashboard server (" + (e as Error).message + "); retrying");
        },
      )
      .then(() => {
        setTimeout(tick, POLL_MS);
      });
  }

  getJson<InfoResponse>("/api/info")
    .then((info) => {
      $("run").textContent = info.runDir;
      document.title = "agent-r1 · " + info.run;
      if (typeof info.config === "string") {
        $("config").textContent = info.config;
        $("config-box").hidden = false;
      }
    })
    .catch(() => {
      /* the poll loop reports it */
    });
  tick();
})();
