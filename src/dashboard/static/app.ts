/**
 * The dashboard's browser script, kept as a string so it ships inside dist/ with the
 * server. Plain ES2017 for the browser, no modules: it polls /api/metrics for the records
 * after the ones it holds, draws them with Chart.js (window.Chart, served at /chart.js),
 * and lists samples/iter-N.jsonl newest first. (Written inside String.raw: no backticks
 * or dollar-brace in here.)
 */
export const APP_JS = String.raw`(function () {
  "use strict";

  var params = new URLSearchParams(location.search);
  var POLL_MS = Math.max(100, Number(params.get("poll")) || 1000);
  var PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4b5563", "#65a30d"];
  var VAL_PREFIXES = { val: true, validation: true, eval: true, test: true };
  var TOTAL_KEY = "\u0000total";

  /** The main charts, in page order; a key joins the first whose test accepts its base name. */
  var GROUPS = [
    { id: "reward", title: "Reward and exact match / success", min: 0,
      test: function (b) { return /^(reward|reward_std|reward_mean|score|em|exact_match|success|success_rate|acc|accuracy|f1|format)$/.test(b); } },
    { id: "tools", title: "Turns and tool calls per episode", min: 0,
      test: function (b) { return /^(turns|num_turns|tool_calls|num_tool_calls|tool_errors|tool_error_rate)$/.test(b); } },
    { id: "length", title: "Response length (tokens)", min: 0,
      test: function (b) { return /^(response_tokens|response_length|response_len|mean_response_length|response_tokens_mean)$/.test(b); } },
    { id: "kl", title: "KL", test: function (b) { return /(^|_)kl($|_)/.test(b); } },
    { id: "entropy", title: "Entropy", test: function (b) { return /entropy/.test(b); } },
    { id: "timing", title: "Timings (seconds)", min: 0, test: function (b, p) { return isTiming(b, p); } },
    { id: "throughput", title: "Throughput (tokens/s)", min: 0, test: function (b, p) { return isThroughput(b, p); } },
    { id: "loss", title: "Loss", test: function (b) { return /loss/.test(b); } },
    { id: "optim", title: "Optimizer", test: function (b) { return /^(grad_norm|clip_fraction|clipfrac|skipped_steps)$/.test(b); } }
  ];

  function isThroughput(b, p) {
    return p === "throughput" || /(tokens?_per_s(ec)?|tok_per_s|tokens_s|tps|throughput)$/.test(b);
  }
  function isTiming(b, p) {
    if (isThroughput(b, p)) return false;
    return p === "timing" || p === "timings" || p === "time" || /(_s|_sec|_secs|_seconds)$/.test(b);
  }

  /** Where a metric key is drawn: { group, base, prefix, val } or null for the x axis. */
  function classify(key) {
    if (key === "iteration" || key === "step") return null;
    var slash = key.indexOf("/");
    var prefix = slash >= 0 ? key.slice(0, slash) : "";
    var base = slash >= 0 ? key.slice(slash + 1) : key;
    var val = VAL_PREFIXES[prefix] === true;
    var ownPrefix = val ? "" : prefix;
    // A throughput key can end in _s too, so it is checked before the timings.
    var order = [6, 5, 0, 1, 2, 3, 4, 7, 8];
    for (var i = 0; i < order.length; i++) {
      var g = GROUPS[order[i]];
      if (g.test(base, ownPrefix)) return { group: g.id, base: base, prefix: prefix, val: val };
    }
    // Everything else: one small chart per prefix (per name for keys without one).
    return { group: "other:" + (ownPrefix || base), base: base, prefix: prefix, val: val, other: true };
  }

  var state = {
    gen: null,
    records: [],
    skipped: 0,
    charts: {},        // group id -> { chart, signature, card }
    otherOrder: [],    // other group ids in first-seen order
    sampleEls: {},     // iteration -> <details>
    sampleSeen: false
  };

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function fmt(v) {
    if (!isNum(v)) return "–";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    if (Number.isInteger(v)) return String(v);
    return a >= 100 ? v.toFixed(1) : v.toFixed(3);
  }
  /** Axis labels: short, without trailing zeros. */
  function axisLabel(v) {
    if (!isNum(v)) return "";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(1);
    return String(parseFloat(v.toPrecision(4)));
  }
  function getJson(url) {
    return fetch(url, { cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error(url + ": HTTP " + r.status);
      return r.json();
    });
  }
  function xOf(rec, i) { return isNum(rec.iteration) ? rec.iteration : isNum(rec.step) ? rec.step : i + 1; }

  // ---------- charts ----------

  /** Series per group, keys in order of first appearance (training keys before validation ones). */
  function seriesByGroup(records) {
    var seen = {}, keys = [];
    records.forEach(function (r) {
      Object.keys(r).forEach(function (k) {
        if (!seen[k] && isNum(r[k])) { seen[k] = true; keys.push(k); }
      });
    });
    var groups = {};
    keys.forEach(function (k) {
      var c = classify(k);
      if (!c) return;
      (groups[c.group] = groups[c.group] || []).push({ key: k, base: c.base, val: c.val, other: !!c.other });
    });
    Object.keys(groups).forEach(function (g) {
      var list = groups[g];
      list.sort(function (a, b) { return (a.val ? 1 : 0) - (b.val ? 1 : 0); });
      if (g === "timing") {
        var parts = list.filter(function (s) { return !s.val; });
        var hasTotal = parts.some(function (s) { return /total/.test(s.base); });
        if (!hasTotal && parts.length >= 2) {
          list.push({ key: TOTAL_KEY, base: "total", val: false, label: "total (" + parts.map(function (s) { return s.key; }).join(" + ") + ")", parts: parts.map(function (s) { return s.key; }) });
        }
      }
    });
    return groups;
  }

  function points(records, s) {
    var out = [];
    records.forEach(function (r, i) {
      var y;
      if (s.parts) {
        y = 0;
        for (var j = 0; j < s.parts.length; j++) {
          if (!isNum(r[s.parts[j]])) { y = null; break; }
          y += r[s.parts[j]];
        }
      } else {
        y = r[s.key];
      }
      if (isNum(y)) out.push({ x: xOf(r, i), y: y });
    });
    return out;
  }

  function datasets(records, series) {
    var colorOf = {}, next = 0;
    return series.map(function (s) {
      if (colorOf[s.base] === undefined) colorOf[s.base] = PALETTE[next++ % PALETTE.length];
      var color = s.parts ? "#111827" : colorOf[s.base];
      var data = points(records, s);
      return {
        label: s.label || s.key,
        metricKey: s.key,
        data: data,
        borderColor: color,
        backgroundColor: color,
        borderWidth: s.parts ? 1.5 : 2,
        borderDash: s.val ? [6, 4] : s.parts ? [2, 3] : [],
        pointRadius: s.val ? 3 : data.length <= 60 ? 2 : 0,
        pointHoverRadius: 4,
        tension: 0,
        spanGaps: true
      };
    });
  }

  function groupInfo(id) {
    for (var i = 0; i < GROUPS.length; i++) if (GROUPS[i].id === id) return { title: GROUPS[i].title, min: GROUPS[i].min, main: true, order: i };
    return { title: id.slice("other:".length), main: false, order: state.otherOrder.indexOf(id) };
  }

  function makeCard(id, info) {
    var card = el("div", "chart-card");
    card.dataset.group = id;
    card.dataset.order = String(info.order);
    card.appendChild(el("h3", null, info.title));
    var box = el("div", "chart-box");
    var canvas = document.createElement("canvas");
    canvas.dataset.group = id;
    box.appendChild(canvas);
    card.appendChild(box);
    var parent = info.main ? $("charts") : $("other-charts");
    var before = null;
    for (var c = parent.firstElementChild; c; c = c.nextElementSibling) {
      if (c.dataset && c.dataset.order !== undefined && Number(c.dataset.order) > info.order) { before = c; break; }
    }
    parent.insertBefore(card, before);
    return card;
  }

  function chartOptions(info) {
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: "nearest", axis: "x", intersect: false },
      scales: {
        x: { type: "linear", title: { display: true, text: "iteration" }, ticks: { precision: 0 } },
        y: { suggestedMin: info.min, ticks: { callback: function (v) { return axisLabel(v); } } }
      },
      plugins: {
        legend: { position: "bottom", labels: { boxWidth: 14, boxHeight: 2 } },
        tooltip: { callbacks: { label: function (ctx) { return ctx.dataset.label + ": " + fmt(ctx.parsed.y); } } }
      }
    };
  }

  function drawCharts() {
    var groups = seriesByGroup(state.records);
    Object.keys(groups).forEach(function (id) {
      if (id.indexOf("other:") === 0 && state.otherOrder.indexOf(id) < 0) state.otherOrder.push(id);
    });
    // Drop charts whose metrics are gone (the file was rewritten).
    Object.keys(state.charts).forEach(function (id) {
      if (!groups[id]) {
        state.charts[id].chart.destroy();
        state.charts[id].card.remove();
        delete state.charts[id];
      }
    });
    Object.keys(groups).forEach(function (id) {
      var series = groups[id];
      var signature = series.map(function (s) { return s.key; }).join("\n");
      var ds = datasets(state.records, series);
      var entry = state.charts[id];
      if (entry && entry.signature === signature) {
        entry.chart.data.datasets.forEach(function (d, i) { d.data = ds[i].data; d.pointRadius = ds[i].pointRadius; });
        entry.chart.update("none");
        return;
      }
      var info = groupInfo(id);
      if (entry) entry.chart.destroy();
      var card = entry ? entry.card : makeCard(id, info);
      var canvas = card.querySelector("canvas");
      var chart = new Chart(canvas, { type: "line", data: { datasets: ds }, options: chartOptions(info) });
      state.charts[id] = { chart: chart, signature: signature, card: card };
    });
    $("no-metrics").hidden = state.records.length > 0;
    $("other-title").hidden = $("other-charts").childElementCount === 0;
  }

  var HEADLINE = ["iteration", "reward", "em", "success", "f1", "turns", "tool_calls", "response_tokens", "entropy", "approx_kl", "kl_ref", "rollout_tokens_per_s", "val/reward", "val/em", "val/success"];

  function drawSummary() {
    var box = $("summary");
    box.textContent = "";
    if (state.records.length === 0) return;
    var latest = {};
    state.records.forEach(function (r) { Object.keys(r).forEach(function (k) { latest[k] = r[k]; }); });
    HEADLINE.forEach(function (k) {
      if (!isNum(latest[k])) return;
      var s = el("div", "stat");
      s.dataset.key = k;
      s.appendChild(el("div", "k", k === "iteration" ? "iteration" : "latest " + k));
      s.appendChild(el("div", "v", fmt(latest[k])));
      box.appendChild(s);
    });
  }

  function pollMetrics() {
    var url = "/api/metrics?after=" + state.records.length + (state.gen === null ? "" : "&gen=" + state.gen);
    return getJson(url).then(function (res) {
      var changed = false;
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
      if (changed) { drawCharts(); drawSummary(); }
    });
  }

  // ---------- samples ----------

  function resetSamples() {
    Object.keys(state.sampleEls).forEach(function (k) { state.sampleEls[k].remove(); });
    state.sampleEls = {};
    state.sampleSeen = false;
  }

  function pollSamples() {
    return getJson("/api/samples").then(function (res) {
      var list = res.iterations;
      var known = state.sampleEls;
      var wanted = {};
      list.forEach(function (n) { wanted[n] = true; });
      Object.keys(known).forEach(function (k) {
        if (!wanted[k]) { known[k].remove(); delete known[k]; }
      });
      var fresh = list.filter(function (n) { return !known[n]; });
      var container = $("samples");
      fresh.forEach(function (n) {
        var d = el("details", "iteration");
        d.dataset.iteration = String(n);
        var summary = el("summary", null, "iteration " + n);
        d.appendChild(summary);
        d.appendChild(el("div", "body"));
        d.addEventListener("toggle", function () { if (d.open && !d.dataset.loaded) loadIteration(d, n); });
        var before = null;
        for (var c = container.firstElementChild; c; c = c.nextElementSibling) {
          if (c.dataset && c.dataset.iteration !== undefined && Number(c.dataset.iteration) < n) { before = c; break; }
        }
        container.insertBefore(d, before);
        known[n] = d;
      });
      var newest = list.length > 0 ? list[0] : null;
      if (newest !== null && fresh.indexOf(newest) >= 0 && (!state.sampleSeen || $("follow").checked)) known[newest].open = true;
      if (list.length > 0) state.sampleSeen = true;
      $("no-samples").hidden = list.length > 0;
    });
  }

  function loadIteration(d, n) {
    d.dataset.loaded = "loading";
    var body = d.querySelector(".body");
    body.textContent = "loading…";
    getJson("/api/samples/" + n).then(function (res) {
      body.textContent = "";
      var trajs = res.trajectories;
      var rewards = trajs.map(function (t) { return t.reward; }).filter(isNum);
      var mean = rewards.length ? rewards.reduce(function (a, b) { return a + b; }, 0) / rewards.length : NaN;
      d.querySelector("summary").textContent = "iteration " + n + " · " + trajs.length + " trajectories" + (rewards.length ? " · mean reward " + fmt(mean) : "");
      trajs.forEach(function (t) { body.appendChild(renderTrajectory(t)); });
      if (res.skipped) body.appendChild(el("p", "empty", res.skipped + " unreadable line(s) skipped"));
      if (trajs.length === 0) body.appendChild(el("p", "empty", "no trajectories in this file"));
      d.dataset.loaded = "yes";
    }).catch(function (e) {
      body.textContent = "could not load: " + e.message;
      delete d.dataset.loaded;
    });
  }

  /** Assistant text with tool calls, answers and thinking spans marked inline. */
  function assistantText(text) {
    var pre = el("pre");
    var re = /(<tool_call>[\s\S]*?(?:<\/tool_call>|$)|<answer>[\s\S]*?(?:<\/answer>|$)|<think>[\s\S]*?(?:<\/think>|$))/g;
    var last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m[0].length === 0) { re.lastIndex++; continue; }
      if (m.index > last) pre.appendChild(document.createTextNode(text.slice(last, m.index)));
      var cls = m[0].indexOf("<tool_call>") === 0 ? "inline-call" : m[0].indexOf("<answer>") === 0 ? "inline-answer" : "inline-think";
      pre.appendChild(el("span", cls, m[0]));
      last = m.index + m[0].length;
    }
    if (last < text.length) pre.appendChild(document.createTextNode(text.slice(last)));
    return pre;
  }

  function block(cls, label, content) {
    var b = el("div", "msg " + cls);
    b.appendChild(el("div", "label", label));
    b.appendChild(typeof content === "string" ? el("pre", null, content) : content);
    return b;
  }

  function renderTrajectory(t) {
    var art = el("article", "trajectory");
    var head = el("div", "head");
    head.appendChild(el("span", "id", t.id !== undefined ? t.id : "trajectory"));
    if (t.rowIndex !== undefined) head.appendChild(el("span", null, "row " + t.rowIndex + ", sample " + t.sampleIndex));
    head.appendChild(el("span", "reward", "reward " + fmt(t.reward)));
    if (t.endReason) head.appendChild(el("span", null, "end: " + t.endReason));
    if (isNum(t.driftTokens) && t.driftTokens > 0) head.appendChild(el("span", null, "drift tokens " + t.driftTokens));
    if (t.error) head.appendChild(el("span", "error", t.error));
    art.appendChild(head);
    var steps = Array.isArray(t.steps) ? t.steps : [];
    steps.forEach(function (s, i) {
      if (typeof s.context === "string") {
        var ctx = el("details", "context");
        ctx.appendChild(el("summary", null, (i > 0 ? "context (rewritten)" : "prompt") + " · " + s.context.length + " chars"));
        ctx.appendChild(el("pre", null, s.context));
        art.appendChild(ctx);
      }
      var label = "assistant · turn " + (i + 1) + (s.stopReason ? " · stop: " + s.stopReason : "") + (isNum(s.reward) && s.reward !== 0 ? " · reward " + fmt(s.reward) : "");
      art.appendChild(block("assistant", label, assistantText(String(s.action || ""))));
      var calls = Array.isArray(s.toolCalls) ? s.toolCalls : [];
      calls.forEach(function (c) {
        var name = c.name === null || c.name === undefined ? "(unparsed)" : c.name;
        var args = c.arguments === null || c.arguments === undefined ? "(no arguments parsed)" : JSON.stringify(c.arguments, null, 2);
        art.appendChild(block("tool-call", "tool call → " + name, args));
        var resp = block("tool-response" + (c.ok === false ? " failed" : ""), "tool response ← " + name + " · " + (c.ok === false ? "error" + (c.error ? ": " + c.error : "") : "ok") + (isNum(c.ms) ? " · " + c.ms + " ms" : ""), String(c.text === undefined ? "" : c.text));
        art.appendChild(resp);
      });
      if (calls.length === 0 && typeof s.observation === "string" && s.observation.trim() !== "") {
        art.appendChild(block("observation", "environment", s.observation));
      }
    });
    return art;
  }

  // ---------- main loop ----------

  function setStatus(ok, text) {
    var s = $("status");
    s.className = ok ? "live" : "down";
    s.textContent = text;
  }

  function tick() {
    Promise.all([pollMetrics(), pollSamples()]).then(function () {
      var n = state.records.length;
      setStatus(true, "live · " + n + " iteration" + (n === 1 ? "" : "s") + (state.skipped ? " · " + state.skipped + " unreadable line(s) skipped" : "") + " · updated " + new Date().toLocaleTimeString());
    }, function (e) {
      setStatus(false, "cannot reach the dashboard server (" + e.message + "); retrying");
    }).then(function () { setTimeout(tick, POLL_MS); });
  }

  getJson("/api/info").then(function (info) {
    $("run").textContent = info.runDir;
    document.title = "agent-r1 · " + info.run;
    if (typeof info.config === "string") {
      $("config").textContent = info.config;
      $("config-box").hidden = false;
    }
  }).catch(function () { /* the poll loop reports it */ });
  tick();
})();
`;
