"""The lab page: its API (the real router's RouteRecord) and the page in the system Chromium."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import uvicorn

from failover.lab import CAPABILITIES, SCENARIOS, SeedOptions, SeedResult, run_virtual
from failover.lab._custom import EXAMPLE, parse_custom_text
from failover.lab._load import DEFAULT_SCHEDULE, LoadResult, parse_load, run_load
from failover.lab._web import STATIC, lab_app, result_body
from tests.lab._browser import ROOT, lab_page, publish


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=lab_app()), base_url="http://lab")


async def test_page_and_assets_are_served() -> None:
    async with _client() as c:
        page = await c.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'src="static/lab.js"' in page.text and "aria-live" in page.text
        for asset in ("lab.js", "lab.css"):
            r = await c.get(f"/static/{asset}")
            assert r.status_code == 200 and r.text == (STATIC / asset).read_text()


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("capability", CAPABILITIES)
async def test_run_returns_the_routers_record(scenario: str, capability: str) -> None:
    body = {"scenario": scenario, "capability": capability, "budget": 2.5, "a_extra_retries": 2, "attempt_cap": 0.9}
    async with _client() as c:
        r = await c.post("/api/run", json=body)
    assert r.status_code == 200
    got = r.json()
    want = await asyncio.to_thread(run_virtual, SeedOptions(**body))  # it runs its own loop
    assert got == result_body(want)
    assert got["attempts"] == want.record.to_dict()["attempts"]
    assert got["waits"] == want.record.to_dict()["waits"]
    assert got["calls"] == dict(want.calls)
    assert (got["target_used"] is None) == (got["error"] is not None)


async def test_raising_as_retries_spends_the_time_b_needed_when_nothing_is_kept_for_it() -> None:
    base = {"scenario": "timeout", "capability": "chat", "budget": 2.5, "attempt_cap": 0.9, "fallback_reserve": 0}
    async with _client() as c:
        one = (await c.post("/api/run", json={**base, "a_extra_retries": 1})).json()
        two = (await c.post("/api/run", json={**base, "a_extra_retries": 2})).json()
        auto = (await c.post("/api/run", json={**base, "a_extra_retries": 2, "fallback_reserve": None})).json()
    assert one["target_used"] == "b" and one["calls"]["b"] == 1
    assert two["target_used"] is None and two["calls"]["b"] == 0 and "deadline" in two["error"]
    assert two["options"]["fallback_reserve"] == 0.0
    # the automatic reserve: after A's timeout, B at once, however many retries A may have
    assert auto["target_used"] == "b" and auto["calls"] == {"a": 1, "b": 1, "c": 0}
    assert auto["options"]["fallback_reserve"] is None


async def test_scenarios_differ_as_described() -> None:
    async with _client() as c:
        vision = (await c.post("/api/run", json={"scenario": "timeout", "capability": "vision"})).json()
        failing = (await c.post("/api/run", json={"scenario": "all_failing"})).json()
    assert [(e["target"], e["temporary"]) for e in vision["excluded"]] == [("b", False), ("a", False)]
    assert "vision" in vision["excluded"][0]["reason"]
    assert vision["excluded"][1]["reason"] == "no replay after timeout:total: c is tried at once"
    assert vision["target_used"] == "c" and vision["recovered"] is True
    assert failing["target_used"] is None and failing["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scenario": "sunny"}, "scenario"),
        ({"capability": "audio"}, "capability"),
        ({"budget": 0}, "budget"),
        ({"budget": "3"}, "budget"),
        ({"budget": 1e9}, "budget"),
        ({"attempt_cap": -1}, "attempt_cap"),
        ({"a_extra_retries": -1}, "a_extra_retries"),
        ({"a_extra_retries": 1.5}, "a_extra_retries"),
        ({"a_extra_retries": True}, "a_extra_retries"),
        ({"colour": "red"}, "colour"),
        ({"fallback_reserve": -1}, "fallback_reserve"),
        ({"fallback_reserve": "auto"}, "fallback_reserve"),
        ({"budget": 2, "fallback_reserve": 3}, "fallback_reserve"),
        ([1, 2], "body"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(body: Any, field: str) -> None:
    async with _client() as c:
        r = await c.post("/api/run", json=body)
    assert r.status_code == 400
    assert r.json()["field"] == field and r.json()["error"].startswith(f"{field}:")


async def test_invalid_json_is_a_400() -> None:
    async with _client() as c:
        r = await c.post("/api/run", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "body"


# --- the page in a real browser -------------------------------------------------------


@pytest.fixture(scope="module")
def lab_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(lab_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the lab server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(5)


def _rendered(page: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
    rows = page.eval_on_selector_all(
        "#timeline .row",
        "rows => rows.map(r => ({target: r.dataset.target, phase: r.dataset.phase, outcome: r.dataset.outcome,"
        " start: Number(r.dataset.start), end: Number(r.dataset.end)}))",
    )
    summary = page.eval_on_selector_all(
        "#summary dd", "dds => Object.fromEntries(dds.map(d => [d.dataset.key, d.textContent]))"
    )
    return rows, summary


def _virtual(opts: SeedOptions) -> SeedResult:
    """run_virtual off this thread: Playwright's sync API keeps a loop running on it."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run_virtual, opts).result()


def _expected_rows(opts: SeedOptions) -> list[dict[str, Any]]:
    rec = _virtual(opts).record.to_dict()
    rows = []
    for a in rec["attempts"]:
        outcome = a["outcome"] + (f" HTTP {a['status']}" if a["status"] else "")
        if a["outcome"].startswith("timeout") or a["outcome"] == "cancelled":
            outcome += " (cancelled at cap)"
        rows.append(
            {"target": a["target"], "phase": a["phase"], "outcome": outcome, "start": a["start"], "end": a["end"]}
        )
    rows += [
        {"target": w["target"], "phase": "wait", "outcome": w["reason"], "start": w["start"], "end": w["end"]}
        for w in rec["waits"]
    ]
    return sorted(rows, key=lambda r: r["start"])


def _check_page(page: Any, opts: SeedOptions) -> None:
    result = _virtual(opts)
    rec = result.record
    rows, summary = _rendered(page)
    assert rows == _expected_rows(opts)
    assert summary["target"] == (rec.target_used or "none")
    assert summary["workflow"] == rec.workflow.value
    assert summary["recovered"] == ("yes" if rec.recovered else "no")
    assert summary["elapsed"] == f"{round(rec.elapsed_ms)}ms"
    assert summary["added"] == f"{round(rec.added_latency_ms)}ms"
    assert summary["cost"] == f"${rec.total_cost:.6f}"
    if result.error is None:
        assert summary["text"] == result.text
    else:
        assert summary["error"] == result.error
    excluded = page.eval_on_selector_all("#excluded li[data-target]", "lis => lis.map(li => li.dataset.target)")
    assert excluded == [e.target for e in rec.excluded]


def _wait_render(page: Any, runs: int) -> int:
    # The latest run started must be the one drawn: a blur re-runs the editor's scenario, and an
    # older run's render would otherwise pass for the newer one.
    page.wait_for_function(
        f"Number(document.body.dataset.runs || 0) >= {runs} && document.body.dataset.runs === document.body.dataset.seq"
    )
    page.wait_for_load_state("networkidle")
    return int(page.evaluate("Number(document.body.dataset.runs)"))


@pytest.mark.e2e
def test_page_in_system_chromium(lab_url: str) -> None:
    with lab_page(lab_url) as page:
        runs = _wait_render(page, 1)
        _check_page(page, SeedOptions())
        # where the simulator's policies come from: here the lab's own (`failover lab --config` names a file)
        assert page.inner_text("#policies").startswith("Policies (the lab's own): backoff full jitter, base 0.2 s")

        # Keyboard only: tab to the scenario select and pick "A times out".
        page.focus("#scenario")
        page.select_option("#scenario", "timeout")
        runs = _wait_render(page, runs + 1)
        _check_page(page, SeedOptions(scenario="timeout"))

        page.get_by_label("Vision").check()
        runs = _wait_render(page, runs + 1)
        _check_page(page, SeedOptions(scenario="timeout", capability="vision"))
        assert "missing capability: vision" in page.inner_text("#excluded")

        page.fill("#a_extra_retries", "2")
        page.dispatch_event("#a_extra_retries", "change")
        runs = _wait_render(page, runs + 1)
        _check_page(page, SeedOptions(scenario="timeout", capability="vision", a_extra_retries=2))

        page.fill("#budget", "2.5")
        page.dispatch_event("#budget", "change")
        runs = _wait_render(page, runs + 1)
        opts = SeedOptions(scenario="timeout", capability="vision", a_extra_retries=2, budget=2.5)
        _check_page(page, opts)
        assert page.get_attribute("#summary", "aria-live") == "polite"
        assert "c is tried at once" in page.inner_text("#excluded")  # automatic: C after A's timeout

        # Nothing kept for the next tier: A's retries spend the time C needed
        page.select_option("#fallback_reserve", "0")
        runs = _wait_render(page, runs + 1)
        opts = SeedOptions(scenario="timeout", capability="vision", a_extra_retries=2, budget=2.5, fallback_reserve=0.0)
        _check_page(page, opts)
        assert _virtual(opts).record.target_used is None

        out = ROOT / "test-artifacts" / "lab.png"
        out.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(out), full_page=True)
        publish(out)


# --- custom scenarios, connect / first-token segments, load mode --------------------------------

CUSTOM_TEXT = """stream: true
providers:
  a:
    connect: 0.1
    replies: ["overloaded(latency=0.05)", "stall_before_first(5)"]
  b: {connect: 0.08, default: "ok('Your invoice is fixed; a refund is on its way.', latency=0.3, chunk_interval=0.05)"}
"""


async def test_custom_scenario_over_the_api_is_the_routers_record() -> None:
    body = {"scenario": "custom", "custom": CUSTOM_TEXT, "budget": 3.0, "a_extra_retries": 1, "attempt_cap": 1.0}
    async with _client() as c:
        r = await c.post("/api/run", json=body)
    assert r.status_code == 200
    opts = SeedOptions(scenario="custom", custom=parse_custom_text(CUSTOM_TEXT), budget=3.0)
    want = await asyncio.to_thread(run_virtual, opts)
    assert r.json() == result_body(want)
    assert r.json()["options"]["stream"] is True
    b = next(a for a in want.record.attempts if a.target == "b")  # streams, but is cut at its cap
    assert b.outcome == "timeout:total" and b.connected is not None and b.first_event is not None
    assert b.connected - b.start == pytest.approx(0.08) and b.first_event - b.connected == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("custom", "field"),
    [
        ("providers: {a: [ok, rate_limt]}", "custom.providers.a[1]"),
        ("providers: {a: 'ok(", "custom"),
        ("", "custom"),
        (None, "custom"),
        (12, "custom"),
        ("providers: {z: ok}", "custom.providers.z"),
    ],
)
async def test_bad_custom_scenarios_are_400s_naming_the_field(custom: Any, field: str) -> None:
    async with _client() as c:
        r = await c.post("/api/run", json={"scenario": "custom", "custom": custom})
    assert r.status_code == 400
    assert r.json()["field"] == field and r.json()["error"].startswith(f"{field}: ")


def _expected_segments(a: dict[str, Any]) -> list[dict[str, Any]]:
    """An attempt's segments, from the record alone (what the page must draw)."""
    start, end, connected, first = a["start"], a["end"], a["connected"], a["first_event"]
    if connected is None:
        segs = [("connect", start, end)]
    elif first is None:
        segs = [("connect", start, connected), ("first", connected, end)]
    else:
        segs = [("connect", start, connected), ("first", connected, first), ("body", first, end)]
    capped = a["outcome"].startswith("timeout") or a["outcome"] == "cancelled"
    return [{"kind": k, "start": s, "end": e, "cap": capped and i == len(segs) - 1} for i, (k, s, e) in enumerate(segs)]


def _check_segments(page: Any, opts: SeedOptions) -> int:
    """The bars' segments equal the record's times, and their drawn widths match them (1.5 px)."""
    rec = _virtual(opts).record.to_dict()
    drawn = page.eval_on_selector_all(
        "#timeline .row",
        """rows => rows.filter(r => r.dataset.phase !== 'wait').map(r => {
            const track = r.querySelector('.track').getBoundingClientRect().width;
            return [...r.querySelectorAll('.seg')].map(s => ({kind: s.dataset.kind, cap: s.dataset.cap === 'true',
              start: Number(s.dataset.start), end: Number(s.dataset.end),
              px: s.getBoundingClientRect().width, track}));
        })""",
    )
    attempts = sorted(rec["attempts"], key=lambda a: a["start"])
    assert len(drawn) == len(attempts)
    span = max(opts.budget, *(a["end"] for a in attempts), *(w["end"] for w in rec["waits"]))
    checked = 0
    for segs, a in zip(drawn, attempts, strict=True):
        want = _expected_segments(a)
        assert [{k: s[k] for k in ("kind", "start", "end", "cap")} for s in segs] == want
        for s in segs:
            assert s["px"] == pytest.approx((s["end"] - s["start"]) / span * s["track"], abs=1.5)
            checked += s["end"] > s["start"]
    return checked


def _type(page: Any, selector: str, text: str) -> None:
    """Replace a field's text from the keyboard only."""
    page.focus(selector)
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.type(text)


def _wait_errors(page: Any, key: str, n: int) -> None:
    page.wait_for_function(f"Number(document.body.dataset.{key} || 0) >= {n}")


@pytest.mark.e2e
def test_custom_scenarios_and_segments_in_system_chromium(lab_url: str) -> None:
    with lab_page(lab_url) as page:
        runs = _wait_render(page, 1)
        assert page.input_value("#custom") == EXAMPLE  # the editor starts with the example

        # A bad scenario, keyboard only: type it, Tab to the Run button, Enter.
        _type(page, "#custom", "providers: {a: [ok, rate_limt]}")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.id") == "custom-run"
        page.keyboard.press("Enter")
        _wait_errors(page, "errors", 1)
        error = page.locator("#custom-error")
        assert error.is_visible() and error.get_attribute("role") == "alert"
        assert error.inner_text().startswith("custom.providers.a[1]: 'rate_limt': unknown reply kind")
        assert page.get_attribute("#custom", "aria-invalid") == "true"
        assert "custom-error" in (page.get_attribute("#custom", "aria-describedby") or "")

        # A good one, run with Ctrl+Enter from inside the editor.
        _type(page, "#custom", CUSTOM_TEXT)
        page.keyboard.press("Control+Enter")
        runs = _wait_render(page, runs + 1)
        opts = SeedOptions(scenario="custom", custom=parse_custom_text(CUSTOM_TEXT))
        _check_page(page, opts)
        assert _check_segments(page, opts) >= 5  # connect, first token and body, drawn to scale
        assert not page.locator("#custom-error").is_visible()
        assert page.get_attribute("#custom", "aria-invalid") is None
        assert page.input_value("#scenario") == "custom"
        page.evaluate("document.activeElement.blur()")
        out = ROOT / "test-artifacts" / "lab-custom.png"
        out.parent.mkdir(exist_ok=True)
        load_top = page.eval_on_selector("#load", "e => e.getBoundingClientRect().top + window.scrollY")
        page.screenshot(path=str(out), full_page=True, clip={"x": 0, "y": 0, "width": 1100, "height": load_top})
        publish(out)

        # The example, with A's retries raised from the keyboard: segments still match.
        _type(page, "#custom", EXAMPLE)
        page.keyboard.press("Control+Enter")
        runs = _wait_render(page, runs + 1)
        _check_page(page, SeedOptions(scenario="custom", custom=parse_custom_text(EXAMPLE)))
        _type(page, "#a_extra_retries", "2")  # focus leaves the editor: its change event runs again
        runs = _wait_render(page, runs + 1)
        page.keyboard.press("Tab")  # leaving the field fires change: a run
        runs = _wait_render(page, runs + 1)
        opts = SeedOptions(scenario="custom", custom=parse_custom_text(EXAMPLE), a_extra_retries=2)
        _check_page(page, opts)
        _check_segments(page, opts)
        legend = page.inner_text("#legend")
        for word in ("connect", "first token", "streaming the body", "backoff", "cancelled at its cap"):
            assert word in legend

        # A built-in scenario draws segments too (the fake connects at once: a zero-width connect).
        page.select_option("#scenario", "timeout")
        runs = _wait_render(page, runs + 1)
        _check_page(page, SeedOptions(scenario="timeout", a_extra_retries=2))
        _check_segments(page, SeedOptions(scenario="timeout", a_extra_retries=2))


def _load_summary(page: Any) -> dict[str, str]:
    got = page.eval_on_selector_all(
        "#load-summary dd", "dds => Object.fromEntries(dds.map(d => [d.dataset.key, d.textContent]))"
    )
    return {str(k): str(v) for k, v in got.items()}


@pytest.mark.e2e
def test_load_mode_in_system_chromium(lab_url: str) -> None:
    with lab_page(lab_url) as page:
        _wait_render(page, 1)
        assert page.input_value("#schedule") == DEFAULT_SCHEDULE

        # Over the cap, keyboard only: Enter in a field submits; the error names it and takes focus.
        _type(page, "#clients", "1000")
        page.keyboard.press("Enter")
        _wait_errors(page, "loadErrors", 1)
        assert page.inner_text("#load-error").startswith("clients: must be a whole number from 1 to 200")
        assert page.evaluate("document.activeElement.id") == "clients"
        assert page.get_attribute("#clients", "aria-invalid") == "true"

        # A small load, typed from the keyboard: 20 clients x 90 s, A down 20-40 s.
        _type(page, "#clients", "20")
        _type(page, "#duration", "90")
        _type(page, "#rate", "1")
        _type(page, "#schedule", "a:\n- {from: 20, to: 40, reply: connect_error}\n")
        page.focus("#load-run")
        page.keyboard.press("Enter")
        _wait_errors(page, "loads", 1)
        assert page.get_attribute("#clients", "aria-invalid") is None
        body = {
            "clients": 20,
            "duration": 90,
            "rate": 1,
            "budget": 5,
            "a_extra_retries": 1,
            "seed": 0,
            "schedule": "a:\n- {from: 20, to: 40, reply: connect_error}\n",
        }
        with ThreadPoolExecutor(1) as pool:
            want = pool.submit(run_load, parse_load(body)).result()
        _check_load(page, want, seconds=90)
        assert want.summary["breaker_opened"]["a"] >= 1  # the outage shows in the breaker strip
        assert page.locator("[data-chart=breaker] rect[data-series=a][data-layer=target][data-state=open]").count() > 0

        # The defaults (50 clients x 5 virtual minutes) for the screenshot.
        page.reload()
        _wait_render(page, 1)
        page.focus("#load-run")
        page.keyboard.press("Enter")
        _wait_errors(page, "loads", 1)
        with ThreadPoolExecutor(1) as pool:
            want = pool.submit(run_load, parse_load({"schedule": DEFAULT_SCHEDULE})).result()
        _check_load(page, want, seconds=300)
        # A's 429s (60-120 s) open its key + model breaker while its target breaker stays closed:
        # the strip shows both, so A no longer reads "closed" while it gets nothing
        key_open = [i for i, st in enumerate(want.series["key_breaker"]["a"]) if st == "open"]
        assert key_open and all(want.series["breaker"]["a"][i] == "closed" for i in key_open[:60])
        desc = page.locator("svg[data-chart=breaker] desc").text_content() or ""
        assert f"A key+model breaker not closed {key_open[0]}–" in desc
        out = ROOT / "test-artifacts" / "lab-load.png"
        out.parent.mkdir(exist_ok=True)
        page.locator("#load").screenshot(path=str(out))
        publish(out)


@pytest.mark.e2e
def test_load_mode_shows_the_balancer_in_system_chromium(lab_url: str) -> None:
    """Three deployments of A under p2c: the rate chart and the breaker strips have one series
    per deployment, and the limiter-wait and prompt-cache series are plotted and summed up."""
    with lab_page(lab_url) as page:
        _wait_render(page, 1)
        for field, value in (("#clients", "10"), ("#duration", "30"), ("#rate", "1"), ("#deployments", "3")):
            _type(page, field, value)
        page.select_option("#balance", "p2c")
        _type(page, "#schedule", "a2:\n- {from: 10, to: 20, reply: server_error}\n")
        page.focus("#load-run")
        page.keyboard.press("Enter")
        _wait_errors(page, "loads", 1)
        body = {"clients": 10, "duration": 30, "rate": 1, "deployments": 3, "balance": "p2c"}
        body["schedule"] = "a2:\n- {from: 10, to: 20, reply: server_error}\n"
        with ThreadPoolExecutor(1) as pool:
            want = pool.submit(run_load, parse_load(body)).result()
        s, summary = want.series, want.summary
        names = ("a", "a2", "a3", "b", "c")
        for name in (*names, "offered"):
            assert _points(page, "rate", name) == 30
        assert _points(page, "balance", "limiter_waits") == 30
        assert _points(page, "cache", "cache_hit") == sum(1 for v in s["cache_hit"] if v is not None)
        assert page.locator("svg[data-chart=breaker] rect[data-series=a2][data-layer=target]").count() == 30
        got = _load_summary(page)
        assert got["provider_requests"] == " / ".join(str(summary["provider_requests"][n]) for n in names)
        assert got["limiter_waits"] == str(summary["limiter_waits"])
        assert got["cache_hit"] == f"{100 * summary['cache_hit']:.1f}%"
        last = page.eval_on_selector_all("#load-table tbody tr:last-child td", "tds => tds.map(td => td.textContent)")
        assert last[-2] == str(s["limiter_waits"][-1])


def _points(page: Any, chart: str, series: str) -> int:
    return int(
        page.eval_on_selector_all(
            f"svg[data-chart={chart}] polyline[data-series={series}]",
            "ls => ls.reduce((n, l) => n + l.getAttribute('points').trim().split(' ').length, 0)",
        )
    )


def _check_load(page: Any, want: LoadResult, *, seconds: int) -> None:
    """The plots have one point per second per series, and the summary equals the server's run."""
    s, summary = want.series, want.summary

    def points(chart: str, series: str) -> int:
        return int(
            page.eval_on_selector_all(
                f"svg[data-chart={chart}] polyline[data-series={series}]",
                "ls => ls.reduce((n, l) => n + l.getAttribute('points').trim().split(' ').length, 0)",
            )
        )

    for name in ("a", "b", "c", "offered"):
        assert points("rate", name) == seconds
    assert points("success", "ok_share") == sum(1 for v in s["ok_share"] if v is not None)
    for name in ("retries_granted", "retries_refused", "retry_headroom"):
        assert points("budget", name) == seconds
    for name in "abc":
        for layer, key in (("target", "breaker"), ("key_model", "key_breaker")):
            states = page.eval_on_selector_all(
                f"svg[data-chart=breaker] rect[data-series={name}][data-layer={layer}]",
                "rs => rs.map(r => r.dataset.state)",
            )
            assert states == s[key][name]
    got = _load_summary(page)
    share = summary["success_share"]
    assert got["requests"] == str(summary["requests"])
    assert got["served"] == f"{summary['served_in_deadline']} ({100 * share:.1f}%)"
    assert got["provider_requests"] == " / ".join(str(summary["provider_requests"][n]) for n in "abc")
    assert got["breaker_opened"] == " / ".join(str(summary["breaker_opened"][n]) for n in "abc")
    assert got["key_breaker_opened"] == " / ".join(str(summary["key_breaker_opened"][n]) for n in "abc")
    assert got["retries"] == f"{summary['retries_granted']} / {summary['retries_refused']}"
    # the text alternative: one table row per second, with the plotted numbers
    rows = page.eval_on_selector_all(
        "#load-table tbody tr", "trs => trs.map(tr => [...tr.children].map(c => c.textContent))"
    )
    assert len(rows) == seconds
    for i in (0, seconds // 2, seconds - 1):
        assert rows[i][:6] == [str(i), str(s["offered"][i]), *(str(s["sent"][n][i]) for n in "abc"), str(s["ok"][i])]
        assert rows[i][7:13] == [s["breaker"][n][i] for n in "abc"] + [s["key_breaker"][n][i] for n in "abc"]
    for chart in ("rate", "success", "breaker", "budget"):
        svg = page.locator(f"svg[data-chart={chart}]")
        assert svg.get_attribute("role") == "img"
        assert page.locator(f"svg[data-chart={chart}] title").count() == 1
        assert page.locator(f"svg[data-chart={chart}] desc").text_content()
    assert "virtual time" in (page.locator("svg[data-chart=rate]").text_content() or "")


def test_assets_work_offline() -> None:
    """No CDN, no remote font: the page loads nothing from outside the package."""
    for asset in STATIC.iterdir():
        text = asset.read_text().replace("http://www.w3.org/2000/svg", "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, asset.name
