// The live dashboard: polls /dashboard/data (the figures of /metrics, the trackers and TrafficSplitters of
// /stats) and draws each API, then each TrafficSplitter, as a card. Rates and per-interval percentiles come
// from the difference between two polls, the way Prometheus' rate() and histogram_quantile() do; the page
// keeps the last HISTORY polls.
"use strict";
const KEY_STORE = "localserve.api_key";
const INTERVAL_MS = 1000 * (Number(new URLSearchParams(location.search).get("interval")) || 1); // ?interval=seconds
const HISTORY = 120;
const history = new Map(); // api -> [{t, count, buckets, total}]

function savedKey() {
  try { return localStorage.getItem(KEY_STORE) || ""; } catch (e) { return ""; }
}

function setupKey() {
  const input = document.getElementById("api-key");
  const state = document.getElementById("key-state");
  input.value = savedKey();
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    try { localStorage.setItem(KEY_STORE, input.value); } catch (e) { /* private mode */ }
    state.textContent = input.value ? "key saved" : "no key";
    poll();
  });
  return () => input.value;
}
const currentKey = setupKey();

// histogram_quantile over cumulative [[le, count], ...] buckets (le null = +Inf).
function quantile(q, buckets) {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1][1];
  if (!total) return null;
  const rank = q * total;
  let lowerBound = 0, lowerCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === null) return lowerBound;
      if (count === lowerCount) return le;
      return lowerBound + (le - lowerBound) * (rank - lowerCount) / (count - lowerCount);
    }
    if (le !== null) lowerBound = le;
    lowerCount = count;
  }
  return lowerBound;
}

function diffBuckets(now, before) {
  if (!before || before.length !== now.length) return now;
  return now.map(([le, count], i) => [le, count - before[i][1]]);
}

function ms(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const v = seconds * 1000;
  return v >= 100 ? v.toFixed(0) + " ms" : v >= 10 ? v.toFixed(1) + " ms" : v.toFixed(2) + " ms";
}

function num(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function figure(label, value, cls = "") {
  return el("div", { class: "figure " + cls, "data-figure": label }, el("dt", {}, label), el("dd", {}, value));
}

// One formatter for every chart's axis: the ticks 0, top/2 and top with the decimals that show two significant
// digits of the step between them (the same for the three, at most 3), and the chart's unit.
function axisLabels(top, unit) {
  const step = top / 2;
  const decimals = Math.min(3, Math.max(0, 1 - Math.floor(Math.log10(step)))); // two significant digits of the step
  return [0, 0.5, 1].map((f) => (top * f).toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals }) + unit);
}

// A line chart of several series over the kept history: [{name, cls, points: [[t, v|null]]}]; ``scale`` turns a
// value into the axis's unit (seconds -> ms). The SVG is drawn at its box's width in pixels, one user unit a
// pixel, so its text keeps the stylesheet's px size at any window width; ``fitCharts`` redraws on resize.
// ``empty``: what the chart says across its middle when it has nothing to draw ("no requests yet"), or null.
function lineChart(series, scale, unit, label, empty = null) {
  const chart = svg("svg", { class: "chart", role: "img", "aria-label": empty ? `${label}: ${empty}` : label, "data-chart": label });
  chart.draw = (width) => drawChart(chart, Math.max(Math.floor(width), 160), series, scale, unit, empty);
  return chart;
}

function drawChart(chart, W, series, scale, unit, empty) {
  const H = 140, L = 64, B = 18, T = 8, R = 8;
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
  chart.setAttribute("width", W);
  chart.setAttribute("height", H);
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null)).map((p) => scale(p[1]));
  const times = series.flatMap((s) => s.points.map((p) => p[0]));
  // the kept history fills the width (at least ten intervals)
  const t1 = Math.max(...times, 1), t0 = Math.min(t1 - INTERVAL_MS / 100, ...times);
  const top = Math.max(...all, 0) * 1.1 || 1;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0 || 1);
  const y = (v) => H - B - (H - B - T) * v / top;
  axisLabels(top, unit).forEach((tick, i) => {
    const v = top * i / 2;
    chart.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    const text = svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", "data-tick": i });
    text.textContent = tick;
    chart.append(text);
  });
  const age = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" });
  age.textContent = `last ${Math.round(t1 - t0)} s`;
  chart.append(age);
  for (const s of series) {
    let run = [];
    const flush = () => {
      if (run.length) chart.append(svg("polyline", { class: s.cls, points: run.join(" "), "data-series": s.name }));
      run = [];
    };
    for (const [t, value] of s.points) {
      if (value === null) { flush(); continue; }
      const v = scale(value);
      run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      // a dot for every point, so that an interval alone between two idle ones still shows
      chart.append(svg("circle", { class: s.cls, cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 2, "data-series": s.name }));
    }
    flush();
  }
  if (empty) {
    // between the top and middle grid lines, clear of both
    const note = svg("text", { x: (L + W - R) / 2, y: T + (H - B - T) / 4 + 5, "text-anchor": "middle", class: "empty", "data-empty": "" });
    note.textContent = empty;
    chart.append(note);
  }
}

// Draw every chart at the width its card gives it (after the cards are in the page, and on resize).
function fitCharts() {
  for (const chart of document.querySelectorAll("svg.chart")) {
    const box = getComputedStyle(chart.parentElement); // the card's content box: its width less its padding
    chart.draw(chart.parentElement.clientWidth - parseFloat(box.paddingLeft) - parseFloat(box.paddingRight));
  }
}
window.addEventListener("resize", fitCharts);

function legend(items) {
  return el("div", { class: "legend" }, ...items.map(([name, color]) => el("span", {}, el("i", { style: `background:${color}` }), name)));
}

function bars(rows, label) {
  const top = Math.max(...rows.map((r) => r[1]), 1);
  const box = el("div", { class: "bars", role: "img", "aria-label": label, "data-bars": label });
  for (const [name, n] of rows) {
    if (n === null) { box.append(el("span", { class: "gap" }, name)); continue; } // empty bins left out
    const fill = el("div", { class: "bar-fill", style: `width:${(100 * n / top).toFixed(1)}%` });
    box.append(el("span", { class: "label" }, String(name)), el("div", { class: "bar-track" }, fill), el("span", { class: "n" }, num(n)));
  }
  return box;
}

function bound(value) {
  return Number(value).toLocaleString("en-US", { maximumSignificantDigits: 3 });
}

// The tracker's regression bins ([[lower, upper, count]], null = infinity) as bar rows labelled (lower, upper];
// empty bins between two are one "⋯" row.
function histogramRows(bins) {
  const rows = [];
  let previous;
  for (const [lower, upper, n] of bins) {
    if (previous !== undefined && previous !== lower) rows.push(["⋯", null]);
    rows.push([lower === null ? `≤ ${bound(upper)}` : upper === null ? `> ${bound(lower)}` : `${bound(lower)} – ${bound(upper)}`, n]);
    previous = upper;
  }
  return rows;
}

function remember(api, t) {
  const f = api.figures;
  if (!f) return [];
  const points = history.get(api.name) || [];
  const total = Object.values(f.codes).reduce((a, b) => a + b, 0);
  points.push({ t, total, buckets: f.latency.buckets });
  while (points.length > HISTORY + 1) points.shift();
  history.set(api.name, points);
  return points;
}

function card(api, t) {
  const f = api.figures;
  const points = remember(api, t);
  // the runtime's own name for it (CPUExecutionProvider, /GPU:0 ...) -> CPU or GPU
  const device = api.device ? (/cuda|gpu|tensorrt|rocm/i.test(api.device) ? "GPU" : "CPU") : api.gpu ? "GPU" : "CPU";
  const node = el("article", { class: "api", "data-api": api.name });
  node.append(
    el("h2", {}, api.name, el("span", { class: `badge ${api.status}`, "data-status": api.status }, api.status)),
    el("div", { class: "meta", title: api.device || "" }, [api.kind, api.model_format, device, api.batching ? `batching ≤ ${api.batching}` : null].filter(Boolean).join(" · ")),
  );
  if (api.error) node.append(el("p", { class: "error" }, api.error));
  if (!f) {
    node.append(el("p", { class: "notice" }, "No figures: metrics are off (--no-metrics)."));
    return node;
  }
  const byClass = { "2xx": 0, "4xx": 0, "5xx": 0 };
  for (const [code, n] of Object.entries(f.codes)) {
    const cls = code[0] + "xx";
    if (cls in byClass) byClass[cls] += n;
  }
  const last = points[points.length - 1], before = points[points.length - 2];
  const rate = before ? (last.total - before.total) / (last.t - before.t) : null;
  const lat = f.latency.buckets;
  const batch = f.batch_size;
  node.append(el("dl", { class: "figures" },
    figure("req/s", num(rate, 1)),
    figure("2xx", num(byClass["2xx"]), "c2xx"),
    figure("4xx", num(byClass["4xx"]), "c4xx"),
    figure("5xx", num(byClass["5xx"]), "c5xx"),
    figure("p50", ms(quantile(0.5, lat))),
    figure("p90", ms(quantile(0.9, lat))),
    figure("p99", ms(quantile(0.99, lat))),
    figure("in flight", num(f.in_flight)),
    figure("queue", num(f.queue_depth)),
    figure("batch mean", batch.count ? num(batch.sum / batch.count, 1) : "–"),
  ));
  const series = [["p50", 0.5], ["p90", 0.9], ["p99", 0.99]].map(([name, q]) => ({
    name, cls: name,
    points: points.slice(1).map((p, i) => [p.t, quantile(q, diffBuckets(p.buckets, points[i].buckets))]),
  }));
  if (api.status !== "failed") { // a failed API answers nothing but 503s: no chart to draw
    // an API that never answered has nothing to chart: say so, rather than leave the charts blank
    const idle = last.total === 0 ? "no requests yet" : null;
    const quiet = points.length > 1 && series.every((s) => s.points.every((p) => p[1] === null)) ? "no requests in this window" : null;
    node.append(el("h3", {}, "latency per interval (since start: p50 / p90 / p99 above)"),
      lineChart(series, (seconds) => seconds * 1000, " ms", "latency", idle || quiet),
      legend([["p50", "var(--accent)"], ["p90", "#8250df"], ["p99", "var(--bad)"]]));
    const rates = points.slice(1).map((p, i) => [p.t, (p.total - points[i].total) / (p.t - points[i].t)]);
    node.append(el("h3", {}, "requests per second"), lineChart([{ name: "rate", cls: "rate", points: rates }], (v) => v, "/s", "rate", idle));
  }
  const sizes = [];
  let seen = 0, low = 0;
  for (const [le, count] of batch.buckets) {
    if (count - seen > 0) sizes.push([le === null ? `>${low}` : low + 1 === le || le === 1 ? String(le) : `${low + 1}–${le}`, count - seen]);
    seen = count;
    if (le !== null) low = le;
  }
  if (sizes.length) node.append(el("h3", {}, "batch sizes (model calls)"), bars(sizes, "batch sizes"));
  const tracker = api.tracker;
  if (tracker && tracker.model_type === "classification") {
    const rows = Object.entries(tracker.classes).sort((a, b) => b[1] - a[1]);
    node.append(el("h3", {}, `tracker: classes${tracker.key ? ` (${tracker.key})` : ""}`),
      rows.length ? bars(rows, "classes") : el("p", { class: "notice" }, "no prediction yet"));
  } else if (tracker) {
    node.append(el("h3", {}, `tracker: regression${tracker.key ? ` (${tracker.key})` : ""}`), el("dl", { class: "figures", "data-tracker": "regression" },
      figure("count", num(tracker.count)), figure("min", num(tracker.min, 3)), figure("mean", num(tracker.mean, 3)), figure("max", num(tracker.max, 3))));
    if (tracker.histogram.length) node.append(bars(histogramRows(tracker.histogram), "histogram"));
  }
  if (f.models && f.models.length) {
    // a multi-model API: each model version's loads, evictions, mean load and call times
    const head = el("tr", {}, ...["model", "version", "loads", "evictions", "load", "calls", "mean"].map((h) => el("th", {}, h)));
    const rows = f.models.map((m) => el("tr", { "data-model": `${m.model}/${m.version}` },
      el("td", {}, m.model), el("td", {}, String(m.version)), el("td", {}, num(m.loads)),
      el("td", {}, num(Object.values(m.evictions).reduce((a, b) => a + b, 0))),
      el("td", {}, ms(m.load_mean)), el("td", {}, num(m.calls)), el("td", {}, ms(m.latency_mean))));
    node.append(el("h3", {}, "models"), el("table", { class: "models" }, head, ...rows));
  }
  return node;
}

// The requests per second of ``key`` (an API's or a splitter's history) from its total at two polls.
function rateOf(key, total, t) {
  const points = history.get(key) || [];
  points.push({ t, total });
  while (points.length > HISTORY + 1) points.shift();
  history.set(key, points);
  const before = points[points.length - 2];
  return before ? (total - before.total) / (t - before.t) : null;
}

// A TrafficSplitter (its /stats entry): each API it picks with its weight and the requests it answered, and
// its shadow with the copies it got, answered, failed or dropped.
function splitterCard(split, t, metrics) {
  const targets = Object.entries(split.targets);
  const node = el("article", { class: "api splitter", "data-splitter": split.api });
  node.append(
    el("h2", {}, split.api, el("span", { class: `badge ${split.status}`, "data-status": split.status }, split.status)),
    el("div", { class: "meta" }, ["TrafficSplitter", ...targets.map(([name, x]) => `${name} ${x.weight}%`)].join(" · ")),
  );
  if (metrics) {
    const total = split.requests["2xx"] + split.requests["4xx"] + split.requests["5xx"];
    node.append(el("dl", { class: "figures" },
      figure("req/s", num(rateOf("splitter " + split.api, total, t), 1)),
      figure("2xx", num(split.requests["2xx"]), "c2xx"),
      figure("4xx", num(split.requests["4xx"]), "c4xx"),
      figure("5xx", num(split.requests["5xx"]), "c5xx"),
    ));
  } else {
    node.append(el("p", { class: "notice" }, "No figures: metrics are off (--no-metrics)."));
  }
  const cells = (x) => metrics ? ["2xx", "4xx", "5xx"].map((c) => el("td", { "data-class": c }, num(x.requests[c]))) : [];
  const head = el("tr", {}, ...["api", "weight", ...(metrics ? ["2xx", "4xx", "5xx"] : [])].map((h) => el("th", {}, h)));
  const rows = targets.map(([name, x]) => el("tr", { "data-target": name },
    el("td", {}, name), el("td", { "data-weight": "" }, `${x.weight}%`), ...cells(x)));
  node.append(el("h3", {}, "traffic split (each request to one API, by weight)"), el("table", { class: "split" }, head, ...rows));
  const shadow = split.shadow;
  if (shadow) {
    node.append(el("h3", { "data-shadow": shadow.api }, `shadow: ${shadow.api} (a copy of ${shadow.weight}% of the requests; its answers are dropped)`));
    if (metrics) node.append(el("dl", { class: "figures", "data-shadow-figures": shadow.api },
      figure("answered", num(shadow.answered), "c2xx"), figure("failed", num(shadow.failed), "c5xx"), figure("dropped", num(shadow.dropped), "c4xx")));
  }
  return node;
}

// serve --reload: a failed reload (the last good version still serves) until the next good save.
function showReload(reload) {
  const banner = document.getElementById("reload");
  const error = reload && reload.error;
  banner.hidden = !error;
  banner.textContent = error ? `reload failed (still serving the last good version) after ${reload.changed.join(", ")} changed: ${error}` : "";
}

async function poll() {
  const notice = document.getElementById("notice");
  const headers = {};
  const key = currentKey();
  if (key) headers.Authorization = "Bearer " + key;
  try {
    const response = await fetch("dashboard/data", { headers, cache: "no-store" });
    if (response.status === 401) {
      notice.textContent = "401: this server needs an API key; enter it above.";
      notice.className = "notice bad";
      document.getElementById("api-key").focus();
      return;
    }
    if (!response.ok) throw new Error(`/dashboard/data answered ${response.status}`);
    const data = await response.json();
    const apis = document.getElementById("apis");
    const splitters = data.splitters || [];
    apis.replaceChildren(...data.apis.map((api) => card(api, data.time)), ...splitters.map((split) => splitterCard(split, data.time, data.metrics)));
    fitCharts();
    const splits = splitters.length ? ` · ${splitters.length} TrafficSplitter${splitters.length === 1 ? "" : "s"}` : "";
    notice.textContent = `${data.apis.length} API${data.apis.length === 1 ? "" : "s"}${splits} · updated ${new Date(data.time * 1000).toLocaleTimeString()} · every ${INTERVAL_MS / 1000} s` + (data.metrics ? "" : " · metrics are off");
    notice.className = "notice";
    showReload(data.reload);
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (error) {
    notice.textContent = `could not reach the server: ${error.message}`;
    notice.className = "notice bad";
  }
}

async function loop() {
  await poll();
  setTimeout(loop, INTERVAL_MS);
}
loop();
