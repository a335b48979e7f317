"""The charts page served at ``/fourfold/charts``: one self-contained HTML file (inline SVG + JS).

No CDN, no build step, nothing fetched from outside: the page polls ``charts.json`` (next to it)
every two seconds and draws SVG line charts: TTFT percentiles over a sliding window, output
tokens/s per second, stalls (and failed requests) per second, server telemetry (the sampler's
rows) and, for L3, the stage means over time; it polls ``levels.json`` for the level's panel (the
rows of the "LLM level" tab) and draws the L3 stage breakdown as a stacked bar.

A chart with nothing to draw for this level is left off (``charts.json``'s ``shown``: L3 has no
server telemetry, L1/L2/L4 no stages). A stage has one colour on the whole page, the bar and the
stage chart alike (``stage_colors`` in both JSON answers,
:func:`fourfold.levels.webui_panels.stage_colors`).
"""

from __future__ import annotations

import json

from fourfold.levels.webui_panels import CHART_COLORS

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>fourfold LLM charts</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #1d2330; background: #fafbfc; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  .sub { color: #5b6473; margin-bottom: 12px; }
  .chart { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; margin: 12px 0; \
padding: 8px 12px; }
  .chart h2 { font-size: 15px; margin: 4px 0; }
  .legend span { margin-right: 14px; white-space: nowrap; }
  .legend i { display: inline-block; width: 18px; height: 3px; vertical-align: middle; margin-right: 4px; }
  svg { width: 100%; height: 240px; display: block; }
  svg text { font-size: 11px; fill: #5b6473; }
  .axis { stroke: #9aa3b0; stroke-width: 1; }
  .grid { stroke: #eceff3; stroke-width: 1; }
  .empty { fill: #9aa3b0; font-size: 13px; }
  select { font: inherit; }
  a { color: #2457c5; }
  table.panel { border-collapse: collapse; }
  table.panel td { padding: 2px 10px; border-bottom: 1px solid #eceff3; }
  .bar { display: flex; height: 22px; border-radius: 4px; overflow: hidden; margin: 6px 0; }
  .bar div { color: #fff; font-size: 11px; line-height: 22px; padding: 0 4px; white-space: nowrap; \
overflow: hidden; }
</style>
</head>
<body>
<h1>fourfold: LLM metrics over time</h1>
<div class="sub">
  <label>level:scenario <select id="key"></select></label>
  &nbsp; state <b id="state">-</b> &nbsp; <span id="note"></span>
  &nbsp; <a href="../?tab=llm">back to Locust's LLM tab</a> &middot; <a href="llm.csv">CSV</a>
</div>
<div class="chart"><h2>Level panel (<span id="level">-</span>, test <span id="test">-</span>)</h2>
  <div id="stagebar" class="bar"></div><table class="panel" id="panel"></table></div>
<div class="chart"><h2>TTFT percentiles (ms, sliding window of <span id="win">10</span> s)</h2>
  <div class="legend" id="legend-ttft"></div><svg id="ttft"></svg></div>
<div class="chart"><h2>Output tokens/s (by the second each chunk arrived)</h2>
  <div class="legend" id="legend-tps"></div><svg id="tps"></svg></div>
<div class="chart"><h2>Stalls per second (gaps between content chunks above <span id="stall">150</span> ms) \
and failed requests</h2>
  <div class="legend" id="legend-stalls"></div><svg id="stalls"></svg></div>
<div class="chart" id="chart-stages" hidden><h2>L3 stage means (ms, cumulative over the test)</h2>
  <div class="legend" id="legend-stages"></div><svg id="stages"></svg></div>
<div class="chart" id="chart-telemetry" hidden>
  <h2>Server telemetry (the sampler's rows: /metrics, nvidia-smi)</h2>
  <div class="legend" id="legend-telemetry"></div><svg id="telemetry"></svg></div>
<script>
"use strict";
const COLORS = __COLORS__;
const NS = "http://www.w3.org/2000/svg";
const sel = document.getElementById("key");

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
function clock(t) { return new Date(t * 1000).toTimeString().slice(0, 8); }
function legend(id, lines) {
  document.getElementById(id).innerHTML = lines.map((l, i) =>
    `<span><i style="background:${l.color || COLORS[i % COLORS.length]}"></i>${l.name}</span>`).join("");
}
function draw(id, xs, lines, t0) {
  const svg = document.getElementById(id);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = svg.clientWidth || 900, H = svg.clientHeight || 240, L = 56, R = 12, T = 10, B = 24;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const values = lines.flatMap(l => l.ys.filter(v => v !== null && v !== undefined));
  if (!xs.length || !values.length) {
    el("text", {x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty"}, svg).textContent = \
"no data yet";
    return;
  }
  const x0 = t0 ? Math.min(Math.floor(t0), xs[0]) : xs[0], x1 = Math.max(xs[xs.length - 1], x0 + 1), \
ymax = niceMax(Math.max(...values));
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R), sy = y => H - B - y / ymax * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const y = ymax * i / 4;
    el("line", {x1: L, x2: W - R, y1: sy(y), y2: sy(y), class: i ? "grid" : "axis"}, svg);
    el("text", {x: L - 6, y: sy(y) + 4, "text-anchor": "end"}, svg).textContent = +y.toPrecision(3);
  }
  for (let i = 0; i <= 4; i++) {
    const x = x0 + (x1 - x0) * i / 4;
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    el("text", {x: sx(x), y: H - 6, "text-anchor": anchor}, svg).textContent = clock(x);
  }
  lines.forEach((line, i) => {
    let d = "", pen = false;
    line.ys.forEach((y, j) => {
      if (y === null || y === undefined) { pen = false; return; }
      d += `${pen ? "L" : "M"}${sx(xs[j]).toFixed(1)},${sy(y).toFixed(1)} `;
      pen = true;
    });
    if (d) el("path", {d, fill: "none", stroke: line.color || COLORS[i % COLORS.length],
                       "stroke-width": 1.8, "data-series": line.name}, svg);
  });
}
function columns(cols) {
  return Object.keys(cols).filter(k => k !== "t_s").map(k => ({name: k, ys: cols[k]}));
}
async function refreshLevel() {
  const resp = await fetch("levels.json", {cache: "no-store"});
  const data = await resp.json();
  document.getElementById("level").textContent = data.level;
  document.getElementById("test").textContent = data.test;
  const table = document.getElementById("panel");
  table.replaceChildren(...data.panels.map(r => {
    const tr = document.createElement("tr");
    for (const v of [r.panel, r.metric, r.value]) \
tr.appendChild(document.createElement("td")).textContent = v;
    return tr;
  }));
  const means = Object.entries(data.stage_means_ms || {}).filter(([, v]) => v > 0);
  const sum = means.reduce((a, [, v]) => a + v, 0);
  document.getElementById("stagebar").replaceChildren(...means.map(([name, v], i) => {
    const div = document.createElement("div");
    div.style.width = (100 * v / sum).toFixed(2) + "%";
    div.style.background = (data.stage_colors || {})[name] || COLORS[i % COLORS.length];
    div.dataset.stage = name;
    div.textContent = `${name} ${v.toFixed(1)} ms`;
    return div;
  }));
}
async function refresh() {
  refreshLevel().catch(() => {});
  try {
    const resp = await fetch("charts.json?key=" + encodeURIComponent(sel.value || ""), {cache: "no-store"});
    const data = await resp.json();
    const keep = sel.value || data.key;
    if (sel.options.length !== data.keys.length) {
      sel.replaceChildren(...data.keys.map(k => new Option(k, k)));
      sel.value = keep;
    }
    document.getElementById("state").textContent = data.state;
    document.getElementById("win").textContent = data.window_s;
    document.getElementById("stall").textContent = data.stall_threshold_ms;
    document.getElementById("note").textContent = data.note || "";
    const w = data.ttft_window, s = data.series;
    const ttft = [{name: "p50", ys: w.p50}, {name: "p95", ys: w.p95}, {name: "p99", ys: w.p99}];
    legend("legend-ttft", ttft); draw("ttft", w.t_s, ttft, data.t0_s);
    const tps = [{name: "output tokens/s", ys: s.output_tokens}];
    legend("legend-tps", tps); draw("tps", s.t_s, tps, data.t0_s);
    const st = [{name: "stalls", ys: s.stalls}, {name: "failed requests", ys: s.failures}];
    legend("legend-stalls", st); draw("stalls", s.t_s, st, data.t0_s);
    for (const [name, on] of Object.entries(data.shown || {})) {   // a chart this level has nothing for: off
      document.getElementById("chart-" + name).hidden = !on;
    }
    const sg = columns(data.stages).map(l => ({...l, color: (data.stage_colors || {})[l.name]}));
    legend("legend-stages", sg); draw("stages", data.stages.t_s, sg, data.t0_s);
    const tm = columns(data.telemetry);
    legend("legend-telemetry", tm); draw("telemetry", data.telemetry.t_s, tm, data.t0_s);
  } catch (err) {
    document.getElementById("note").textContent = "cannot reach the Locust web UI: " + err;
  }
}
sel.addEventListener("change", refresh);
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""

CHARTS_HTML = _PAGE.replace("__COLORS__", json.dumps(list(CHART_COLORS)))
