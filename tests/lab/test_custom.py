"""Custom lab scenarios: the parser's field errors, and what the router records for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from failover.cli import main
from failover.lab import SeedOptions, render, run_virtual
from failover.lab._custom import EXAMPLE, BadInput, parse_custom, parse_custom_text
from failover.testing import Reply, ReplyKind

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_FILE = ROOT / "examples" / "lab-scenario.yaml"


def test_the_example_parses_into_the_fault_kits_scenario() -> None:
    c = parse_custom_text(EXAMPLE)
    assert c.stream is True and c.source == EXAMPLE
    assert c.scenario["a"].reply_for(0) == Reply.rate_limit(retry_after=0.3, latency=0.05)
    assert c.scenario["a"].reply_for(1).kind is ReplyKind.STALL_BEFORE_FIRST
    assert c.connect("a") == 0.05 and c.connect("b") == 0.08 and c.connect("c") == 0.0
    # a provider left out answers the healthy reply it is given
    only_a = parse_custom({"providers": {"a": "hang"}})
    assert only_a.script("b", Reply.ok("fine")).reply_for(0) == Reply.ok("fine")


def test_json_works_as_well_as_yaml() -> None:
    c = parse_custom_text('{"providers": {"b": ["server_error", "ok(latency=0.2)"]}, "stream": false}')
    assert [c.scenario["b"].reply_for(i).kind for i in range(3)] == [ReplyKind.SERVER_ERROR, ReplyKind.OK, ReplyKind.OK]


@pytest.mark.parametrize(
    ("text", "field", "hint"),
    [
        ("providers: {a: 'hang(", "custom", "line 1"),
        ("", "custom", "empty"),
        ("[1, 2]", "custom", "mapping with 'providers'"),
        ("colour: red\nproviders: {a: ok}", "colour", "unknown key"),
        ("stream: 3\nproviders: {a: ok}", "stream", "true or false"),
        ("providers: []", "providers", "provider names"),
        ("providers: {d: ok}", "providers.d", "the route has a, b, c"),
        ("providers: {a: [ok, rate_limt]}", "providers.a[1]", "unknown reply kind 'rate_limt'"),
        ("providers: {a: {replies: [ok, 'ok(latency=-1)']}}", "providers.a.replies[1]", ">= 0"),
        ("providers: {a: {replies: ok}}", "providers.a.replies", "must be a list"),
        ("providers: {a: {default: 'nope(1)'}}", "providers.a.default", "unknown reply kind"),
        ("providers: {a: {replies: [ok], connect: -1}}", "providers.a.connect", "from 0 to 60"),
        ("providers: {a: {replies: [ok], connect: x}}", "providers.a.connect", "number of seconds"),
        ("providers: {a: {replies: [ok], dialect: openai}}", "providers.a.dialect", "unknown key"),
        ("providers: {a: 'ok(latency=1e9)'}", "providers.a", "at most 60 seconds"),
        ("providers: {a: \"ok(text=__import__('os'))\"}", "providers.a", "must be literals"),
        ("providers: {a: 12}", "providers.a", "must be a reply"),
        ("providers: {a: [" + ", ".join(["ok"] * 51) + "]}", "providers.a", "at most 50"),
        ("providers: {a: absent}", "providers.a", "cannot be absent"),
    ],
)
def test_bad_scenarios_name_the_field_and_the_fix(text: str, field: str, hint: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_custom_text(text)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ") and hint in str(info.value)


def test_huge_input_is_refused_before_parsing() -> None:
    with pytest.raises(BadInput, match="keep it under"):
        parse_custom_text("#" * 30_000)


def _custom(text: str, **kw: Any) -> SeedOptions:
    return SeedOptions(scenario="custom", custom=parse_custom_text(text), **kw)


def test_connect_and_first_token_times_are_recorded() -> None:
    text = "stream: true\nproviders:\n  a: {connect: 0.05, default: 'ok(latency=0.2, chunk_interval=0.05)'}\n"
    rec = run_virtual(_custom(text)).record
    (a,) = rec.attempts
    assert a.connected == pytest.approx(0.05)
    assert a.first_event == pytest.approx(0.25)  # connect, then the reply's latency
    assert a.end > a.first_event and a.ok


def test_unstreamed_attempts_record_connect_only() -> None:
    rec = run_virtual(_custom("providers:\n  a: {connect: 0.1, default: 'ok(latency=0.2)'}\n")).record
    (a,) = rec.attempts
    assert a.connected == pytest.approx(0.1) and a.first_event is None
    assert a.end == pytest.approx(0.3)


def test_a_connect_slower_than_the_connect_timeout_fails_there() -> None:
    # the lab's connect timeout is the attempt cap (1 s): A never connects, B answers
    rec = run_virtual(_custom("providers:\n  a: {connect: 5, default: ok}\n", a_extra_retries=0)).record
    a, b = rec.attempts
    assert a.connected is None and a.duration == pytest.approx(1.0)
    assert a.outcome.startswith("timeout") or "connect" in a.outcome
    assert b.target == "b" and b.ok and b.connected == pytest.approx(b.start)


def test_the_example_scenario_falls_back_to_b() -> None:
    r = run_virtual(_custom(EXAMPLE))
    rec = r.record
    assert [(a.target, a.outcome) for a in rec.attempts] == [
        ("a", "rate_limited"),
        ("a", "timeout:first_event"),  # silent: cut at half of its time, B's share kept
        ("b", "ok"),
    ]
    assert [w.reason for w in rec.waits] == ["retry_after"]
    assert rec.waits[0].end - rec.waits[0].start == pytest.approx(0.3)
    assert r.calls == {"a": 2, "b": 1, "c": 0}


def test_cli_once_prints_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--scenario", str(EXAMPLE_FILE), "--once"]) == 0
    out = capsys.readouterr().out
    want = render(run_virtual(SeedOptions(scenario="custom", custom=parse_custom_text(EXAMPLE_FILE.read_text()))))
    assert out.strip() == want.strip()
    assert "connected +80ms, first token +330ms" in out


def test_cli_bad_scenario_file_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers:\n  a: [ok, 'rate_limit(retry_after=x)']\n")
    assert main(["lab", "--scenario", str(bad), "--once"]) == 2
    assert "providers.a[1]: 'rate_limit(retry_after=x)': arguments must be literals" in capsys.readouterr().err
    assert main(["lab", "--scenario", str(tmp_path / "missing.yaml"), "--once"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_once_needs_a_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--once"]) == 2
    assert "--once needs --scenario" in capsys.readouterr().err


async def test_a_preloaded_scenario_is_offered_to_the_page() -> None:
    import httpx

    from failover.lab._web import lab_app

    custom = parse_custom_text(EXAMPLE_FILE.read_text())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=lab_app(custom)), base_url="http://lab") as c:
        meta = (await c.get("/api/meta")).json()
    assert meta["preloaded"] is True and meta["custom"] == EXAMPLE_FILE.read_text()
    assert "custom" in meta["scenarios"]


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("x: &a [1, 1, 1]\nproviders: {a: *a}", "aliases"),
        ("providers: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_hostile_yaml_is_refused_without_expanding_it(text: str, hint: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_custom_text(text)
    assert info.value.field == "custom" and hint in str(info.value)


def test_an_absent_fallback_is_not_in_the_route() -> None:
    """``b: absent`` is a route with fewer targets (a replayed real request's): A fails, B is
    never a candidate, C answers; with C absent too, nothing is left after A."""
    one = run_virtual(_custom("providers: {a: server_error, b: absent}", a_extra_retries=0))
    assert [(a.target, a.outcome) for a in one.record.attempts] == [("a", "provider_server_error"), ("c", "ok")]
    assert one.calls == {"a": 1, "b": 0, "c": 1} and "b" not in {e.target for e in one.record.excluded}
    none = run_virtual(_custom("providers: {a: server_error, b: absent, c: absent}", a_extra_retries=0))
    assert none.record.target_used is None and none.calls == {"a": 1, "b": 0, "c": 0}
    assert parse_custom_text("providers: {b: absent}").absent == {"b"}
