/**
 * The dashboard's page: plain HTML and CSS, kept as a string so it ships inside dist/
 * with the compiled server (no asset copying). Its script, loaded as a classic <script> from
 * /app.js, is ../browser/app.ts (compiled to dist/browser/app.js); Chart.js is served from the
 * installed package at /chart.js and loaded first, as the global the script draws with.
 */
export const PAGE_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-r1 dashboard</title>
<style>
  :root {
    --fg: #1f2937; --muted: #6b7280; --line: #e5e7eb; --bg: #f8fafc; --card: #ffffff;
    --assistant: #eff6ff; --assistant-edge: #3b82f6;
    --call: #fffbeb; --call-edge: #d97706;
    --response: #ecfdf5; --response-edge: #059669;
    --failed: #fef2f2; --failed-edge: #dc2626;
    --observation: #f3f4f6; --observation-edge: #9ca3af;
  }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 12px; padding: 12px 20px; background: var(--card); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 2; }
  header h1 { font-size: 17px; margin: 0; }
  #run { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; color: var(--muted); overflow-wrap: anywhere; }
  #status { margin-left: auto; font-size: 12px; color: var(--muted); }
  #status.live::before { content: ""; display: inline-block; width: 8px; height: 8px; margin-right: 6px; border-radius: 50%; background: #10b981; }
  #status.down { color: var(--failed-edge); }
  main { padding: 16px 20px 40px; max-width: 1600px; margin: 0 auto; }
  h2 { font-size: 15px; margin: 24px 0 10px; }
  #summary { display: flex; flex-wrap: wrap; gap: 8px; }
  .stat { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; min-width: 96px; }
  .stat .k { font-size: 11px; color: var(--muted); }
  .stat .v { font-size: 16px; font-variant-numeric: tabular-nums; }
  details.config { margin-top: 10px; }
  details.config pre { background: var(--card); border: 1px solid var(--line); padding: 10px; max-height: 360px; overflow: auto; }
  .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); gap: 12px; }
  .grid.small { grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); }
  .chart-card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px 10px; }
  .chart-card h3 { font-size: 13px; margin: 0 0 6px; }
  .chart-box { position: relative; height: 240px; }
  .grid.small .chart-box { height: 170px; }
  .empty { color: var(--muted); font-style: italic; }
  .samples-bar { display: flex; gap: 16px; align-items: center; color: var(--muted); font-size: 13px; margin-bottom: 8px; }
  details.iteration { background: var(--card); border: 1px solid var(--line); border-radius: 6px; margin-bottom: 8px; }
  details.iteration > summary { cursor: pointer; padding: 8px 12px; font-weight: 600; }
  details.iteration > .body { padding: 0 12px 12px; }
  .trajectory { border-top: 1px solid var(--line); padding: 10px 0 4px; }
  .trajectory > .head { display: flex; flex-wrap: wrap; gap: 12px; font-size: 12px; color: var(--muted); margin-bottom: 6px; }
  .trajectory > .head .id { font-weight: 600; color: var(--fg); }
  .trajectory > .head .error { color: var(--failed-edge); }
  .msg { border-left: 4px solid; border-radius: 4px; padding: 6px 10px; margin: 6px 0; }
  .msg .label { font-size: 11px; font-weight: 600; margin-bottom: 3px; }
  .msg pre, details.context pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
  .msg.assistant { background: var(--assistant); border-color: var(--assistant-edge); }
  .msg.assistant .label { color: var(--assistant-edge); }
  .msg.tool-call { background: var(--call); border-color: var(--call-edge); margin-left: 24px; }
  .msg.tool-call .label { color: var(--call-edge); }
  .msg.tool-response { background: var(--response); border-color: var(--response-edge); margin-left: 24px; }
  .msg.tool-response .label { color: var(--response-edge); }
  .msg.tool-response.failed { background: var(--failed); border-color: var(--failed-edge); }
  .msg.tool-response.failed .label { color: var(--failed-edge); }
  .msg.observation { background: var(--observation); border-color: var(--observation-edge); margin-left: 24px; }
  .msg.observation .label { color: var(--muted); }
  .inline-call { background: #fde68a; border-radius: 3px; }
  .inline-answer { background: #bbf7d0; border-radius: 3px; font-weight: 600; }
  .inline-think { color: var(--muted); }
  details.context { margin: 4px 0; font-size: 12px; color: var(--muted); }
  details.context summary { cursor: pointer; }
  details.context pre { color: var(--fg); background: var(--observation); padding: 6px 10px; border-radius: 4px; max-height: 300px; overflow: auto; }
</style>
</head>
<body>
<header>
  <h1>agent-r1 dashboard</h1>
  <span id="run"></span>
  <span id="status">connecting…</span>
</header>
<main>
  <section id="summary" aria-label="latest values"></section>
  <details class="config" id="config-box" hidden><summary>config.yaml</summary><pre id="config"></pre></details>
  <h2>Training metrics</h2>
  <div id="charts" class="grid"><p class="empty" id="no-metrics">No iteration recorded yet.</p></div>
  <h2 id="other-title" hidden>Other metrics</h2>
  <div id="other-charts" class="grid small"></div>
  <h2>Sample trajectories</h2>
  <div class="samples-bar">
    <span>newest iteration first</span>
    <label><input type="checkbox" id="follow" checked> open new iterations as they arrive</label>
  </div>
  <div id="samples"><p class="empty" id="no-samples">No samples yet.</p></div>
</main>
<script src="/chart.js"></script>
<script src="/app.js"></script>
</body>
</html>
`;
