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

function settings() {
  const form = $("controls");
  return {
    scenario: form.scenario.value,
    capability: form.querySelector("input[name=capability]:checked").value,
    budget: Number($("budget").value),
    attempt_cap: Number($("attempt_cap").value),
    a_extra_retries: Number($("a_extra_retries").value),
  };
}

// A timed-out attempt was cancelled at its cap (the per-attempt cap or what was left of the budget).
function cancelledAtCap(a) {
  return a.outcome.startsWith("timeout") || a.outcome === "cancelled";
}

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
    });
  }
  for (const w of rec.waits) {
    rows.push({
      start: w.start, end: w.end, target: w.target, phase: "wait", outcome: w.reason, short: w.reason, kind: "wait",
    });
  }
  return rows.sort((x, y) => x.start - y.start);
}

function renderTimeline(rec) {
  const box = $("timeline");
  box.replaceChildren();
  const rows = timelineRows(rec);
  const span = Math.max(rec.options.budget, ...rows.map((r) => r.end));
  const pct = (t) => `${(100 * t) / span}%`;
  for (const r of rows) {
    const text = `${r.target.toUpperCase()} ${r.phase} ${r.outcome} ${ms(r.end - r.start)}`;
    const label = `${r.target.toUpperCase()} ${r.phase} · ${r.short}`;
    const barText = r.kind === "cap" ? `${ms(r.end - r.start)} · cancelled at cap` : ms(r.end - r.start);
    const bar = el("div", {
      class: `bar ${r.kind}`,
      style: `left:${pct(r.start)};width:${pct(r.end - r.start)}`,
      title: `${text} (${ms(r.start)}–${ms(r.end)})`,
    }, barText);
    const row = el("div", {
      class: "row", role: "row",
      "data-target": r.target, "data-phase": r.phase, "data-outcome": r.outcome,
      "data-start": String(r.start), "data-end": String(r.end),
    },
      el("div", { class: "label", role: "rowheader", "aria-label": text, title: text }, label),
      el("div", { class: "track", role: "cell", "aria-label": `from ${ms(r.start)} to ${ms(r.end)}` }, bar));
    box.append(row);
  }
  const ticks = el("div", { class: "ticks" });
  for (let i = 0; i <= 4; i++) ticks.append(el("span", {}, ms((span * i) / 4)));
  box.append(el("div", { class: "axis", "aria-hidden": "true" }, el("span", {}, "time since request start"), ticks));
}

function renderPath(rec) {
  const path = $("path");
  path.replaceChildren();
  for (const a of rec.attempts) {
    path.append(el("li", { class: a.outcome === "ok" ? "ok" : "fail" },
      `${a.target.toUpperCase()} (${a.phase}): ${a.outcome}`));
  }
  if (!rec.attempts.length) path.append(el("li", {}, "no attempt was made"));
}

function renderExcluded(rec) {
  const list = $("excluded");
  list.replaceChildren();
  for (const e of rec.excluded) {
    list.append(el("li", { "data-target": e.target }, el("strong", {}, e.target.toUpperCase()), ` (${e.phase}): ${e.reason}`));
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

let seq = 0;
async function run() {
  const mine = ++seq;
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
    return;
  }
  renderExcluded(data);
  renderPath(data);
  renderTimeline(data);
  renderSummary(data);
  document.body.dataset.runs = String(mine); // lets tests wait for a finished render
}

function init() {
  const range = $("budget-range");
  const budget = $("budget");
  range.addEventListener("input", () => { budget.value = range.value; run(); });
  budget.addEventListener("input", () => { if (budget.value) range.value = budget.value; });
  $("controls").addEventListener("change", (ev) => { if (ev.target !== range) run(); });
  $("controls").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  run();
}

document.addEventListener("DOMContentLoaded", init);
