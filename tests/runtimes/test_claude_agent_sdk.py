"""The Claude Agent SDK (PyPI ``claude-agent-sdk`` 0.2.189, which drives the Claude Code CLI it
bundles, 2.1.332) at its DEFAULT options against a real ``failover serve`` whose upstreams are
fake Anthropic providers.

``query(prompt, options=ClaudeAgentOptions(env=..., cwd=...))``: ``env`` only says where to
send requests (``ANTHROPIC_BASE_URL`` the gateway, the tenant key as ``ANTHROPIC_API_KEY``)
on top of the clean ``runtime_env``; everything else is the SDK's and its CLI's default (its
retries, timeouts, permission mode, tools, thinking; it asks for ``claude-opus-5-5``, so the
gateway's route has that name). Each test checks the messages ``query`` yielded (and what it
raised), how many requests reached each fake upstream, and the gateway's RouteRecord of each
request (the lab's live view). Set-up: tests/runtimes/_anthropic_side.py.

What the SDK's CLI does that the gateway must live with, as these tests found it:

- an error answer is not retried: the gateway's ``529`` with ``x-should-retry: false`` ends the
  run (one request; the CLI that ``npm`` installs, 2.1.197, retries the same 529 twice);
  ``query`` yields the error as the result (``is_error``) and then raises ``ResultError``;
- a stream that ends in an ``error`` event after output began (the gateway's
  ``partial_output`` when an upstream stream is cut past the commit point) is thrown away,
  never yielded, and the turn is asked again ONCE without a stream, which the gateway answers
  whole: the caller gets one clean answer;
- thinking blocks go back with their signatures, byte for byte, on a message whose ``model``
  is the model the CLI asked for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from failover.testing import Reply, Script
from tests.runtimes._anthropic_side import (
    BACKUP_MODEL,
    SDK_MODEL,
    Gateway,
    Run,
    fake_signature,
    gateway,
    long_answer,
    ok,
    run_agent_sdk,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

NOTES = "NOTES-CANARY 9051 the invoice is overdue\n"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The agent's working directory (its ``cwd``), with the file the tool loops read."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.txt").write_text(NOTES)
    return path


def agent(env: dict[str, str], gw: Gateway, work: Path, prompt: str = "say hi") -> Run:
    return run_agent_sdk(env, gw, prompt, work)


def succeeded(run: Run) -> None:
    assert run.error is None, run.describe()
    assert run.result["subtype"] == "success" and run.result["is_error"] is False, run.describe()


def models(run: Run) -> list[str]:
    """The model of each assistant message the SDK yielded."""
    return [e["message"]["model"] for e in run.events if e["type"] == "assistant"]


def test_a_plain_prompt_is_answered_by_the_primary(runtime_env: dict[str, str], work: Path, tmp_path: Path) -> None:
    """One prompt, one request: ``query`` yields the primary's words unchanged, under the
    model name the CLI asked for, and the gateway's record of that request is the direct path."""
    with gateway(tmp_path, SDK_MODEL, ok("PLAIN-CANARY hello from the primary")) as gw:
        run = agent(runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    assert run.answer == "PLAIN-CANARY hello from the primary"
    assert [b["text"] for b in run.assistant_blocks("text")] == [run.answer]
    assert models(run) == [SDK_MODEL]
    assert gw.counts() == {"primary": 1, "backup": 0}
    assert gw.calls(gw.primary)[0].model == SDK_MODEL
    assert [(r["route"], r["status"], r["stream"], r["workflow"]) for r in records] == [
        (SDK_MODEL, 200, True, "direct")
    ]
    assert gw.attempts(records[0]) == [("primary", "ok", 200)]
    assert run.retries() == []


def test_a_tool_loop_reads_a_file_and_sends_its_content_back(
    runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """Turn one asks for ``Read`` of a file in ``cwd`` (a read-only tool, allowed at the default
    permission mode with no ``can_use_tool``); the CLI runs it, the SDK yields the call and
    its result, and turn two carries the ``tool_result`` with the file's content to the
    upstream; the final answer is turn two's text."""
    notes = str(work / "notes.txt")
    script = Script.of(ok("Reading the notes.", tool_calls=[("Read", {"file_path": notes})]), ok("TOOL-CANARY done"))
    with gateway(tmp_path, SDK_MODEL, script) as gw:
        run = agent(runtime_env, gw, work, "What do my notes say?")
        records = gw.records()
    succeeded(run)
    assert run.answer == "TOOL-CANARY done"
    assert run.result["num_turns"] == 2
    [call] = run.assistant_blocks("tool_use")
    assert (call["name"], call["input"]) == ("Read", {"file_path": notes})
    [yielded] = [b for e in run.events if e["type"] == "user" for b in e["message"]["content"]]
    assert (yielded["type"], yielded["tool_use_id"]) == ("tool_result", call["id"])
    assert NOTES.strip() in str(yielded["content"])
    assert gw.counts() == {"primary": 2, "backup": 0}
    second = gw.calls(gw.primary)[1].json
    assert second is not None
    assistant, results = second["messages"][-2:]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    assert assistant["content"][1]["id"] == call["id"]
    [result] = [b for b in results["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == call["id"]
    assert NOTES.strip() in str(result["content"])
    assert [(r["workflow"], r["status"]) for r in records] == [("direct", 200), ("direct", 200)]


@pytest.mark.parametrize(
    ("dialect", "status"), [("anthropic", 529), ("openai", 503)], ids=["529 overloaded", "503 overloaded"]
)
def test_an_overloaded_primary_falls_back_unseen(
    runtime_env: dict[str, str], work: Path, tmp_path: Path, dialect: str, status: int
) -> None:
    """The primary answers every call overloaded (Anthropic's 529; an OpenAI-compatible
    primary's 503): the gateway replays it once (two attempts, the default), then its approved
    fallback answers inside ONE request; ``query`` yields the fallback's answer, no error, no
    retry, and the message names the fallback's model."""
    with gateway(
        tmp_path, SDK_MODEL, Script.always(Reply.overloaded()), ok("BACKUP-CANARY hello"), primary_dialect=dialect
    ) as gw:
        run = agent(runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    record = gw.fell_back(run, records, primary_calls=2)
    assert models(run) == [BACKUP_MODEL]
    assert [c.status for c in gw.calls(gw.primary)] == [status, status]
    assert (record["status"], record["workflow"], record["recovered"], record["target_used"]) == (
        200,
        "fallback",
        True,
        "backup",
    )
    overloaded = ("primary", "provider_overloaded", status)
    assert gw.attempts(record) == [overloaded, overloaded, ("backup", "ok", 200)]


def test_a_primary_rate_limited_for_20_s_is_not_waited_for(
    runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """429 with ``retry-after: 20``: the fallback answers at once inside ONE request, the
    primary is not asked again, and the record says why."""
    with gateway(tmp_path, SDK_MODEL, Script.always(Reply.rate_limit(retry_after=20)), ok("BACKUP-CANARY hello")) as gw:
        run = agent(runtime_env, gw, work)
        records = gw.records()
    succeeded(run)
    record = gw.fell_back(run, records, primary_calls=1)
    assert gw.attempts(record) == [("primary", "rate_limited", 429), ("backup", "ok", 200)]
    assert record["waits"] == [] and [e["code"] for e in record["excluded"]] == ["no_replay"]


def test_without_the_fallback_the_overload_ends_the_run_with_a_result_error(
    runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The same 529s with the fallback taken off the route (the rescue broken on purpose): the
    gateway answers 529 ``x-should-retry: false`` after its two attempts, and the SDK's CLI
    does not ask again: ONE gateway request, two calls to the primary. ``query`` yields the
    error as an ``is_error`` result naming the gateway's code, then raises ``ResultError``."""
    with gateway(tmp_path, SDK_MODEL, Script.always(Reply.overloaded()), fallback=False) as gw:
        run = agent(runtime_env, gw, work)
        records = gw.records()
    assert run.error is not None and run.error.startswith("ResultError"), run.describe()
    assert run.result["is_error"] is True and run.result["api_error_status"] in (529, None)
    assert "529" in run.answer and "provider_overloaded" in run.answer
    assert run.retries() == []
    assert gw.counts() == {"primary": 2, "backup": 0}
    [record] = records
    assert (record["status"], record["outcome"]) == (529, "provider_overloaded")
    assert gw.attempts(record) == [("primary", "provider_overloaded", 529)] * 2


def test_a_stream_cut_before_the_commit_point_is_replaced_unseen(
    runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The primary's stream is cut after 3 events, far inside the commit point (100 tokens):
    nothing of it was shown, so the gateway replays the primary and ``query`` yields ONE clean
    answer, the replay's, word for word (no ``p`` word of the cut attempt, nothing twice)."""
    cut = Reply.drop_after(3, text=long_answer("p"), chunk_interval=0.001)
    with gateway(tmp_path, SDK_MODEL, Script.of(cut, default=ok(long_answer("q")))) as gw:
        run = agent(runtime_env, gw, work)
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


def test_a_stream_cut_after_the_commit_point_ends_in_an_error_and_the_cli_asks_again(
    runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """The primary's stream is cut after 150 events, past the commit point: the CLI was already
    sent about 140 words, so the gateway cannot rescue without a splice and ends the stream
    with an ``error`` event (``partial_output``). The CLI throws the partial message away
    (``query`` never yields it) and asks again once, without a stream; that request the
    gateway answers whole. The caller gets the second answer alone: no ``p`` word of the cut
    stream, nothing spliced or twice."""
    cut = Reply.drop_after(150, text=long_answer("p"), chunk_interval=0.001)
    with gateway(tmp_path, SDK_MODEL, Script.of(cut, default=ok(long_answer("q")))) as gw:
        run = agent(runtime_env, gw, work)
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
    runtime_env: dict[str, str], work: Path, tmp_path: Path
) -> None:
    """Turn one is a signed ``thinking`` block then a ``Read`` call; ``query`` yields the block
    with its signature, the CLI sends it back in turn two, and the gateway passes it to the
    primary as the primary wrote it: the same text, the same signature, byte for byte, before
    the ``tool_use``."""
    notes = str(work / "notes.txt")
    thought = "The user wants the notes; I should read notes.txt first."
    first = ok(None, reasoning=thought, tool_calls=[("Read", {"file_path": notes})])
    with gateway(tmp_path, SDK_MODEL, Script.of(first, ok("THINK-CANARY done"))) as gw:
        run = agent(runtime_env, gw, work, "What do my notes say?")
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
