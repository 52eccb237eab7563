"""The live view in the system Chromium, over a real ``failover serve`` with real traffic.

A fault-kit FakeServer plays the providers over loopback HTTP; ``failover serve --config``
runs as its own process; the official openai SDK (default settings) sends requests through
it: some answered at once, one after a 429 and a replay, one by a fallback, one failing. The
page must show exactly those requests, filter them, refuse a missing or wrong admin key, and
replay one in the simulator with the same fault pattern.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from failover.testing import FakeProvider, FakeServer, Reply, Script
from tests._services import serving
from tests.lab._browser import ARTIFACTS, lab_page, publish

pytestmark = pytest.mark.e2e

ADMIN_KEY = "live-admin-key-5e1f"
TENANT_KEY = "live-tenant-key-77aa"
PROVIDER_KEY = "sk-live-provider-9c0d3b2a"  # what the gateway sends upstream: never shown
PROMPT = "PROMPT-CANARY please summarise invoice 8841"
ANSWER = "ANSWER-CANARY invoice 8841 is paid"


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _providers() -> list[FakeProvider]:
    ok = Reply.ok(ANSWER, latency=0.02)
    return [
        FakeProvider("main", "openai", Script.always(ok)),
        FakeProvider("limited", "openai", Script.of(Reply.rate_limit(retry_after=0.3, latency=0.01), default=ok)),
        FakeProvider("shaky", "openai", Script.always(Reply.server_error(latency=0.02))),
        FakeProvider("backup", "anthropic", Script.always(Reply.ok(ANSWER, latency=0.03))),
        FakeProvider("down", "openai", Script.always(Reply.server_error(latency=0.01))),
        FakeProvider("down2", "gemini", Script.always(Reply.overloaded(latency=0.01))),
    ]


def _config(fake: FakeServer, providers: list[FakeProvider]) -> str:
    models = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}
    attempts = {"limited": 2}
    targets = "\n".join(
        f"  {p.name}: {{dialect: {p.dialect.value}, base_url: '{fake.api_url_for(p)}',"
        f" model: {models[p.dialect.value]}, api_key_env: LIVE_PROVIDER_KEY,"
        f" max_attempts: {attempts.get(p.name, 1)}, tokenizer: estimate, capabilities: [chat, streaming]}}"
        for p in providers
    )
    return f"""
targets:
{targets}
routes:
  chat: {{primary: [main]}}
  limited: {{primary: [limited]}}
  flaky: {{primary: [shaky], fallbacks: [backup]}}
  down: {{primary: [down], fallbacks: [down2]}}
gateway:
  admin: {{key_sha256: ["{_sha(ADMIN_KEY)}"]}}
  tenants:
    acme: {{key_sha256: ["{_sha(TENANT_KEY)}"]}}
  lab: true
  lab_live: {{enabled: true, keep: 50}}
"""


def _serving(config: Path) -> AbstractContextManager[tuple[str, subprocess.Popen[str]]]:
    return serving("--config", str(config), env={"LIVE_PROVIDER_KEY": PROVIDER_KEY})


def _traffic(client: openai.OpenAI, route: str, *, stream: bool = False) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    if stream:
        chunks = client.chat.completions.create(model=route, messages=messages, stream=True)
        assert ANSWER.split()[0] in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return
    answer = client.chat.completions.create(model=route, messages=messages)
    assert answer.choices[0].message.content == ANSWER


def _rows(page: Any) -> list[dict[str, str]]:
    return list(
        page.eval_on_selector_all(
            "#live-rows tr",
            "trs => trs.map(tr => ({id: tr.dataset.requestId, route: tr.dataset.route,"
            " outcome: tr.dataset.outcome, workflow: tr.dataset.workflow}))",
        )
    )


def _wait_rows(page: Any, n: int) -> list[dict[str, str]]:
    page.wait_for_function(f"document.querySelectorAll('#live-rows tr').length === {n}")
    return _rows(page)


def _timeline(page: Any, box: str) -> list[tuple[str, str, str]]:
    rows = page.eval_on_selector_all(
        f"{box} .row", "rs => rs.map(r => [r.dataset.target, r.dataset.phase, r.dataset.outcome])"
    )
    return [tuple(r) for r in rows]


def _expected(attempts: list[dict[str, Any]], waits: list[dict[str, Any]], rename: dict[str, str]) -> list[Any]:
    """The timeline rows the page draws for a record: attempts and waits in start order."""
    rows = []
    for a in attempts:
        outcome = a["outcome"] + (f" HTTP {a['status']}" if a["status"] else "")
        if a["outcome"].startswith("timeout") or a["outcome"] == "cancelled":
            outcome += " (cancelled at cap)"
        rows.append((a["start"], (rename.get(a["target"], a["target"]), a["phase"], outcome)))
    rows += [(w["start"], (rename.get(w["target"], w["target"]), "wait", w["reason"])) for w in waits]
    return [r for _, r in sorted(rows, key=lambda x: x[0])]


def test_the_live_view_of_a_real_gateway_in_system_chromium(tmp_path: Path) -> None:
    providers = _providers()
    with FakeServer(*providers).run_in_thread() as fake:
        config = tmp_path / "failover.yaml"
        config.write_text(_config(fake, providers))
        with _serving(config) as (base, proc), lab_page(f"{base}/lab/") as page:
            # Real traffic, from the official SDK at its default settings.
            client = openai.OpenAI(base_url=f"{base}/v1", api_key=TENANT_KEY)
            _traffic(client, "chat")
            _traffic(client, "limited")  # 429 (Retry-After 0.3 s), then the replay answers
            _traffic(client, "flaky")  # 500, then the fallback answers
            with pytest.raises(openai.InternalServerError):  # every candidate fails (the SDK does not retry)
                _traffic(client, "down")
            _traffic(client, "chat", stream=True)

            # The admin key is required: nothing without it, nor with a tenant's key.
            assert httpx.get(f"{base}/lab/api/live").status_code == 401
            tenant = {"authorization": f"Bearer {TENANT_KEY}"}
            assert httpx.get(f"{base}/lab/api/live", headers=tenant).status_code == 403
            admin = {"authorization": f"Bearer {ADMIN_KEY}"}
            kept = httpx.get(f"{base}/lab/api/live", headers=admin).json()["records"]
            assert [r["route"] for r in kept] == ["chat", "limited", "flaky", "down", "chat"]

            # The page: the live section asks for the key; a wrong one is refused, with the reason.
            page.wait_for_selector("#live:not([hidden])")
            page.fill("#live-key", "not-the-admin-key")
            page.press("#live-key", "Enter")
            page.wait_for_function("Number(document.body.dataset.liveRefused || 0) >= 1")
            assert page.inner_text("#live-error").startswith("401: invalid admin key")
            assert page.get_attribute("#live-key", "aria-invalid") == "true"
            assert page.locator("#live-body").is_hidden()
            page.fill("#live-key", ADMIN_KEY)
            page.click("#live-connect")
            rows = _wait_rows(page, 5)
            assert [r["id"] for r in rows] == [r["request_id"] for r in reversed(kept)]  # newest first
            assert [(r["route"], r["outcome"], r["workflow"]) for r in rows] == [
                ("chat", "ok", "direct"),
                ("down", "provider_overloaded", "fallback"),
                ("flaky", "ok", "fallback"),
                ("limited", "ok", "retry_failover"),
                ("chat", "ok", "direct"),
            ]

            # Updated as requests finish (the event stream): one more request, one more row on top.
            _traffic(client, "flaky")
            rows = _wait_rows(page, 6)
            assert rows[0]["route"] == "flaky"

            # Filters: each narrows the list to what it names (the server filters; the page
            # asks again with the filter and draws the snapshot it gets).
            for select, value, want in [
                ("#live-route", "flaky", lambda r: r["route"] == "flaky"),
                ("#live-outcome", "failed", lambda r: r["outcome"] != "ok"),
                ("#live-workflow", "retry_failover", lambda r: r["workflow"] == "retry_failover"),
            ]:
                name = select.removeprefix("#live-")
                page.select_option(select, value)
                page.wait_for_function(f"document.body.dataset.liveQuery === '?{name}={value}'")
                got = _rows(page)
                assert got and all(want(r) for r in got), (select, got)
                assert len(got) == sum(1 for r in rows if want(r))
                page.select_option(select, "")
                page.wait_for_function("document.body.dataset.liveQuery === ''")
            assert len(_rows(page)) == 6

            # One request's record: the same timeline the simulator draws.
            limited = next(r for r in kept if r["route"] == "limited")
            page.click(f"#live-rows tr[data-request-id='{limited['request_id']}'] button[data-action=show]")
            page.wait_for_function(f"document.body.dataset.liveShown === '{limited['request_id']}'")
            drawn = _timeline(page, "#live-timeline")
            assert drawn == _expected(limited["attempts"], limited["waits"], {})
            assert [d[2] for d in drawn] == ["rate_limited HTTP 429", "retry_after", "ok HTTP 200"]
            summary = page.inner_text("#live-summary")
            for fact in ("limited", "retry_failover", limited["request_id"]):
                assert fact in summary
            out = ARTIFACTS / "lab-live.png"
            out.parent.mkdir(exist_ok=True)
            page.locator("#live").screenshot(path=str(out))
            publish(out)

            # Replay the fallback request in the simulator: its fault pattern, as a custom scenario.
            flaky = next(r for r in kept if r["route"] == "flaky")
            runs = int(page.evaluate("Number(document.body.dataset.runs || 0)"))
            page.click(f"#live-rows tr[data-request-id='{flaky['request_id']}'] button[data-action=replay]")
            page.wait_for_function(
                f"Number(document.body.dataset.runs || 0) > {runs}"
                " && document.body.dataset.runs === document.body.dataset.seq"
            )
            assert page.input_value("#scenario") == "custom"
            assert "A = shaky" in page.input_value("#custom") and "B = backup" in page.input_value("#custom")
            sim = _timeline(page, "#timeline")
            assert sim == _expected(flaky["attempts"], flaky["waits"], {"shaky": "a", "backup": "b"})
            assert page.inner_text("#summary [data-key=workflow]") == "fallback"
            assert page.inner_text("#summary [data-key=target]") == "b"

            # Nothing secret reached the page: no key, no prompt, no answer.
            html = page.content()
            for secret in (PROVIDER_KEY, TENANT_KEY, PROMPT, ANSWER, "8841"):
                assert secret not in html

            # Shutting down with the page still connected: the drain ends its stream, the
            # process exits, and the page says it lost the stream.
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=20)
            assert time.monotonic() - t0 < 15  # far below: the stream does not hold the server up
            page.wait_for_function("document.getElementById('live-status').textContent.includes('reconnecting')")
        log = proc.stdout.read() if proc.stdout else ""
        assert PROVIDER_KEY not in log and PROMPT not in log
