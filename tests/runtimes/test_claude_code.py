"""The Claude Code CLI (npm ``@anthropic-ai/claude-code`` 2.1.197, at its DEFAULT settings)
against a real ``failover serve`` whose upstreams are fake Anthropic providers.

``claude -p PROMPT --output-format stream-json --verbose``, with ``ANTHROPIC_BASE_URL`` the
gateway and the tenant key as ``ANTHROPIC_API_KEY``; nothing else set: its own retries (10,
and 3 for a 529), timeouts, model (it asks for ``claude-opus-4-8``, so the gateway's route has
that name), thinking and tools are its defaults. Each test checks what Claude Code printed,
how many requests reached each fake upstream, and the gateway's RouteRecord of each request
(the lab's live view). Set-up: tests/runtimes/_anthropic_side.py.

What Claude Code does that the gateway must live with, as these tests found it:

- a ``529`` answer is retried by Claude Code twice more (three requests in all) although the
  gateway says ``x-should-retry: false``; other errors before the stream are not retried;
- a stream that ends in an ``error`` event after output began (the gateway's ``partial_output``
  when an upstream stream is cut past the commit point) is thrown away, not shown, and the
  turn is asked again ONCE without a stream (no retry notice is printed): the gateway holds
  a plain answer whole, so the second request is rescued whatever the upstream does;
- thinking blocks go back with their signatures only on a message whose ``model`` is the model
  Claude Code asked for: the route must be named after the model its primary serves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from failover.testing import Reply, Script
from tests.runtimes._anthropic_side import (
    BACKUP_MODEL,
    CLI_MODEL,
    Gateway,
    Run,
    fake_signature,
    gateway,
    long_answer,
    ok,
    run_claude_code,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

NOTES = "NOTES-CANARY 4417 the invoice is paid\n"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """Claude Code's working directory, with the file the tool loops read."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.txt").write_text(NOTES)
    return path


def claude(runtimes: Path, env: dict[str, str], gw: Gateway, work: Path, prompt: str = "say hi") -> Run:
    return run_claude_code(runtimes, env, gw, prompt, work)


def succeeded(run: Run) -> None:
    assert run.returncode == 0, run.describe()
    assert run.result["subtype"] == "success" and run.result["is_error"] is False, run.describe()


def test_a_plain_prompt_is_answered_by_the_primary(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """One prompt, one request: the primary's words reach Claude Code unchanged, under the
    model name it asked for, and the gateway's record of that request is the direct path."""
    with gateway(tmp_path, CLI_MODEL, ok("PLAIN-CANARY hello from the primary")) as gw:
        run = claude(runtimes, runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    assert run.answer == "PLAIN-CANARY hello from the primary"
    assert [b["text"] for b in run.assistant_blocks("text")] == [run.answer]
    assert gw.counts() == {"primary": 1, "backup": 0}
    assert gw.calls(gw.primary)[0].model == CLI_MODEL  # the route's primary serves the model asked for
    assert [(r["route"], r["status"], r["stream"], r["workflow"]) for r in records] == [
        (CLI_MODEL, 200, True, "direct")
    ]
    assert gw.attempts(records[0]) == [("primary", "ok", 200)]
    # the message Claude Code kept is the one the gateway recorded
    assistant = next(e for e in run.events if e["type"] == "assistant")
    assert assistant["request_id"] == records[0]["request_id"]
    assert assistant["message"]["model"] == CLI_MODEL
    assert run.retries() == []


def test_a_tool_loop_reads_a_file_and_sends_its_content_back(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """Turn one asks for ``Read`` of a file in the working directory (a read-only tool, run
    without a permission prompt at defaults in ``-p`` mode); Claude Code runs it and turn two
    carries the ``tool_result`` with the file's content to the upstream; the final answer is
    turn two's text."""
    notes = str(work / "notes.txt")
    script = Script.of(ok("Reading the notes.", tool_calls=[("Read", {"file_path": notes})]), ok("TOOL-CANARY done"))
    with gateway(tmp_path, CLI_MODEL, script) as gw:
        run = claude(runtimes, runtime_env, gw, work, "What do my notes say?")
        records = gw.records()
    succeeded(run)
    assert run.answer == "TOOL-CANARY done"
    assert run.result["num_turns"] == 2
    [call] = run.assistant_blocks("tool_use")
    assert (call["name"], call["input"]) == ("Read", {"file_path": notes})
    assert gw.counts() == {"primary": 2, "backup": 0}
    second = gw.calls(gw.primary)[1].json
    assert second is not None
    assistant, results = second["messages"][-2:]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    assert assistant["content"][1]["id"] == call["id"]
    [result] = [b for b in results["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == call["id"]
    assert NOTES.strip() in str(result["content"])  # Claude Code numbers the lines: "1\tNOTES-CANARY..."
    assert [(r["workflow"], r["status"]) for r in records] == [("direct", 200), ("direct", 200)]


@pytest.mark.parametrize(
    ("dialect", "status"), [("anthropic", 529), ("openai", 503)], ids=["529 overloaded", "503 overloaded"]
)
def test_an_overloaded_primary_falls_back_unseen(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path, dialect: str, status: int
) -> None:
    """The primary answers every call overloaded (Anthropic's 529; an OpenAI-compatible
    primary's 503): the gateway replays it once (two attempts, the default), then its approved
    fallback answers, inside ONE request of Claude Code, which never sees an error and retries
    nothing. The answer says which model wrote it."""
    with gateway(
        tmp_path, CLI_MODEL, Script.always(Reply.overloaded()), ok("BACKUP-CANARY hello"), primary_dialect=dialect
    ) as gw:
        run = claude(runtimes, runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    record = gw.fell_back(run, records, primary_calls=2)
    assert [c.status for c in gw.calls(gw.primary)] == [status, status]
    assert (record["status"], record["workflow"], record["recovered"], record["target_used"]) == (
        200,
        "fallback",
        True,
        "backup",
    )
    overloaded = ("primary", "provider_overloaded", status)
    assert gw.attempts(record) == [overloaded, overloaded, ("backup", "ok", 200)]
    assert next(e for e in run.events if e["type"] == "assistant")["message"]["model"] == BACKUP_MODEL


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_a_primary_rate_limited_for_20_s_is_not_waited_for(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path, dialect: str
) -> None:
    """The primary answers 429 with ``retry-after: 20``. Its approved fallback answers at once,
    inside ONE request of Claude Code: the gateway does not sleep the 20 s to ask the primary
    again (it did: an answer after 20 s, two calls to the primary), and says why in the record."""
    with gateway(
        tmp_path,
        CLI_MODEL,
        Script.always(Reply.rate_limit(retry_after=20)),
        ok("BACKUP-CANARY hello"),
        primary_dialect=dialect,
    ) as gw:
        run = claude(runtimes, runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    record = gw.fell_back(run, records, primary_calls=1)
    assert (record["status"], record["workflow"], record["target_used"]) == (200, "fallback", "backup")
    assert gw.attempts(record) == [("primary", "rate_limited", 429), ("backup", "ok", 200)]
    assert record["waits"] == [] and record["elapsed_ms"] < 10_000  # not the 20 s
    assert [e["code"] for e in record["excluded"]] == ["no_replay"]


def test_without_the_fallback_the_overload_reaches_claude_code_which_does_not_retry_it(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The same 529s with the fallback taken off the route (the rescue broken on purpose): the
    gateway already replayed the primary and knows no moment to come back, so it answers 529 with
    the type ``api_error`` and ``x-should-retry: false``. Claude Code 2.1.197 retries every
    ``overloaded_error`` body whatever that header says (it did, twice: three gateway requests,
    six calls to the primary); an ``api_error`` it does not. One gateway request, two calls."""
    with gateway(tmp_path, CLI_MODEL, Script.always(Reply.overloaded()), fallback=False) as gw:
        run = claude(runtimes, runtime_env, gw, work)
        records = gw.records()
    assert run.returncode == 1, run.describe()
    assert run.result["is_error"] is True
    assert "529" in run.answer
    assert run.retries() == []
    assert gw.counts() == {"primary": 2, "backup": 0}
    assert [(r["status"], r["outcome"]) for r in records] == [(529, "provider_overloaded")]
    assert all(len(r["attempts"]) == 2 for r in records)


def test_a_stream_cut_before_the_commit_point_is_replaced_unseen(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The primary's stream is cut after 3 events, far inside the commit point (100 tokens):
    nothing of it was shown, so the gateway replays the primary and Claude Code gets ONE clean
    answer, the replay's, word for word (no ``p`` word of the cut attempt, nothing twice)."""
    cut = Reply.drop_after(3, text=long_answer("p"), chunk_interval=0.001)
    with gateway(tmp_path, CLI_MODEL, Script.of(cut, default=ok(long_answer("q")))) as gw:
        run = claude(runtimes, runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    assert run.answer == long_answer("q")
    assert [b["text"] for b in run.assistant_blocks("text")] == [long_answer("q")]
    assert gw.counts() == {"primary": 2, "backup": 0}
    assert gw.calls(gw.primary)[0].events_sent == 3
    [record] = records
    assert (record["workflow"], record["recovered"], record["status"]) == ("retry_failover", True, 200)
    assert gw.attempts(record) == [("primary", "transport_transient", 200), ("primary", "ok", 200)]
    assert run.retries() == []


def test_a_stream_cut_after_the_commit_point_ends_in_an_error_and_claude_code_asks_again(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The primary's stream is cut after 150 events, past the commit point: Claude Code was
    already shown about 140 words, so the gateway cannot rescue without a splice and ends the
    stream with an ``error`` event (``partial_output``). Claude Code throws the partial message
    away and asks again once, without a stream (no retry notice); that request the gateway
    answers whole. What Claude Code keeps and prints is the second answer alone: no ``p`` word
    of the cut stream, nothing spliced or twice."""
    cut = Reply.drop_after(150, text=long_answer("p"), chunk_interval=0.001)
    with gateway(tmp_path, CLI_MODEL, Script.of(cut, default=ok(long_answer("q")))) as gw:
        run = claude(runtimes, runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    assert run.answer == long_answer("q")
    assert [b["text"] for b in run.assistant_blocks("text")] == [long_answer("q")]
    assert gw.counts() == {"primary": 2, "backup": 0}
    assert gw.calls(gw.primary)[0].events_sent == 150
    first, second = records
    assert (first["status"], first["stream"], first["outcome"], first["workflow"]) == (
        200,
        True,
        "partial_output",
        "stop",
    )
    assert gw.attempts(first) == [("primary", "transport_transient", 200)]
    assert (second["status"], second["stream"], second["outcome"]) == (200, False, "ok")
    assert gw.attempts(second) == [("primary", "ok", 200)]
    assert run.retries() == []


def test_a_thinking_block_goes_back_with_its_signature_byte_for_byte(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """Turn one is a signed ``thinking`` block then a ``Read`` call; Claude Code sends the
    block back in turn two, and the gateway passes it to the primary as the primary wrote it:
    the same text, the same signature, byte for byte, before the ``tool_use``."""
    notes = str(work / "notes.txt")
    thought = "The user wants the notes; I should read notes.txt first."
    first = ok(None, reasoning=thought, tool_calls=[("Read", {"file_path": notes})])
    with gateway(tmp_path, CLI_MODEL, Script.of(first, ok("THINK-CANARY done"))) as gw:
        run = claude(runtimes, runtime_env, gw, work, "What do my notes say?")
        records = gw.records()
    succeeded(run)
    assert run.answer == "THINK-CANARY done"
    one, two = gw.calls(gw.primary)
    signature = fake_signature("primary", one.index + 1)
    assert run.assistant_blocks("thinking") == [{"type": "thinking", "thinking": thought, "signature": signature}]
    assert two.json is not None
    [assistant] = [m for m in two.json["messages"] if m["role"] == "assistant"]
    thinking, tool_use = assistant["content"]
    assert thinking == {"type": "thinking", "thinking": thought, "signature": signature}
    assert (tool_use["type"], tool_use["name"]) == ("tool_use", "Read")
    assert [r["workflow"] for r in records] == ["direct", "direct"]


def test_on_a_route_named_otherwise_than_its_model_the_tool_loop_goes_on_without_thinking(
    runtimes: Path, runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The route is still ``claude-opus-4-8`` but its primary serves ``claude-primary`` (as a
    route named ``coder`` would), so the gateway's answer names ``claude-primary``. Claude Code
    keeps the signed thinking block it was shown, but sends thinking back only on a message
    from the model it asked for: turn two carries the ``tool_use`` without the block. The
    gateway then sends that turn without ``thinking`` (a thinking request whose last
    assistant turn calls tools without its thinking is refused by Anthropic), so the loop
    completes, without the model's thinking. Name the route after the model its primary serves
    to keep it (the test above)."""
    notes = str(work / "notes.txt")
    first = ok(None, reasoning="I should read notes.txt first.", tool_calls=[("Read", {"file_path": notes})])
    script = Script.of(first, ok("THINK-CANARY done"))
    with gateway(tmp_path, CLI_MODEL, script, served="claude-primary") as gw:
        run = claude(runtimes, runtime_env, gw, work, "What do my notes say?")
    succeeded(run)
    assert run.answer == "THINK-CANARY done"
    one, two = gw.calls(gw.primary)
    assert [b["signature"] for b in run.assistant_blocks("thinking")] == [fake_signature("primary", one.index + 1)]
    assert next(e for e in run.events if e["type"] == "assistant")["message"]["model"] == "claude-primary"
    assert one.json is not None and two.json is not None
    assert one.json["thinking"]["type"] == "enabled"
    [assistant] = [m for m in two.json["messages"] if m["role"] == "assistant"]
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]
    assert "thinking" not in two.json
