/**
 * The dashboard in a real browser: a real tiny training run, the server in-process on a
 * free port, Chromium (Debian's, driven by playwright-core) loading the page; then the run
 * grows while the page is open. The browser comes from ./browser.ts (Debian's Chromium, or the
 * one an npm dev dependency ships); without one the test is skipped, saying why (not under CI).
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { runCli } from "../src/cli/main.js";
import { startDashboard } from "../src/dashboard/server.js";
import { JsonlTail } from "../src/dashboard/jsonl-tail.js";
import { captureIO, cliEntry, tempDir } from "./helpers.js";
import { launchChromium } from "./browser.js";

const ITERATIONS = 3;

let run = "";

function recipe(): string {
  for (const rel of ["../recipes/smoke.yaml", "../../recipes/smoke.yaml"]) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  throw new Error("recipes/smoke.yaml not found");
}

const metricLines = (dir: string) =>
  readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, number>);

before(async () => {
  run = join(tempDir("agent-r1-dash-"), "run");
  const io = captureIO();
  const code = await runCli(
    [
      "train",
      "--config",
      recipe(),
      "--out",
      run,
      `train.iterations=${ITERATIONS}`,
      "train.valEvery=2",
      "train.checkpointEvery=0",
    ],
    io,
  );
  assert.equal(code, 0, io.stderr.join("\n"));
  assert.equal(metricLines(run).length, ITERATIONS);
});

/** A trajectory in the trainer's decoded format with one good and one failed tool call. */
function handmadeTrajectory() {
  const context =
    "<|im_start|>system\nSolve the problem with the calculator tool.<|im_end|>\n<|im_start|>user\nAda has 17 apples and buys 25 more. How many now?<|im_end|>\n<|im_start|>assistant\n";
  return {
    id: "r0-s0",
    rowIndex: 0,
    sampleIndex: 0,
    reward: 1,
    endReason: "done",
    steps: [
      {
        context,
        action:
          '<think>add them</think>\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "17 + 25"}}\n</tool_call>\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "17 +"}}\n</tool_call>',
        observation:
          "<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\nError: unexpected end\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        reward: 0,
        done: false,
        stopReason: "stop",
        toolCalls: [
          { name: "calculator", arguments: { expression: "17 + 25" }, ok: true, text: "42", ms: 1 },
          {
            name: "calculator",
            arguments: { expression: "17 +" },
            ok: false,
            error: "tool_error",
            text: "Error: unexpected end",
            ms: 0,
          },
        ],
      },
      {
        action: "<think>got it</think>\n<answer>42</answer>",
        observation: "",
        reward: 1,
        done: true,
        stopReason: "stop",
        toolCalls: [],
      },
    ],
  };
}

interface ChartState {
  labels: string[];
  lengths: number[];
  nonBlank: number;
  /** Points of the first dataset whose canvas pixel has the dataset's color. */
  colored: number;
}

/** Reads a chart's datasets and counts drawn pixels on its canvas (runs in the page). */
async function chartState(page: Page, group: string): Promise<ChartState | null> {
  return page.evaluate((g) => {
    const canvas = document.querySelector<HTMLCanvasElement>(`canvas[data-group="${g}"]`);
    const Chart = (window as unknown as { Chart: { getChart(c: HTMLCanvasElement): any } }).Chart;
    const chart = canvas && Chart.getChart(canvas);
    if (!canvas || !chart) return null;
    const datasets = chart.data.datasets as { label: string; data: unknown[]; borderColor: string }[];
    const hex = datasets[0].borderColor;
    const [r, gg, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
    const ctx = canvas.getContext("2d")!;
    const all = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    let nonBlank = 0;
    for (let i = 0; i < all.length; i += 4) if (all[i + 3] !== 0) nonBlank++;
    // Chart.js draws the first dataset on top: the canvas pixel at each of its points must be its color.
    const scale = canvas.width / chart.width;
    let colored = 0;
    for (const pt of chart.getDatasetMeta(0).data as { x: number; y: number }[]) {
      const p = ctx.getImageData(Math.round(pt.x * scale), Math.round(pt.y * scale), 1, 1).data;
      if (p[3] > 200 && Math.abs(p[0] - r) + Math.abs(p[1] - gg) + Math.abs(p[2] - b) < 40) colored++;
    }
    return { labels: datasets.map((d) => d.label), lengths: datasets.map((d) => d.data.length), nonBlank, colored };
  }, group);
}

/** Waits until the chart of `group` has `n` points in its first dataset. */
async function waitForPoints(page: Page, group: string, n: number, timeout = 5000): Promise<void> {
  await page.waitForFunction(
    ([g, want]) => {
      const canvas = document.querySelector(`canvas[data-group="${g}"]`);
      const chart = canvas && (window as unknown as { Chart: { getChart(c: Element): any } }).Chart.getChart(canvas);
      return Boolean(chart && chart.data.datasets[0].data.length === want);
    },
    [group, n] as const,
    { timeout },
  );
}

test("the page charts a real run, lists its samples, and follows it live", async (t) => {
  const launched = await launchChromium();
  if ("skip" in launched) {
    t.skip(launched.skip);
    return;
  }
  const browser: Browser = launched.browser;
  t.after(() => browser.close());
  const dash = await startDashboard({ runDir: run, port: 0 });
  t.after(() => dash.close());
  assert.match(dash.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.notEqual(dash.port, 0);
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()}`);
  });
  await page.goto(`${dash.url}/?poll=250`);

  // Charts: one per metric family the trainer writes, each with one point per iteration, drawn.
  const metrics = metricLines(run);
  await waitForPoints(page, "reward", ITERATIONS);
  const expected: Record<string, string[]> = {
    reward: ["reward", "em"],
    tools: ["turns", "tool_calls"],
    length: ["response_tokens"],
    kl: ["approx_kl"],
    entropy: ["entropy"],
    timing: ["rollout_s", "train_s"],
    throughput: ["rollout_tokens_per_s"],
  };
  for (const [group, keys] of Object.entries(expected)) {
    const s = await chartState(page, group);
    assert.ok(s, `chart '${group}' is missing`);
    for (const k of keys) {
      assert.ok(s.labels.includes(k), `chart '${group}' lacks ${k}: ${s.labels.join(", ")}`);
      assert.equal(
        s.lengths[s.labels.indexOf(k)],
        metrics.filter((m) => typeof m[k] === "number").length,
        `${group}/${k} points`,
      );
    }
    assert.equal(s.lengths[0], ITERATIONS, `${group}: one point per iteration`);
    assert.ok(s.nonBlank > 500, `chart '${group}' canvas is blank`);
    assert.equal(
      s.colored,
      ITERATIONS,
      `chart '${group}': ${s.colored} of ${ITERATIONS} points drawn in the first dataset's color`,
    );
  }
  // Validation (iteration 2) appears as its own series; timings get a total.
  const reward = (await chartState(page, "reward"))!;
  assert.equal(reward.lengths[reward.labels.indexOf("val/reward")], metrics.filter((m) => "val/reward" in m).length);
  const timing = (await chartState(page, "timing"))!;
  assert.ok(
    timing.labels.some((l) => l.startsWith("total")),
    timing.labels.join(", "),
  );
  // No chart for a metric family the run does not have (no critic → no value loss is fine, but no empty charts).
  const groups = await page.$$eval("canvas[data-group]", (cs) => cs.map((c) => (c as HTMLElement).dataset.group!));
  for (const g of groups) assert.ok(((await chartState(page, g))?.lengths[0] ?? 0) > 0, `chart '${g}' is empty`);

  // Samples: newest iteration first, the newest open, each trajectory's blocks from the file.
  await page.waitForSelector(`details.iteration[data-iteration="${ITERATIONS}"][data-loaded="yes"]`, { timeout: 5000 });
  const order = await page.$$eval("details.iteration", (ds) =>
    ds.map((d) => Number((d as HTMLElement).dataset.iteration)),
  );
  assert.deepEqual(
    order,
    Array.from({ length: ITERATIONS }, (_, i) => ITERATIONS - i),
  );
  const file = readFileSync(join(run, "samples", `iter-${ITERATIONS}.jsonl`), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { steps: { toolCalls: unknown[] }[] });
  const newest = `details.iteration[data-iteration="${ITERATIONS}"]`;
  assert.equal(await page.locator(`${newest} .trajectory`).count(), file.length);
  assert.equal(
    await page.locator(`${newest} .msg.assistant`).count(),
    file.reduce((n, tr) => n + tr.steps.length, 0),
  );
  const calls = file.reduce((n, tr) => n + tr.steps.reduce((k, s) => k + s.toolCalls.length, 0), 0);
  assert.equal(await page.locator(`${newest} .msg.tool-call`).count(), calls);
  assert.equal(await page.locator(`${newest} .msg.tool-response`).count(), calls);

  // Live: a new iteration (metrics line + samples file) shows up without reloading.
  const next = ITERATIONS + 1;
  mkdirSync(join(run, "samples"), { recursive: true });
  writeFileSync(join(run, "samples", `iter-${next}.jsonl`), JSON.stringify(handmadeTrajectory()) + "\n");
  appendFileSync(
    join(run, "metrics.jsonl"),
    JSON.stringify({ ...metrics[metrics.length - 1], iteration: next, reward: 0.75, em: 0.5 }) + "\n",
  );
  await waitForPoints(page, "reward", next);
  await waitForPoints(page, "timing", next);
  const live = (await chartState(page, "reward"))!;
  assert.equal(live.lengths[0], next);
  const lastY = await page.evaluate(() => {
    const c = document.querySelector('canvas[data-group="reward"]')!;
    const d = (window as unknown as { Chart: { getChart(c: Element): any } }).Chart.getChart(c).data.datasets[0].data;
    return d[d.length - 1];
  });
  assert.deepEqual(lastY, { x: next, y: 0.75 });

  // ...and its samples come first, opened, with assistant text, tool calls and tool responses as separate blocks.
  const top = `details.iteration[data-iteration="${next}"]`;
  await page.waitForSelector(`${top}[data-loaded="yes"]`, { timeout: 5000 });
  assert.equal(await page.$eval("details.iteration", (d) => (d as HTMLElement).dataset.iteration), String(next));
  assert.equal(await page.locator(`${top} .msg.assistant`).count(), 2);
  const callTexts = await page.locator(`${top} .msg.tool-call`).allTextContents();
  assert.equal(callTexts.length, 2);
  assert.match(callTexts[0], /calculator/);
  assert.match(callTexts[0], /17 \+ 25/);
  const responses = page.locator(`${top} .msg.tool-response`);
  assert.equal(await responses.count(), 2);
  assert.match((await responses.nth(0).textContent())!, /42/);
  assert.match((await responses.nth(1).getAttribute("class"))!, /failed/);
  assert.match((await responses.nth(1).textContent())!, /unexpected end/);
  assert.equal(
    await page.locator(`${top} .msg.assistant .msg`).count(),
    0,
    "tool blocks are not nested in the assistant's",
  );
  assert.match((await page.locator(`${top} .msg.assistant`).last().textContent())!, /<answer>42<\/answer>/);
  assert.equal(await page.locator(`${top} .msg.assistant .inline-call`).count(), 2);
  const backgrounds = await page.$$eval(
    [".msg.assistant", ".msg.tool-call", ".msg.tool-response:not(.failed)", ".msg.tool-response.failed"]
      .map((c) => `${top} ${c}`)
      .join(", "),
    (els) => [...new Set(els.map((e) => getComputedStyle(e).backgroundColor))],
  );
  assert.equal(
    backgrounds.length,
    4,
    `assistant, tool call, tool response and failed response look alike: ${backgrounds.join(" ")}`,
  );

  // A half-written last line is held back, then read once complete.
  appendFileSync(join(run, "metrics.jsonl"), `{"iteration":${next + 1},"reward":0.`);
  await page.waitForTimeout(800);
  assert.equal((await chartState(page, "reward"))!.lengths[0], next);
  appendFileSync(join(run, "metrics.jsonl"), `8,"em":0.6}\n`);
  await waitForPoints(page, "reward", next + 1);
  assert.match((await page.textContent("#status"))!, /live/);

  assert.deepEqual(errors, []);
});

test("a missing run directory or metrics file is one error line and exit 1", async () => {
  const missing = join(tempDir(), "nope");
  const io = captureIO();
  assert.equal(await runCli(["dashboard", missing, "--port", "0"], io), 1);
  assert.equal(io.stderr.length, 1);
  assert.match(io.stderr[0], /^error: dashboard: run directory .*nope not found$/);

  const empty = tempDir();
  const io2 = captureIO();
  assert.equal(await runCli(["dashboard", empty, "--port", "0"], io2), 1);
  assert.equal(io2.stderr.length, 1);
  assert.match(io2.stderr[0], /metrics\.jsonl not found/);

  const io3 = captureIO();
  assert.equal(await runCli(["dashboard"], io3), 2, "a usage error");
  assert.match(io3.stderr[0], /RUN_DIR is required/);
  const io4 = captureIO();
  assert.equal(await runCli(["dashboard", run, "--port", "70000"], io4), 2, "a usage error");
  assert.match(io4.stderr[0], /--port must be an integer/);
  await assert.rejects(startDashboard({ runDir: missing, port: 0 }), /not found/);
});

test("the command prints where it serves and stops cleanly on SIGTERM", async () => {
  const child = spawn(process.execPath, [...process.execArgv, cliEntry(), "dashboard", run, "--port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "",
    err = "";
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise<number | null>((ok) => child.on("exit", (code) => ok(code)));
  const line = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`no output in time; stderr: ${err}`)), 15000);
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) {
        clearTimeout(timer);
        ok(out.split("\n")[0]);
      }
    });
    child.on("exit", () => fail(new Error(`exited early; stderr: ${err}`)));
  });
  try {
    const m = /^dashboard for (.+) on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(line);
    assert.ok(m, line);
    assert.equal(m[1], run);
    assert.notEqual(Number(m[3]), 0);
    const js = await fetch(`${m[2]}/chart.js`);
    assert.equal(js.status, 200);
    assert.match(await js.text(), /Chart/);
    const page = await fetch(m[2]);
    assert.match(await page.text(), /<script src="\/app.js">/);
    const api = (await (await fetch(`${m[2]}/api/metrics?after=1`)).json()) as { records: unknown[]; total: number };
    assert.equal(api.records.length, api.total - 1);
  } finally {
    child.kill("SIGTERM");
  }
  assert.equal(await exited, 0, err);
});

test("the metrics tail reads appended lines, holds back a partial one, and starts over on a rewrite", () => {
  const dir = tempDir();
  const f = join(dir, "metrics.jsonl");
  const tail = new JsonlTail(f);
  assert.equal(tail.refresh(), 0);
  writeFileSync(f, '{"iteration":1,"name":"é"}\n{"iteration":2}\n{"iteration":3,"na');
  assert.equal(tail.refresh(), 2);
  appendFileSync(f, Buffer.from("m\u00e9", "utf8").subarray(0, 2)); // a multi-byte character cut in half
  assert.equal(tail.refresh(), 0);
  appendFileSync(
    f,
    Buffer.concat([Buffer.from("m\u00e9", "utf8").subarray(2), Buffer.from('":"x"}\nnot json\n{"iteration":4}')]),
  );
  assert.equal(tail.refresh(), 2); // iteration 3, then 4 (a complete object, even without its newline)
  assert.deepEqual(
    tail.records.map((r) => r.iteration),
    [1, 2, 3, 4],
  );
  assert.equal(tail.records[2]["namé"], "x");
  assert.equal(tail.records[0].name, "é");
  assert.equal(tail.skipped, 1);
  appendFileSync(f, '\n{"iteration":5}\n');
  assert.equal(tail.refresh(), 1);
  const gen = tail.generation;
  // A resumed run rewrites the file with fewer lines, then appends more, before the next look.
  writeFileSync(
    f,
    '{"iteration":1}\n{"iteration":2,"resumed":true}\n{"iteration":3,"resumed":true}\n{"iteration":4,"resumed":true}\n{"iteration":5,"resumed":true}\n{"iteration":6,"resumed":true}\n',
  );
  tail.refresh();
  assert.ok(tail.generation > gen);
  assert.deepEqual(
    tail.records.map((r) => r.iteration),
    [1, 2, 3, 4, 5, 6],
  );
  assert.equal(tail.records[1].resumed, true);
  assert.equal(tail.skipped, 0);
});
