"""The lab page: its API (the real router's RouteRecord) and the page in the system Chromium."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from failover.lab import CAPABILITIES, SCENARIOS, SeedOptions, SeedResult, run_virtual
from failover.lab._web import STATIC, lab_app, result_body

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("FAILOVER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


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


async def test_raising_as_retries_spends_the_time_b_needed() -> None:
    base = {"scenario": "timeout", "capability": "chat", "budget": 2.5, "attempt_cap": 0.9}
    async with _client() as c:
        one = (await c.post("/api/run", json={**base, "a_extra_retries": 1})).json()
        two = (await c.post("/api/run", json={**base, "a_extra_retries": 2})).json()
    assert one["target_used"] == "b" and one["calls"]["b"] == 1
    assert two["target_used"] is None and two["calls"]["b"] == 0 and "deadline" in two["error"]


async def test_scenarios_differ_as_described() -> None:
    async with _client() as c:
        vision = (await c.post("/api/run", json={"scenario": "timeout", "capability": "vision"})).json()
        failing = (await c.post("/api/run", json={"scenario": "all_failing"})).json()
    assert [e["target"] for e in vision["excluded"]] == ["b"]
    assert "vision" in vision["excluded"][0]["reason"]
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
    page.wait_for_function(f"Number(document.body.dataset.runs || 0) >= {runs}")
    page.wait_for_load_state("networkidle")
    return int(page.evaluate("Number(document.body.dataset.runs)"))


@pytest.mark.e2e
def test_page_in_system_chromium(lab_url: str) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/services.sh (installs Debian's chromium) as root")
    from playwright.sync_api import sync_playwright  # the test extra; drives the system Chromium

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            page.goto(lab_url)
            runs = _wait_render(page, 1)
            _check_page(page, SeedOptions())

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

            out = ROOT / "test-artifacts" / "lab.png"
            out.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
            shutil.copyfile(out, ROOT / "docs" / "lab.png")
        finally:
            browser.close()
