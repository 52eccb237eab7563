"""Offline replay: recorded requests through each candidate, on fake providers and virtual time."""

from __future__ import annotations

import dataclasses
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from failover import ImagePart, Request, Response
from failover.cli import main
from failover.inbound import openai as inbound_openai
from failover.lab._replay import (
    Progress,
    ReplayInputError,
    ReplayOptions,
    RequestResult,
    chat_request,
    load_gate,
    parse_requests,
    read_requests,
    run_replay,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "replay.jsonl"
STRUCTURED_LINE = 2  # the json_schema request of examples/replay.jsonl
IMAGE_LINE = 4

CONFIG = """
targets:
  gpt-main:
    dialect: openai
    base_url: https://api.openai.com/v1
    model: gpt-4o-mini
    api_key_env: FAILOVER_REPLAY_TEST_UNSET_KEY   # fake mode needs no key
    capabilities: [chat, vision, tools, structured_output]
    price: {input_per_mtok: 0.15, output_per_mtok: 0.6}
    tokenizer: estimate
    max_attempts: 2
  claude-b:
    dialect: anthropic
    base_url: https://api.anthropic.com/v1
    model: claude-haiku-4-5
    api_key_env: FAILOVER_REPLAY_TEST_UNSET_KEY
    capabilities: [chat, vision, tools, structured_output]
    price: {input_per_mtok: 1.0, output_per_mtok: 5.0}
    tokenizer: estimate
    max_attempts: 1
  gemini-c:
    dialect: gemini
    base_url: https://generativelanguage.googleapis.com/v1beta
    model: gemini-2.5-flash
    api_key_env: FAILOVER_REPLAY_TEST_UNSET_KEY
    capabilities: [chat, tools, structured_output]   # no vision
    price: {input_per_mtok: 0.3, output_per_mtok: 2.5}
    tokenizer: estimate
    max_attempts: 1
routes:
  triage:
    contract: {capabilities: [chat]}
    primary: [gpt-main]
    fallbacks: [claude-b]
    canary: {claude-b: 0.2}
"""

# B answers every call with JSON that matches no schema: fine for plain text, a contract
# failure for the structured request (and for its one repair).
SCENARIO = """
gpt-main: "ok(latency=0.3)"
claude-b: "schema_invalid(latency=0.5)"
gemini-c:
  replies: []
  default: "ok(latency=0.2)"
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "failover.yaml").write_text(CONFIG)
    (tmp_path / "fake.yaml").write_text(SCENARIO)
    return {"config": str(tmp_path / "failover.yaml"), "fake": str(tmp_path / "fake.yaml"), "dir": str(tmp_path)}


def _opts(files: dict[str, str], **kw: object) -> ReplayOptions:
    fields: dict[str, object] = {
        "requests": str(EXAMPLE),
        "config": files["config"],
        "route": "triage",
        "candidates": ("claude-b", "gemini-c"),
        "fake": files["fake"],
    }
    fields.update(kw)
    return ReplayOptions(**fields)  # type: ignore[arg-type]


def test_the_example_set_converts() -> None:
    recorded = read_requests(EXAMPLE)
    assert 5 <= len(recorded) <= 10
    assert [r.line for r in recorded] == list(range(1, len(recorded) + 1))
    by_line = {r.line: r.request for r in recorded}
    structured = by_line[STRUCTURED_LINE]
    assert structured.wants_json_schema and structured.response_format is not None
    assert structured.response_format.name == "triage" and structured.response_format.strict
    assert structured.response_format.schema is not None
    assert structured.response_format.schema["required"] == ["category", "urgency", "summary"]
    assert structured.temperature == 0.0 and structured.max_tokens == 300
    image = by_line[IMAGE_LINE]
    assert image.has_images
    part = image.messages[0].content[1]
    assert isinstance(part, ImagePart) and part.detail == "low" and part.is_data
    developer = by_line[3]
    assert developer.messages[0].role == "system" and developer.max_tokens == 120  # max_completion_tokens
    tools = by_line[5]
    assert [t.name for t in tools.tools] == ["lookup_order"] and tools.tool_choice is not None
    history = by_line[6]
    assert [m.role for m in history.messages] == ["user", "assistant", "tool"]
    call = history.messages[1].tool_calls[0]
    assert call.parsed == {"order_id": "A-1042"} and history.messages[2].tool_call_id == "call_1"
    sampled = by_line[8]
    assert (sampled.top_p, sampled.stop, sampled.seed) == (0.9, ("\n\n\n",), 7)


def test_replay_shows_a_fallback_that_breaks_the_contract(files: dict[str, str]) -> None:
    report = run_replay(_opts(files))
    n = len(read_requests(EXAMPLE))
    assert report.requests == n and report.fake and report.route == "triage"
    assert [c.target for c in report.candidates] == ["gpt-main", "claude-b", "gemini-c"]

    primary = report.candidate("gpt-main")
    assert primary.role == "primary" and primary.canary is None
    assert primary.transport_ok == primary.contract_ok == len(primary.sent) == n
    assert primary.latency_ms(50) == pytest.approx(300.0)  # virtual time: exactly the scripted latency
    assert primary.cost_total > 0 and primary.failures == {}

    b = report.candidate("claude-b")
    assert b.role == "fallback" and b.canary == 0.2
    assert len(b.sent) == n
    assert b.transport_ok == n  # every request got a complete answer...
    assert b.contract_ok == n - 1  # ...but the structured one never met its schema
    (bad,) = [r for r in b.results if not r.contract]
    assert bad.line == STRUCTURED_LINE and bad.transport and not bad.contract
    assert bad.outcome in ("schema_invalid", "contract_failure")
    assert bad.attempts == 2  # the one repair was tried, and paid for
    assert bad.cost > 0 and bad.latency_ms == pytest.approx(1000.0)
    assert b.latency_ms(50) == pytest.approx(500.0) and b.latency_ms(95) == pytest.approx(1000.0)

    c = report.candidate("gemini-c")
    assert c.role == "candidate"  # not approved for the route (yet): replay is how it gets proven
    assert len(c.sent) == n - 1
    (excluded,) = [r for r in c.results if not r.sent]
    assert excluded.line == IMAGE_LINE and excluded.excluded == "missing capability: vision"
    assert c.failures == {"excluded": 1}
    assert c.transport_ok == c.contract_ok == n - 1

    text = report.render()
    assert "transport success" in text and "contract success" in text and "latency p95" in text
    assert f"{n}/{n} 100.0%" in text and f"{n - 1}/{n} 87.5%" in text
    assert "fallback (canary 0.2)" in text
    assert f"line {STRUCTURED_LINE}: " in text and f"line {IMAGE_LINE}: not sent: missing capability: vision" in text


def test_candidates_default_to_the_route_fallbacks(files: dict[str, str]) -> None:
    report = run_replay(_opts(files, candidates=(), concurrency=1))
    assert [c.target for c in report.candidates] == ["gpt-main", "claude-b"]


def test_cli_json_output_and_progress(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", str(EXAMPLE), "--config", files["config"], "--route", "triage", "--fake", files["fake"]]
    assert main([*argv, "--candidate", "claude-b", "--concurrency", "2", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["route"] == "triage" and data["concurrency"] == 2 and data["fake"] is True
    n = data["requests"]
    b = next(c for c in data["candidates"] if c["target"] == "claude-b")
    assert b["transport_rate"] == 1.0 and b["contract_rate"] == pytest.approx((n - 1) / n)
    assert b["task_rate"] is None and b["task_checked"] == 0
    assert b["latency_p50_ms"] == pytest.approx(500.0) and b["cost_total"] > 0
    assert len(b["results"]) == n
    assert b["results"][STRUCTURED_LINE - 1]["contract"] is False
    assert b["results"][STRUCTURED_LINE - 1]["transport"] is True
    # progress: plain lines on a non-terminal stderr, ending at 100%
    progress = [line for line in captured.err.splitlines() if line.startswith("replay [")]
    assert progress and progress[-1].startswith(f"replay [{'#' * 24}] {2 * n}/{2 * n} 100%")

    assert main(argv) == 0  # the table
    out = capsys.readouterr().out
    assert "gpt-main" in out and "claude-b" in out and "contract success" in out


@dataclass(frozen=True)
class _Verdict:
    passed: bool
    reason: str | None = None


def no_wrong_answers() -> object:
    """A gate factory, as --gate module:function expects."""

    async def gate(request: Request, response: Response) -> _Verdict:
        return _Verdict(passed="wrong" not in response.text)

    return gate


async def direct_gate(request: Request, response: Response) -> _Verdict:
    return _Verdict(passed=True)


def broken_gate() -> object:
    async def gate(request: Request, response: Response) -> _Verdict:
        raise RuntimeError("judge unavailable")

    return gate


def test_a_quality_gate_measures_task_success(files: dict[str, str]) -> None:
    report = run_replay(_opts(files, gate="tests.lab.test_replay:no_wrong_answers"))
    n = report.requests
    primary, b, c = report.candidates
    assert (primary.task_checked, primary.task_ok) == (n, n)
    assert b.task_checked == n and b.task_ok == 0  # {"wrong": 1} passes no task
    (bad,) = [r for r in b.results if not r.contract]
    assert b.failures == {bad.outcome: 1, "task_failed": n - 1}  # the gate never ran on the broken one
    assert c.task_checked == n - 1  # the excluded request was not judged
    assert report.gate == "tests.lab.test_replay:no_wrong_answers"
    assert f"{n}/{n} 100.0%" in report.render()


def test_gate_loading(files: dict[str, str]) -> None:
    assert load_gate("tests.lab.test_replay:direct_gate") is direct_gate
    report = run_replay(_opts(files, candidates=("claude-b",), gate="tests.lab.test_replay:broken_gate"))
    b = report.candidate("claude-b")
    assert b.task_ok == 0 and all(r.gate_error == "RuntimeError: judge unavailable" for r in b.results if r.contract)
    assert "quality gate error: RuntimeError: judge unavailable" in report.render()
    for spec, words in [
        ("nocolon", "expected module:function"),
        ("tests.lab.no_such_module:gate", "cannot import module"),
        ("tests.lab.test_replay:nothing_here", "has no attribute"),
        ("tests.lab.test_replay:EXAMPLE", "not callable"),
    ]:
        with pytest.raises(ValueError, match=words):
            load_gate(spec)


GOOD = '{"messages": [{"role": "user", "content": "hi"}]}'
TOOLS = '"tools": [{"type": "function", "function": {"name": "a"}}]'


def _with(extra: str) -> str:
    return GOOD[:-1] + ", " + extra + "}"


def _turn(message: str) -> str:
    """A history: GOOD's user message, then ``message`` (an assistant turn)."""
    return '{"messages": [{"role": "user", "content": "hi"}, ' + message + "]}"


# The wording after the field is failover.inbound.openai's (the gateway's); the words checked
# are the ones that tell the user what is wrong.
@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("{not json", "(line)", "not valid JSON"),
        ("[1, 2]", "(body)", "must be a JSON object"),
        ('{"model": "gpt-4o"}', "messages", "Field required"),
        ('{"messages": []}', "messages", "at least 1 item"),
        ('{"messages": [{"role": "function", "content": "x"}]}', "messages[0]", "'role' does not match"),
        ('{"messages": [{"role": "user"}]}', "messages[0].content", "Field required"),
        ('{"messages": [{"role": "user", "content": []}]}', "messages[0].content", "an empty array"),
        (
            '{"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}',
            "messages[0].content[0]",
            "Input tag 'input_audio'",
        ),
        (
            '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]}',
            "messages[0].content[0].image_url.url",
            "must be an http(s) URL or a data:image/...;base64 URL",
        ),
        (
            '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": '
            '{"url": "data:image/png,rawbytes"}}]}]}',
            "messages[0].content[0].image_url.url",
            "data:image/...;base64 URL",
        ),
        (
            '{"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://x"}}]}]}',
            "messages[0].content[0].type",
            "Input should be 'text'",
        ),
        ('{"messages": [{"role": "assistant", "content": null}]}', "messages[0].content", "content or tool_calls"),
        (
            _turn('{"role": "assistant", "content": null, "refusal": "I cannot help with that."}'),
            "messages[1].refusal",
            "an assistant refusal in the history cannot be replayed",
        ),
        (
            _turn('{"role": "assistant", "content": "ok", "function_call": {"name": "f", "arguments": "{}"}}'),
            "messages[1].function_call",
            "legacy function call in the history cannot be replayed",
        ),
        (
            _turn(
                '{"role": "assistant", "tool_calls": [{"id": "", "type": "function", '
                '"function": {"name": "f", "arguments": "{}"}}]}'
            ),
            "messages[1].tool_calls[0].id",
            "at least 1 character",
        ),
        ('{"messages": [{"role": "tool", "content": "x"}]}', "messages[0].tool_call_id", "Field required"),
        (_with('"max_tokens": "lots"'), "max_tokens", "valid integer"),
        (_with('"max_tokens": "300"'), "max_tokens", "valid integer"),  # no coercion: the API refuses it too
        (_with('"max_tokens": true'), "max_tokens", "valid integer"),
        (_with('"max_tokens": 0'), "max_tokens", "greater than or equal to 1"),
        (_with('"temperature": 3'), "temperature", "less than or equal to 2"),
        (_with('"temperature": "0.5"'), "temperature", "valid number"),
        (_with('"frequency_penalty": 0.5'), "frequency_penalty", "not supported by replay (a sampling penalty)"),
        (_with('"presence_penalty": -1'), "presence_penalty", "not supported by replay"),
        (_with('"logit_bias": {"50256": -100}'), "logit_bias", "not supported by replay (token biases)"),
        (_with('"modalities": ["text", "audio"]'), "modalities", "not supported by replay"),
        (_with('"functions": [{"name": "f"}]'), "functions", "legacy function calling"),
        (_with('"n": 2'), "n", "less than or equal to 1"),
        (_with('"logprobs": true'), "logprobs", "logprobs are not supported"),
        (_with('"stop": [1]'), "stop[0]", "valid string"),
        (_with('"stop": ["a", "b", "c", "d", "e"]'), "stop", "at most 4 stop sequences"),
        (_with('"max_tokens": 10, "max_completion_tokens": 20'), "max_tokens", "disagree"),
        (
            _with('"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}'),
            "response_format.json_schema.schema",
            "is required",
        ),
        (
            _with(
                '"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strnig"}}}'
            ),
            "response_format.json_schema.schema.type",
            "not a valid JSON Schema",
        ),
        (_with('"response_format": {"type": "yaml"}'), "response_format", "Input tag 'yaml'"),
        (
            _with(TOOLS + ', "tool_choice": {"type": "function", "function": {"name": "b"}}'),
            "tool_choice",
            "names 'b', which is not in tools",
        ),
        (_with('"tool_choice": "required"'), "tool_choice", "needs at least one tool"),
        (_with('"tools": [{"type": "retrieval"}]'), "tools[0].type", "Input should be 'function'"),
        (_with('"tools": [{"type": "function", "function": {"name": "a b"}}]'), "tools[0].function.name", "pattern"),
        (
            _with('"tools": [{"type": "function", "function": {"name": "a", "parameters": []}}]'),
            "tools[0].function.parameters",
            "valid dictionary",
        ),
        (
            _with('"tools": [{"type": "function", "function": {"name": "a", "parameters": {"required": "x"}}}]'),
            "tools[0].function.parameters.required",
            "not a valid JSON Schema",
        ),
        (_with(TOOLS[:-1] + ', {"type": "function", "function": {"name": "a"}}]'), "tools[1].function.name", "twice"),
        ('{"custom_id": "r1", "method": "POST", "url": "/v1/embeddings", "body": {}}', "url", "only /v1/chat"),
        ('{"custom_id": "r1", "url": "/v1/chat/completions", "body": {"messages": 3}}', "body.messages", "valid list"),
        ('{"custom_id": "r1", "body": {"messages": []}, "extra": 1}', "extra", "unknown key in a batch line"),
        ('{"custom_id": "", "body": {}}', "custom_id", "non-empty string"),
    ],
)
def test_a_bad_line_names_the_line_and_field(line: str, field: str, words: str) -> None:
    with pytest.raises(ReplayInputError) as info:
        parse_requests([GOOD, "", line, GOOD], source="calls.jsonl")
    err = info.value
    assert (err.line, err.field) == (3, field)
    assert words in err.problem
    assert str(err).startswith(f"calls.jsonl:3: {field}: ")
    assert not err.problem.startswith(("invalid request body", f"{field}:"))  # the field is said once


def test_batch_lines_and_ignored_fields() -> None:
    batch = {
        "custom_id": "ticket-17",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True, "user": "u"},
    }
    (rec,) = parse_requests([json.dumps(batch)])
    assert rec.id == "ticket-17" and rec.request.messages[0].text == "hi"


def test_what_replay_lets_through() -> None:
    """Fields that don't change the answer, and answer-changing ones at the API's default value."""
    body = json.loads(GOOD) | {
        "frequency_penalty": 0,
        "presence_penalty": 0.0,
        "logit_bias": {},
        "modalities": ["text"],
        "top_logprobs": None,
        "prompt_cache_key": "k1",  # unknown to replay before: ignored now, as the gateway ignores it
        "safety_identifier": "u-1",
        "parallel_tool_calls": False,
        "reasoning_effort": "low",  # refused before: the Request carries it now
    }
    body["messages"].append({"role": "assistant", "content": "ok", "refusal": None, "name": "bot"})
    (rec,) = parse_requests([json.dumps(body)])
    assert rec.request.reasoning_effort == "low"
    assert rec.request.messages[1].name == "bot"  # kept: the OpenAI dialect sends it on
    # nothing passed through: every candidate, of any dialect, answers the same request
    assert rec.request.passthrough is None


def test_replay_converts_exactly_as_the_gateway_does() -> None:
    """One converter: every example line becomes the Request the gateway would build from it,
    but for the fields the gateway passes through to a Chat Completions target."""
    for rec in read_requests(EXAMPLE):
        body = json.loads(EXAMPLE.read_text().splitlines()[rec.line - 1])
        served = inbound_openai.to_request(inbound_openai.parse_body(body))
        assert rec.request == dataclasses.replace(served, passthrough=None)
        assert chat_request(body) == rec.request


def test_cli_bad_line_is_a_clear_error(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(GOOD + "\n" + GOOD + "\n" + GOOD[:-1] + ', "max_tokens": -5}\n')
    code = main(["replay", str(bad), "--config", files["config"], "--route", "triage", "--fake", files["fake"]])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{bad}:3: max_tokens: Input should be greater than or equal to 1" in err


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"route": "nope"}, "--route: no route 'nope'"),
        ({"candidates": ("nope",)}, "--candidate: no target 'nope'"),
        ({"concurrency": 0}, "--concurrency must be >= 1"),
        ({"fake": "/nonexistent/fake.yaml"}, "cannot read it"),
    ],
)
def test_bad_options(files: dict[str, str], change: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        run_replay(_opts(files, **change))


def test_a_scenario_must_cover_every_target(files: dict[str, str], tmp_path: Path) -> None:
    partial = tmp_path / "partial.yaml"
    partial.write_text('gpt-main: "ok"\n')
    with pytest.raises(ValueError, match=r"no script for target\(s\) claude-b, gemini-c"):
        run_replay(_opts(files, fake=str(partial)))


def _result(ok: bool) -> RequestResult:
    return RequestResult(line=1, id="line 1", target="t", outcome="ok" if ok else "timeout")


def test_progress_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    bar = Progress(20, stream=out, tty=False)
    for i in range(20):
        bar.advance(_result(i % 5 != 0))
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10  # one per tenth of the work
    assert lines[0] == f"replay [{'#' * 2}{'-' * 22}] 2/20  10% | not successful 1"
    assert lines[-1].endswith("20/20 100% | not successful 4")


def test_progress_redraws_in_place_on_a_terminal() -> None:
    out = io.StringIO()
    now = [0.0]
    bar = Progress(100, stream=out, tty=True, interval=0.1, clock=lambda: now[0])
    for _ in range(100):
        now[0] += 0.01
        bar.advance()
    bar.close()
    text = out.getvalue()
    assert "\n" not in text[:-1] and text.endswith("100/100 100% | not successful 0\n")
    assert 9 <= text.count("\r") <= 12  # throttled to about one redraw per 0.1 s, and the last one


def test_the_docs_example_output_is_what_replay_prints(tmp_path: Path) -> None:
    docs = (EXAMPLE.parents[1] / "docs" / "replay.md").read_text()
    (tmp_path / "fake.yaml").write_text(docs.split("```yaml\n", 1)[1].split("```", 1)[0])
    shown = docs.split("\nreplay of 8 requests", 1)[1].split("\n\nnot successful:", 1)[0]
    head, table = shown.split("\n\n", 1)
    report = run_replay(
        ReplayOptions(
            requests=str(EXAMPLE),
            config=str(EXAMPLE.parents[1] / "examples" / "failover.yaml"),
            route="support_triage_v3",
            candidates=("claude-sonnet", "gemini-flash"),
            fake=str(tmp_path / "fake.yaml"),
        )
    )
    printed = report.render()
    assert printed.split("\n", 1)[0].endswith(head.split(" on route", 1)[1])
    rows = printed.split("\n\n")[1].splitlines()
    assert len(rows) == len(table.splitlines())
    for got, want in zip(rows, table.splitlines(), strict=True):
        if want.startswith("cost"):  # the repair prompt's length (its wording) moves the failing column
            assert got.split()[:4] == want.split()[:4]
        else:
            assert got == want
    assert "\n\nnot successful:\n  gemini-flash       line 2: " in printed
