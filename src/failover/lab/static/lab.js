// The lab page: read the form, POST /api/run, render what the real router did.
// Nothing here decides routing; it only draws the RouteRecord the server returns.
"use strict";

const $ = (id) => document.getElementById(id);
const ms = (s) => `${Math.round(s * 1000)}ms`;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children) node.append(c);
  return node;
}

function settings() {
  const form = $("controls");
  const out = {
    scenario: form.scenario.value,
    capability: form.querySelector("input[name=capability]:checked").value,
    budget: Number($("budget").value),
    attempt_cap: Number($("attempt_cap").value),
    a_extra_retries: Number($("a_extra_retries").value),
    fallback_reserve: $("fallback_reserve").value === "" ? null : Number($("fallback_reserve").value),
  };
  if (out.scenario === "custom") out.custom = $("custom").value;
  return out;
}

// A timed-out attempt was cancelled at its cap (the per-attempt cap or what was left of the budget).
function cancelledAtCap(a) {
  return a.outcome.startsWith("timeout") || a.outcome === "cancelled";
}

// The segments of one attempt, from the record alone: connect (start -> connected), waiting for the
// first token or the whole response (connected -> first_event, or -> end), the streamed body
// (first_event -> end). The segment running when the cap fired is marked cancelled at cap.
function attemptSegments(a) {
  const segs = [];
  const has = (v) => v !== null && v !== undefined;
  if (!has(a.connected) && (a.status || a.outcome === "ok")) {
    // A real transport that cannot tell when it connected (the lab's fakes always can): the
    // attempt got an answer, so its whole time is the wait for it.
    segs.push({ kind: "first", start: a.start, end: has(a.first_event) ? a.first_event : a.end });
    if (has(a.first_event)) segs.push({ kind: "body", start: a.first_event, end: a.end });
  } else if (!has(a.connected)) {
    // No connect time and no answer: it never connected.
    segs.push({ kind: "connect", start: a.start, end: a.end });
  } else {
    segs.push({ kind: "connect", start: a.start, end: a.connected });
    if (has(a.first_event)) {
      segs.push({ kind: "first", start: a.connected, end: a.first_event });
      segs.push({ kind: "body", start: a.first_event, end: a.end });
    } else {
      segs.push({ kind: "first", start: a.connected, end: a.end });
    }
  }
  if (cancelledAtCap(a)) segs[segs.length - 1].cap = true;
  return segs;
}

const SEG_NAMES = { connect: "connect", first: "wait for first token", body: "body" };

// Attempts and waits in start order: the rows of the timeline (the test reads them back).
function timelineRows(rec) {
  const rows = [];
  for (const a of rec.attempts) {
    const cap = cancelledAtCap(a);
    const status = a.status ? ` HTTP ${a.status}` : "";
    rows.push({
      start: a.start, end: a.end, target: a.target, phase: a.phase,
      outcome: a.outcome + status + (cap ? " (cancelled at cap)" : ""),
      short: a.outcome + status,
      kind: a.outcome === "ok" ? "ok" : cap ? "cap" : "fail",
      segments: attemptSegments(a),
    });
  }
  for (const w of rec.waits) {
    rows.push({
      start: w.start, end: w.end, target: w.target, phase: "wait", outcome: w.reason, short: w.reason, kind: "wait",
      segments: null,
    });
  }
  return rows.sort((x, y) => x.start - y.start);
}

function segmentText(segs) {
  return segs.map((g) => `${SEG_NAMES[g.kind]} ${ms(g.end - g.start)}${g.cap ? " (cancelled at cap)" : ""}`).join(", ");
}

// The simulator's providers are a, b and c, shown as A, B and C; a real target keeps its name.
const upper = (name) => name.toUpperCase();

function attemptBar(r, pct, name = upper) {
  const dur = r.end - r.start;
  const bar = el("div", {
    class: `bar attempt ${r.kind}`,
    style: `left:${pct(r.start)};width:${pct(dur)}`,
    title: `${name(r.target)} ${r.phase} ${r.outcome}: ${segmentText(r.segments)}`,
  });
  for (const g of r.segments) {
    const share = dur > 0 ? (100 * (g.end - g.start)) / dur : 0;
    const seg = el("div", {
      class: `seg seg-${g.cap ? "cap" : g.kind === "first" ? "first" : g.kind}`,
      style: `width:${share}%`,
      "data-kind": g.kind, "data-cap": g.cap ? "true" : "false",
      "data-start": String(g.start), "data-end": String(g.end),
    }, share > 12 ? ms(g.end - g.start) : "");
    bar.append(seg);
  }
  return bar;
}

// The timeline of one RouteRecord: the simulator's (over its budget) or a real request's (over
// its elapsed time, in the live view: ``box``, ``span`` and ``name`` given).
function renderTimeline(rec, box = $("timeline"), span = null, name = upper) {
  box.replaceChildren();
  const rows = timelineRows(rec);
  span = Math.max(span ?? rec.options.budget, ...rows.map((r) => r.end), 1e-3);
  const pct = (t) => `${(100 * t) / span}%`;
  for (const r of rows) {
    const detail = r.segments ? `; ${segmentText(r.segments)}` : "";
    const text = `${name(r.target)} ${r.phase} ${r.outcome} ${ms(r.end - r.start)}${detail}`;
    const label = `${name(r.target)} ${r.phase} · ${r.short}`;
    const bar = r.segments
      ? attemptBar(r, pct, name)
      : el("div", {
        class: `bar ${r.kind}`,
        style: `left:${pct(r.start)};width:${pct(r.end - r.start)}`,
        title: `${text} (${ms(r.start)}–${ms(r.end)})`,
      }, ms(r.end - r.start));
    const row = el("div", {
      class: "row", role: "row",
      "data-target": r.target, "data-phase": r.phase, "data-outcome": r.outcome,
      "data-start": String(r.start), "data-end": String(r.end),
    },
      el("div", { class: "label", role: "rowheader", "aria-label": text, title: text }, label),
      el("div", { class: "track", role: "cell", "aria-label": `from ${ms(r.start)} to ${ms(r.end)}${detail}` }, bar));
    box.append(row);
  }
  const ticks = el("div", { class: "ticks" });
  for (let i = 0; i <= 4; i++) ticks.append(el("span", {}, ms((span * i) / 4)));
  box.append(el("div", { class: "axis", "aria-hidden": "true" }, el("span", {}, "time since request start"), ticks));
}

function renderPath(rec, path = $("path"), name = upper) {
  path.replaceChildren();
  for (const a of rec.attempts) {
    path.append(el("li", { class: a.outcome === "ok" ? "ok" : "fail" },
      `${name(a.target)} (${a.phase}): ${a.outcome}`));
  }
  if (!rec.attempts.length) path.append(el("li", {}, "no attempt was made"));
}

function renderExcluded(rec, list = $("excluded"), name = upper) {
  list.replaceChildren();
  for (const e of rec.excluded) {
    const item = { "data-target": e.target, "data-code": e.code };
    list.append(el("li", item, el("strong", {}, name(e.target)), ` (${e.phase}): ${e.reason}`));
  }
  if (!rec.excluded.length) list.append(el("li", {}, "none: every candidate could serve this request"));
}

function renderSummary(rec) {
  const box = $("summary");
  const ok = rec.error === null;
  box.className = ok ? "ok" : "fail";
  const calls = Object.entries(rec.calls).map(([n, c]) => `${n.toUpperCase()}=${c}`).join(", ");
  const facts = [
    ["Target used", rec.target_used ?? "none", "target"],
    ["Outcome", rec.outcome, "outcome"],
    ["Workflow", rec.workflow, "workflow"],
    ["Recovered", rec.recovered ? "yes" : "no", "recovered"],
    ["Elapsed", ms(rec.elapsed_ms / 1000), "elapsed"],
    ["Added latency", ms(rec.added_latency_ms / 1000), "added"],
    ["Cost", `$${rec.total_cost.toFixed(6)}`, "cost"],
    ["Provider calls", calls, "calls"],
  ];
  if (rec.recovery_reason) facts.push(["Why", rec.recovery_reason, "recovery"]);
  if (ok) facts.push(["Answer", rec.text ?? "", "text"]);
  else facts.push(["Error", rec.error, "error"]);
  const dl = el("dl");
  for (const [k, v, key] of facts) dl.append(el("dt", {}, k), el("dd", { "data-key": key }, v));
  const headline = ok
    ? `OK via ${rec.target_used.toUpperCase()} in ${ms(rec.elapsed_ms / 1000)}`
    : `Unavailable after ${ms(rec.elapsed_ms / 1000)}`;
  box.replaceChildren(el("p", { class: "headline" }, headline), dl);
}

function showFieldError(boxId, inputId, message) {
  const box = $(boxId);
  box.textContent = message;
  box.hidden = false;
  if (inputId) $(inputId).setAttribute("aria-invalid", "true");
}

function clearFieldError(boxId, inputIds) {
  $(boxId).hidden = true;
  $(boxId).textContent = "";
  for (const id of inputIds) $(id).removeAttribute("aria-invalid");
}

let seq = 0;
async function run() {
  const mine = ++seq;
  document.body.dataset.seq = String(mine); // the latest run started; tests wait for its render
  const body = settings();
  let res;
  try {
    res = await fetch("api/run", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
    });
  } catch (err) {
    $("summary").replaceChildren(el("p", { class: "error" }, `Could not reach the lab server: ${err}`));
    return;
  }
  const data = await res.json();
  if (mine !== seq) return; // a newer run started; keep only the latest
  if (!res.ok) {
    $("summary").className = "fail";
    $("summary").replaceChildren(el("p", { class: "error" }, data.error));
    if (String(data.field).startsWith("custom")) showFieldError("custom-error", "custom", data.error);
    document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
    return;
  }
  clearFieldError("custom-error", ["custom"]);
  renderExcluded(data);
  renderPath(data);
  renderTimeline(data);
  renderSummary(data);
  document.body.dataset.runs = String(mine); // lets tests wait for a finished render
}

// -- load mode ---------------------------------------------------------------------------------

const LOAD_FIELDS = {
  clients: "clients", rate: "rate", duration: "duration", budget: "load-budget",
  a_extra_retries: "load-retries", seed: "seed", schedule: "schedule",
  deployments: "deployments", balance: "balance", rpm: "load-rpm",
};
const PROVIDER_COLORS = { a: "var(--a)", a2: "#54aeff", a3: "#8250df", b: "var(--b)", c: "var(--c)" };
const BREAKER_COLORS = { closed: "#dafbe1", half_open: "#d4a72c", open: "#b42318" };

function loadSettings() {
  const num = (id) => Number($(id).value);
  return {
    clients: num("clients"), rate: num("rate"), duration: num("duration"), budget: num("load-budget"),
    a_extra_retries: num("load-retries"), seed: num("seed"), schedule: $("schedule").value,
    deployments: num("deployments"), balance: $("balance").value, rpm: num("load-rpm"),
  };
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// A line chart as inline SVG: axes with labels, ticks, fault windows shaded, one polyline per
// run of non-null values. The legend and the text alternative are HTML next to it.
function lineChart({ key, title, yLabel, t, lines, yMax, faults, fmt }) {
  const W = 900, H = 230, L = 96, R = 14, T = 12, B = 42; // L: the breaker strip's labels, so every time axis lines up
  const n = t.length;
  const max = yMax ?? niceMax(Math.max(1, ...lines.flatMap((s) => s.values.filter((v) => v !== null))));
  const x = (s) => L + ((W - L - R) * s) / Math.max(1, n);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const titleId = `chart-${key}-title`, descId = `chart-${key}-desc`;
  const root = svg("svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${titleId} ${descId}`, "data-chart": key });
  root.append(svg("title", { id: titleId }, title));
  const desc = lines.map((s) => {
    const vals = s.values.filter((v) => v !== null);
    const peak = vals.length ? Math.max(...vals) : 0;
    return `${s.label}: peak ${fmt ? fmt(peak) : peak}`;
  }).join("; ");
  root.append(svg("desc", { id: descId }, `${desc}. The data table below has every second.`));
  const order = ["a", "a2", "a3", "b", "c"];
  for (const f of faults) {
    root.append(svg("rect", { class: "fault", x: x(f.from), y: T, width: Math.max(1, x(f.to) - x(f.from)), height: H - T - B }));
  }
  for (const f of faults) {
    const kind = f.reply.split("(")[0];
    root.append(svg("text", { class: "fault-label", x: x(f.from) + 3, y: T + 11 + 12 * order.indexOf(f.name) },
      `${f.name.toUpperCase()}: ${kind}`));
  }
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    root.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    root.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmt ? fmt(v) : String(+v.toFixed(2))));
  }
  const step = niceMax(n / 8);
  for (let s = 0; s <= n; s += step) {
    root.append(svg("line", { class: "axis", x1: x(s), x2: x(s), y1: H - B, y2: H - B + 4 }));
    root.append(svg("text", { x: x(s), y: H - B + 16, "text-anchor": "middle" }, `${s}`));
  }
  root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  root.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "virtual time (seconds since the load started)"));
  root.append(svg("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})` }, yLabel));
  for (const s of lines) {
    let run = [];
    const flush = () => {
      if (run.length) root.append(svg("polyline", {
        points: run.join(" "), stroke: s.color, "stroke-dasharray": s.dash || "none", "data-series": s.key,
      }));
      run = [];
    };
    s.values.forEach((v, i) => { if (v === null) flush(); else run.push(`${x(i + 0.5).toFixed(1)},${y(v).toFixed(1)}`); });
    flush();
  }
  return chartFigure(key, title, root, lines.map((s) => [s.label, s.color, s.dash]), faults.length ? "fault window" : null);
}

function chartFigure(key, title, root, legend, faultLabel) {
  const items = legend.map(([label, color, dash]) => el("li", {},
    el("span", { class: "swatch", style: `background:${color};${dash ? "opacity:0.6" : ""}` }), label));
  if (faultLabel) items.push(el("li", {}, el("span", { class: "swatch", style: "background:#ffebe9;border:1px solid #d0d7de" }), faultLabel));
  return el("figure", { class: "chart", "data-chart": key },
    el("figcaption", {}, title), root, el("ul", { class: "legend", "aria-hidden": "true" }, ...items));
}

// Each provider has two breakers, and it is called only while both let it: its target breaker
// (the provider failing) and its key + model breaker (a 429 or an exhausted quota on that key and
// model). One strip each, so a target whose key + model breaker is open never reads "closed".
const BREAKER_LAYERS = [["target", "breaker", "target"], ["key_model", "key_breaker", "key+model"]];

function breakerChart(series) {
  const W = 900, L = 96, R = 14, T = 8, rowH = 20, gap = 6, B = 36;
  const names = Object.keys(series.breaker);
  const rows = names.flatMap((name) => BREAKER_LAYERS.map(([layer, key, label]) => ({ name, layer, label, states: series[key][name] })));
  const H = T + rowH * rows.length + gap * (names.length - 1) + B;
  const n = series.t.length;
  const x = (s) => L + ((W - L - R) * s) / Math.max(1, n);
  const spans = [];
  const root = svg("svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "chart-breaker-title chart-breaker-desc", "data-chart": "breaker" });
  root.append(svg("title", { id: "chart-breaker-title" }, "Breaker state per second: each target's breaker and its key + model breaker"));
  rows.forEach(({ name, layer, label, states }, row) => {
    const yTop = T + row * rowH + gap * Math.floor(row / BREAKER_LAYERS.length);
    root.append(svg("text", { x: L - 6, y: yTop + rowH / 2 + 4, "text-anchor": "end" }, `${name.toUpperCase()} ${label}`));
    states.forEach((st, i) => root.append(svg("rect", {
      x: x(i), y: yTop + 2, width: Math.max(0.5, x(i + 1) - x(i)), height: rowH - 4, fill: BREAKER_COLORS[st],
      "data-series": name, "data-layer": layer, "data-state": st,
    })));
    let from = null;
    states.forEach((st, i) => {
      if (st !== "closed" && from === null) from = i;
      if ((st === "closed" || i === states.length - 1) && from !== null) {
        spans.push(`${name.toUpperCase()} ${label} breaker not closed ${from}–${st === "closed" ? i : i + 1} s`);
        from = null;
      }
    });
  });
  const step = niceMax(n / 8);
  for (let s = 0; s <= n; s += step) root.append(svg("text", { x: x(s), y: H - B + 14, "text-anchor": "middle" }, `${s}`));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "virtual time (seconds since the load started)"));
  root.append(svg("desc", { id: "chart-breaker-desc" }, spans.length ? `${spans.join("; ")}.` : "Every breaker stayed closed."));
  return chartFigure("breaker", "Breakers of each target: its target breaker and its key + model breaker (a target gets calls only while both let it)", root,
    [["closed", BREAKER_COLORS.closed], ["half-open", BREAKER_COLORS.half_open], ["open", BREAKER_COLORS.open]], null);
}

function renderLoad(data) {
  const s = data.series, sum = data.summary;
  const names = Object.keys(s.sent); // A's deployments, then B and C
  const upper = (n) => n.toUpperCase();
  const faults = Object.entries(data.schedule).flatMap(([name, fs]) => fs.map((f) => ({ ...f, name })));
  const pc = (v) => (v === null || v === undefined ? "–" : `${(100 * v).toFixed(1)}%`);
  const facts = [
    ["Requests sent by the clients", sum.requests, "requests"],
    ["Served within the deadline", `${sum.served_in_deadline} (${pc(sum.success_share)})`, "served"],
    [`Requests reaching ${names.map(upper).join(" / ")}`, names.map((n) => sum.provider_requests[n]).join(" / "), "provider_requests"],
    [`Times each target breaker opened (${names.map(upper).join(" / ")})`, names.map((n) => sum.breaker_opened[n]).join(" / "), "breaker_opened"],
    [`Times each key + model breaker opened (${names.map(upper).join(" / ")})`, names.map((n) => sum.key_breaker_opened[n]).join(" / "), "key_breaker_opened"],
    ["Retries granted / refused by the budget", `${sum.retries_granted} / ${sum.retries_refused}`, "retries"],
    ["Requests that waited in a rate limiter's queue", sum.limiter_waits, "limiter_waits"],
    ["Input tokens served from the providers' prompt cache", pc(sum.cache_hit), "cache_hit"],
    ["Virtual time / CPU time to simulate it", `${sum.virtual_seconds} s / ${sum.cpu_seconds} s`, "time"],
  ];
  const dl = $("load-summary");
  dl.replaceChildren();
  for (const [k, v, key] of facts) dl.append(el("dt", {}, k), el("dd", { "data-key": key }, String(v)));
  const charts = $("load-charts");
  charts.replaceChildren(
    lineChart({
      key: "rate", title: "Requests reaching each provider, per second", yLabel: "requests / s", t: s.t, faults,
      lines: [
        ...names.map((n) => ({ key: n, label: `reaching ${upper(n)}`, values: s.sent[n], color: PROVIDER_COLORS[n] })),
        { key: "offered", label: "sent by the clients", values: s.offered, color: "#1f2328", dash: "3 3" },
      ],
    }),
    lineChart({
      key: "success", title: "Requests served within their deadline (by arrival second)", yLabel: "share served", t: s.t, faults,
      yMax: 1, fmt: (v) => `${Math.round(100 * v)}%`,
      lines: [{ key: "ok_share", label: "share served in deadline", values: s.ok_share, color: "var(--ok)" }],
    }),
    breakerChart(s),
    lineChart({
      key: "balance", title: "Requests that waited in a rate limiter's queue, per second (by arrival)",
      yLabel: "requests", t: s.t, faults,
      lines: [
        { key: "limiter_waits", label: "waited in a limiter's queue", values: s.limiter_waits, color: "#b42318" },
      ],
    }),
    lineChart({
      key: "cache", title: "Prompt cache: cached input tokens / input tokens, per second", yLabel: "cached share",
      t: s.t, faults, yMax: 1, fmt: (v) => `${Math.round(100 * v)}%`,
      lines: [{ key: "cache_hit", label: "cached share of input tokens", values: s.cache_hit, color: "var(--ok)" }],
    }),
    lineChart({
      key: "budget", title: "Retry budget: retries granted and refused per second, headroom at each second's end",
      yLabel: "retries", t: s.t, faults,
      lines: [
        { key: "retries_granted", label: "retries granted", values: s.retries_granted, color: "#0969da" },
        { key: "retries_refused", label: "retries refused (budget spent)", values: s.retries_refused, color: "#b42318" },
        { key: "retry_headroom", label: "A's headroom (retries still allowed on A's upstream)", values: s.retry_headroom, color: "#59636e", dash: "4 3" },
      ],
    }),
  );
  const head = ["second", "sent by clients", ...names.map((n) => `reaching ${upper(n)}`), "served in deadline", "share",
    ...names.map((n) => `breaker ${upper(n)}`), ...names.map((n) => `key+model breaker ${upper(n)}`),
    "retries granted", "retries refused", "budget headroom", "waited in a limiter's queue", "cached share of input"];
  const table = $("load-table");
  table.replaceChildren(el("caption", {}, "Per second: the numbers behind the plots"),
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { scope: "col" }, h)))));
  const body = el("tbody");
  s.t.forEach((sec, i) => body.append(el("tr", {},
    el("th", { scope: "row" }, String(sec)), el("td", {}, String(s.offered[i])),
    ...names.map((n) => el("td", {}, String(s.sent[n][i]))),
    el("td", {}, String(s.ok[i])), el("td", {}, pc(s.ok_share[i])),
    ...names.map((n) => el("td", {}, s.breaker[n][i])),
    ...names.map((n) => el("td", {}, s.key_breaker[n][i])),
    el("td", {}, String(s.retries_granted[i])), el("td", {}, String(s.retries_refused[i])), el("td", {}, String(s.retry_headroom[i])),
    el("td", {}, String(s.limiter_waits[i])), el("td", {}, pc(s.cache_hit[i])))));
  table.append(body);
  $("load-results").hidden = false;
}

let loads = 0;
async function runLoad() {
  const button = $("load-run");
  clearFieldError("load-error", Object.values(LOAD_FIELDS));
  button.disabled = true;
  $("load-status").textContent = "Running the load on virtual time…";
  try {
    const res = await fetch("api/load", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(loadSettings()),
    });
    const data = await res.json();
    if (!res.ok) {
      const field = String(data.field).split(/[.[]/)[0];
      const input = LOAD_FIELDS[field];
      showFieldError("load-error", input, data.error);
      $("load-status").textContent = "Not run: fix the field named above.";
      if (input) $(input).focus();
      document.body.dataset.loadErrors = String(Number(document.body.dataset.loadErrors || 0) + 1);
      return;
    }
    renderLoad(data);
    const sum = data.summary;
    $("load-status").textContent =
      `Done: ${sum.requests} requests over ${sum.virtual_seconds} virtual seconds, ${pc0(sum.success_share)} served in deadline.`;
    document.body.dataset.loads = String(++loads);
  } catch (err) {
    showFieldError("load-error", null, `Could not reach the lab server: ${err}`);
  } finally {
    button.disabled = false;
  }
}

function pc0(v) { return v === null ? "–" : `${(100 * v).toFixed(1)}%`; }

// -- the live view: this gateway's own requests ----------------------------------------------
// The server sends metadata only (public records: no prompt, answer or key). The admin key is
// kept in this page's memory and sent as a bearer token; the stream is read with fetch (an
// EventSource cannot send it). The list holds at most the server's "keep" records.

const live = { key: null, keep: 0, records: [], abort: null, retry: null, events: 0, selected: null, query: "" };
const OUTCOME_LABELS = { "": "any", ok: "ok", failed: "failed (anything but ok)", degraded: "degraded" };

function liveStatus(text) { $("live-status").textContent = text; }

function errorText(data, res) {
  if (data && typeof data.error === "string") return data.error;
  if (data && data.error && data.error.message) return data.error.message;
  return `HTTP ${res.status}`;
}

function liveQuery() {
  const q = new URLSearchParams();
  for (const f of ["route", "outcome", "workflow"]) {
    const v = $(`live-${f}`).value;
    if (v) q.set(f, v);
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

function fillSelect(select, values, labels = {}) {
  const keep = select.value;
  select.replaceChildren(el("option", { value: "" }, "any"),
    ...values.map((v) => el("option", { value: v }, labels[v] ?? v)));
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

async function liveAuthorize(ev) {
  ev.preventDefault();
  clearFieldError("live-error", ["live-key"]);
  const key = $("live-key").value.trim();
  if (!key) {
    showFieldError("live-error", "live-key", "Type the gateway's admin key (gateway.admin) to see its requests.");
    $("live-key").focus();
    return;
  }
  let res, data;
  try {
    res = await fetch("api/live/meta", { headers: { authorization: `Bearer ${key}` }, cache: "no-store" });
    data = await res.json().catch(() => null);
  } catch (err) {
    showFieldError("live-error", "live-key", `Could not reach the gateway: ${err}`);
    return;
  }
  if (!res.ok) {
    showFieldError("live-error", "live-key", `${res.status}: ${errorText(data, res)}`);
    $("live-key").focus();
    document.body.dataset.liveRefused = String(Number(document.body.dataset.liveRefused || 0) + 1);
    return;
  }
  live.key = key;
  fillSelect($("live-route"), data.routes);
  fillSelect($("live-outcome"), data.outcomes, OUTCOME_LABELS);
  fillSelect($("live-workflow"), data.workflows);
  $("live-body").hidden = false;
  liveConnect();
}

async function liveConnect() {
  if (live.abort) live.abort.abort();
  clearTimeout(live.retry);
  const ctrl = new AbortController();
  live.abort = ctrl;
  liveStatus("Connecting…");
  const query = liveQuery();
  let res;
  try {
    res = await fetch(`api/live/stream${query}`, {
      headers: { authorization: `Bearer ${live.key}` }, signal: ctrl.signal, cache: "no-store",
    });
  } catch (err) {
    if (!ctrl.signal.aborted) liveRetry(ctrl, `Could not reach the gateway (${err})`);
    return;
  }
  if (!res.ok) {
    const data = await res.json().catch(() => null);
    liveStatus("Not connected.");
    showFieldError("live-error", "live-key", `${res.status}: ${errorText(data, res)}`);
    if (res.status === 503) liveRetry(ctrl, "The gateway refused the stream for now");
    return;
  }
  liveStatus("Connected: requests appear here as they finish.");
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        if (ctrl.signal.aborted) return; // a newer stream (another filter) took over
        liveEvent(buf.slice(0, i), query);
        buf = buf.slice(i + 2);
      }
    }
  } catch (err) {
    if (ctrl.signal.aborted) return;
  }
  if (!ctrl.signal.aborted) liveRetry(ctrl, "The stream ended");
}

function liveRetry(ctrl, why) {
  if (live.abort !== ctrl) return;
  liveStatus(`${why}; reconnecting in 3 s…`);
  live.retry = setTimeout(liveConnect, 3000);
}

// One server-sent event: "snapshot" (the kept records, oldest first) or "record" (one more).
function liveEvent(block, query) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return;
  const payload = JSON.parse(data.join("\n"));
  if (event === "snapshot") {
    live.keep = payload.keep;
    live.records = payload.records.slice().reverse(); // newest first
    live.query = query;
  } else if (event === "record") {
    live.records.unshift(payload);
    if (live.records.length > live.keep) live.records.length = live.keep;
  }
  live.events++;
  scheduleLiveRender();
}

// A burst of requests is drawn once, at the next frame (and not at all while the tab is hidden).
let liveRenderPending = false;
function scheduleLiveRender() {
  if (liveRenderPending) return;
  liveRenderPending = true;
  requestAnimationFrame(() => {
    liveRenderPending = false;
    renderLiveList();
    document.body.dataset.liveQuery = live.query; // lets tests wait for the list of one filter
    document.body.dataset.liveEvents = String(live.events);
  });
}

const clock = (t) => new Date(t * 1000).toLocaleTimeString([], { hour12: false });

function outcomeClass(rec) {
  return rec.outcome === "ok" ? "ok" : rec.outcome === "degraded" ? "degraded" : "fail";
}

// A row's small timeline: each attempt and wait on the request's own time scale.
function miniTimeline(rec) {
  const rows = timelineRows(rec);
  const span = Math.max(rec.elapsed_ms / 1000, ...rows.map((r) => r.end), 1e-3);
  const track = el("div", { class: "mini", "aria-hidden": "true" });
  for (const r of rows) {
    track.append(el("span", {
      class: `mini-bar ${r.kind}`, style: `left:${(100 * r.start) / span}%;width:${(100 * (r.end - r.start)) / span}%`,
      title: `${r.target} ${r.phase} ${r.outcome}`,
    }));
  }
  return track;
}

const LIVE_ROWS = 500; // rows drawn at most: the newest; the filters reach the others

function renderLiveList() {
  const body = $("live-rows");
  body.replaceChildren();
  for (const rec of live.records.slice(0, LIVE_ROWS)) {
    const path = rec.attempts.map((a) => `${a.target} ${a.outcome}`).join(" → ") || "no attempt";
    const open = el("button", { type: "button", class: "link", "data-action": "show",
      "aria-label": `Show request ${rec.request_id} (${rec.route}, ${rec.outcome})` }, clock(rec.finished_at));
    open.addEventListener("click", () => showLive(rec.request_id));
    const replay = el("button", { type: "button", class: "small", "data-action": "replay",
      "aria-label": `Replay request ${rec.request_id} in the simulator` }, "Replay");
    replay.addEventListener("click", () => replayLive(rec.request_id));
    const tr = el("tr", {
      class: outcomeClass(rec), "data-request-id": rec.request_id, "data-route": rec.route,
      "data-outcome": rec.outcome, "data-workflow": rec.workflow,
      "aria-selected": String(live.selected === rec.request_id),
    },
      el("th", { scope: "row" }, open),
      el("td", {}, rec.route),
      el("td", { class: "outcome" }, rec.outcome),
      el("td", {}, rec.workflow),
      el("td", {}, rec.target_used ?? "none"),
      el("td", { class: "num" }, String(rec.status)),
      el("td", { class: "num" }, ms(rec.elapsed_ms / 1000)),
      el("td", { title: path }, miniTimeline(rec), el("span", { class: "sr-only" }, path)),
      el("td", {}, replay));
    // a click anywhere on the row shows it (the time is the button for the keyboard)
    tr.addEventListener("click", (ev) => { if (!ev.target.closest("button")) showLive(rec.request_id); });
    body.append(tr);
  }
  const shown = Math.min(live.records.length, LIVE_ROWS);
  $("live-count").textContent = shown < live.records.length
    ? `the newest ${shown} of ${live.records.length} shown (filter to see others; the gateway keeps the last ${live.keep})`
    : `${shown} shown (the gateway keeps the last ${live.keep})`;
}

function liveFacts(rec) {
  const usage = rec.attempts.reduce((u, a) => a.usage
    ? {
      input: u.input + a.usage.input_tokens,
      cached: u.cached + (a.usage.cached_input_tokens ?? 0),
      output: u.output + a.usage.output_tokens,
    } : u, { input: 0, cached: 0, output: 0 });
  const facts = [
    ["Request id", rec.request_id, "request_id"],
    ["Finished", new Date(rec.finished_at * 1000).toLocaleString(), "finished"],
    ["Route", rec.route, "route"],
    ["HTTP status", String(rec.status), "status"],
    ["Target used", rec.target_used ?? "none", "target"],
    ["Outcome", rec.outcome, "outcome"],
    ["Workflow", rec.workflow, "workflow"],
    ["Recovered", rec.recovered ? "yes" : "no", "recovered"],
    ["Elapsed", ms(rec.elapsed_ms / 1000), "elapsed"],
    ["Added latency", ms(rec.added_latency_ms / 1000), "added"],
    ["Cost", `$${rec.total_cost.toFixed(6)}`, "cost"],
    ["Tokens (input / output)", `${usage.input} / ${usage.output}`, "tokens"],
    ["Input tokens read from the prompt cache", String(usage.cached), "cached"],
    ["Streamed to the client", rec.stream ? "yes" : "no", "stream"],
  ];
  if (rec.recovery_reason) facts.push(["Why", rec.recovery_reason, "recovery"]);
  if (rec.tenant) facts.push(["Tenant", rec.tenant, "tenant"]);
  if (rec.degraded) facts.push(["Degraded", rec.degraded_reason ?? "yes", "degraded"]);
  const dl = el("dl", { class: "facts" });
  for (const [k, v, key] of facts) dl.append(el("dt", {}, k), el("dd", { "data-key": key }, v));
  return dl;
}

function showLive(requestId) {
  const rec = live.records.find((r) => r.request_id === requestId);
  if (!rec) return;
  live.selected = requestId;
  for (const tr of $("live-rows").children) tr.setAttribute("aria-selected", String(tr.dataset.requestId === requestId));
  $("live-detail-h").textContent = `Request ${rec.request_id} on route ${rec.route}`;
  $("live-summary").replaceChildren(liveFacts(rec));
  const same = (n) => n;
  renderPath(rec, $("live-path"), same);
  renderExcluded(rec, $("live-excluded"), same);
  renderTimeline(rec, $("live-timeline"), rec.elapsed_ms / 1000, same);
  $("live-replay-notes").replaceChildren();
  $("live-detail").hidden = false;
  $("live-detail").dataset.requestId = requestId;
  document.body.dataset.liveShown = requestId;
}

// Replay: the server writes the request's fault pattern as a custom scenario, which goes into
// the simulator's editor with its settings; the run is the simulator's usual one.
async function replayLive(requestId) {
  showLive(requestId);
  const notes = $("live-replay-notes");
  let res, data;
  try {
    res = await fetch(`api/live/${encodeURIComponent(requestId)}/scenario`, {
      headers: { authorization: `Bearer ${live.key}` }, cache: "no-store",
    });
    data = await res.json().catch(() => null);
  } catch (err) {
    notes.replaceChildren(el("p", { class: "error", role: "alert" }, `Could not reach the gateway: ${err}`));
    return;
  }
  if (!res.ok) {
    notes.replaceChildren(el("p", { class: "error", role: "alert" }, errorText(data, res)));
    return;
  }
  const st = data.settings;
  $("custom").value = data.custom;
  $("scenario").value = "custom";
  $("budget").value = String(st.budget);
  $("budget-range").value = String(Math.min(st.budget, 10));
  $("attempt_cap").value = String(st.attempt_cap);
  $("a_extra_retries").value = String(st.a_extra_retries);
  $("fallback_reserve").value = st.fallback_reserve === null ? "" : String(st.fallback_reserve);
  document.querySelector(`input[name=capability][value=${st.capability}]`).checked = true;
  const mapping = Object.entries(data.mapping).map(([lab, real]) => `${lab.toUpperCase()} = ${real}`).join(", ");
  notes.replaceChildren(el("p", {}, `Loaded into the simulator below as a custom scenario (${mapping}).`),
    ...data.notes.map((n) => el("p", { class: "help" }, `Note: ${n}`)));
  document.body.dataset.replayed = requestId;
  await run();
  $("controls").scrollIntoView({ block: "start" });
  $("custom").focus({ preventScroll: true });
}

function initLive() {
  $("live").hidden = false;
  $("live-auth").addEventListener("submit", liveAuthorize);
  for (const f of ["route", "outcome", "workflow"]) $(`live-${f}`).addEventListener("change", () => liveConnect());
  $("live-detail-replay").addEventListener("click", () => { if (live.selected) replayLive(live.selected); });
}

async function init() {
  const range = $("budget-range");
  const budget = $("budget");
  range.addEventListener("input", () => { budget.value = range.value; run(); });
  budget.addEventListener("input", () => { if (budget.value) range.value = budget.value; });
  $("controls").addEventListener("change", (ev) => {
    if (ev.target === range) return;
    if (ev.target.id === "custom" && $("scenario").value !== "custom") return;
    run();
  });
  $("controls").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  const runCustom = () => { $("scenario").value = "custom"; run(); };
  $("custom-run").addEventListener("click", runCustom);
  $("custom").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); runCustom(); }
  });
  $("load-controls").addEventListener("submit", (ev) => { ev.preventDefault(); runLoad(); });
  try {
    const meta = await (await fetch("api/meta")).json();
    $("custom").value = meta.custom;
    $("schedule").value = meta.schedule;
    if (meta.preloaded) $("scenario").value = "custom";
    if (meta.live) initLive();
    $("policies").textContent = describePolicies(meta.policies);
  } catch (err) {
    $("summary").replaceChildren(el("p", { class: "error" }, `Could not reach the lab server: ${err}`));
  }
  run();
}

// One line: where the simulator's backoff and retry budget come from, and their values.
function describePolicies(p) {
  if (!p) return "";
  const b = p.backoff;
  const backoff = `backoff full jitter, base ${b.base} s, cap ${b.cap} s, Retry-After up to ${b.max_retry_after} s`;
  const r = p.retry_budget;
  const budget = r
    ? `retry budget ${Math.round(r.ratio * 100)}% of first attempts + ${r.floor} per ${r.window} s`
    : "no retry budget";
  return `Policies (${p.source ? "from " + p.source : "the lab's own"}): ${backoff}; ${budget}.`;
}

document.addEventListener("DOMContentLoaded", init);
