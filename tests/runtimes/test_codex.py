"""The Codex CLI (npm @openai/codex, pinned in scripts/runtimes.sh) at its DEFAULT settings,
``codex exec --json`` through a real ``failover serve`` over fault-kit Responses upstreams.

Only what points Codex at the gateway is configured (see _openai_side): its request retries
(``request_max_retries`` 4), stream retries (``stream_max_retries`` 5), timeouts, sandbox
(``exec`` runs read-only commands in its sandbox without asking), approvals and reasoning
settings are its own defaults. Codex offers the hosted ``web_search`` tool on every turn, so
the fake answers each request with a ``web_search_call`` item before its own output, as the
real API does when the model searched; Codex prints it as a ``web_search`` item.

What each test proves, from what Codex printed (its JSONL events), how many requests reached
each fake upstream, and the gateway's access record of each request (its RouteRecord: the
target that answered, attempts, workflow):

* a plain prompt is answered by the primary in one request;
* a tool loop: the model runs ``cat note.txt`` through Codex's ``exec_command`` tool, Codex
  runs it in its sandbox and the second request carries the command's output;
* 429 / 503 / 500 from the primary: the gateway falls back, Codex sees one clean answer and
  retries nothing;
* a stream cut before the commit point is replaced unseen; a stream cut after it reaches
  Codex as an error event, and Codex re-sends the turn by itself (a stream retry): the final
  message is one whole answer, never the cut text spliced to another;
* a reasoning item's ``encrypted_content`` goes back upstream intact on the next turn;
* when no rescue is possible, Codex's own retries (request and stream) go on top of the
  gateway's: it does not read ``x-should-retry: false``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from failover.testing import Reply, Script

from ._openai_side import CodexRun, Gateway, after_words, gateway, run_codex, words

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

NOTE = "the note says 7\n"


@pytest.fixture
def codex(runtimes: Path) -> Path:
    return runtimes / "node_modules/.bin/codex"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text(NOTE)
    return work


def answered(run: CodexRun) -> None:
    """Codex ended its turn normally."""
    assert run.returncode == 0, run
    assert [e["type"] for e in run.events][-1] == "turn.completed", run


def tail(body: dict[str, Any]) -> list[dict[str, Any]]:
    """What a request carries after the two user messages Codex starts every turn with
    (its environment context and the prompt)."""
    items: list[dict[str, Any]] = body["input"]
    users = [i for i, item in enumerate(items) if item.get("role") == "user"]
    return items[max(users) + 1 :]


def test_a_plain_prompt_is_answered_by_the_primary(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    answer = "Hello from model a, the answer is 42."
    with gateway(tmp_path, [Reply.ok(answer)]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "Say hello")
        answered(run)
        assert run.messages == [answer], run
        assert run.failures == [], run
        assert (gw.count(gw.a), gw.count(gw.b)) == (1, 0)
        assert gw.summary(1) == [(200, "a", 1, "direct")]
        (body,) = gw.sent(gw.a)
        assert body["model"] == "model-a" and body["stream"] is True  # the route's target, streamed
        assert [i["content"][0]["text"] for i in body["input"] if i.get("role") == "user"][-1] == "Say hello"


def test_a_tool_loop_runs_the_command_in_codexs_sandbox_and_sends_its_output_back(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    script = [Reply.ok(tool_calls=[("exec_command", {"cmd": "cat note.txt"})]), Reply.ok("The note says 7.")]
    with gateway(tmp_path, script) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "What does note.txt say?")
        answered(run)
        (command,) = run.items("command_execution")
        assert "cat note.txt" in command["command"]
        assert (command["exit_code"], command["aggregated_output"]) == (0, NOTE)
        assert run.messages == ["The note says 7."], run
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)
        assert gw.summary(2) == [(200, "a", 1, "direct")] * 2

        first, second = gw.sent(gw.a)
        assert "exec_command" in [t.get("name") for t in first["tools"]]
        call, output = tail(second)
        assert (call["type"], call["name"]) == ("function_call", "exec_command")
        assert call["arguments"] == '{"cmd":"cat note.txt"}'
        assert (output["type"], output["call_id"]) == ("function_call_output", call["call_id"])
        assert output["output"].endswith(f"Output:\n{NOTE}")  # the command's real output


@pytest.mark.parametrize(
    "failure",
    [Reply.rate_limit(), Reply.overloaded(), Reply.server_error()],
    ids=["429", "503", "500"],
)
def test_an_unavailable_primary_is_replaced_by_the_fallback(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path, failure: Reply
) -> None:
    with gateway(tmp_path, Script.always(failure), [Reply.ok("Hello from model b.")]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "Say hello")
        answered(run)
        assert run.messages == ["Hello from model b."], run
        assert run.failures == [], run  # nothing reached Codex to retry
        # the gateway: a first try and one replay on a, then the approved fallback
        assert gw.a.kinds == [failure.kind.value] * 2
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 1)
        assert gw.summary(1) == [(200, "b", 3, "fallback")]
        assert gw.sent(gw.b)[0]["model"] == "model-b"


def test_a_primary_rate_limited_for_20_s_is_not_waited_for(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    """429 with ``retry-after: 20``: the fallback answers at once, a is not asked again."""
    with gateway(tmp_path, Script.always(Reply.rate_limit(retry_after=20)), [Reply.ok("Hello from model b.")]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "Say hello")
        answered(run)
        assert run.messages == ["Hello from model b."], run
        assert run.failures == [], run
        assert gw.a.kinds == ["rate_limit"]
        assert (gw.count(gw.a), gw.count(gw.b)) == (1, 1)
        assert gw.summary(1) == [(200, "b", 2, "fallback")]


def test_a_stream_cut_before_the_commit_point_is_replaced_unseen(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    cut = Reply.drop_after(after_words(3, web_search=True), text=words("a", 200))  # 3 words in
    with gateway(tmp_path, Script.always(cut), [Reply.ok(words("b", 200))]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "Say many words")
        answered(run)
        assert run.messages == [words("b", 200)], run  # b's answer, whole, nothing of a's
        assert run.failures == [], run
        assert [c.events_sent for c in gw.a.calls] == [after_words(3, web_search=True)] * 2  # both cut early
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 1)
        assert gw.summary(1) == [(200, "b", 3, "fallback")]


def test_a_stream_cut_after_the_commit_point_is_retried_by_codex_and_the_answer_is_whole(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    """150 words (about 190 tokens) have gone out when a's stream drops: the gateway cannot
    replace it without a splice, so it ends the stream with an error event (``partial_output``).
    Codex drops the partial message, says "Reconnecting... 1/5" and sends the turn again; the
    gateway routes that request afresh and a answers it whole."""
    late = after_words(150, web_search=True)
    script = Script.of(Reply.drop_after(late, text=words("a", 200)), default=Reply.ok(words("r", 200)))
    with gateway(tmp_path, script, [Reply.ok(words("b", 200))]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "Say many words")
        answered(run)
        assert run.messages == [words("r", 200)], run  # the retry's answer alone: no a000..a149 before it
        (notice,) = run.failures
        assert notice.startswith("Reconnecting... 1/5") and "partial_output" in notice, run
        assert gw.a.calls[0].events_sent == late  # the cut came after the commit point
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)  # the gateway did not fall back mid-stream
        assert gw.summary(2) == [(200, None, 1, "stop"), (200, "a", 1, "direct")]
        assert gw.access()[0]["note"].startswith("partial_output")


def test_a_stream_cut_late_every_time_fails_the_turn_after_codexs_five_reconnects(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    """Codex's stream retries (``stream_max_retries`` 5 by default) are all it has: each is a new
    request the gateway routes afresh, each cut after the commit point again. Codex then fails
    the turn (exit 1) and prints no partial message at all."""
    cut = Reply.drop_after(after_words(150, web_search=True), text=words("a", 200))
    with gateway(tmp_path, Script.always(cut), [Reply.ok(words("b", 200))]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "Say many words")
        assert run.returncode == 1, run
        assert run.events[-1]["type"] == "turn.failed", run
        assert run.messages == [], run  # nothing of the cut answers is shown as an answer
        reconnects = [m for m in run.failures if m.startswith("Reconnecting...")]
        assert [m.split()[1] for m in reconnects] == [f"{n}/5" for n in range(1, 6)], run
        assert all("partial_output" in m for m in run.failures), run
        assert (gw.count(gw.a), gw.count(gw.b)) == (6, 0)
        assert gw.summary(6) == [(200, None, 1, "stop")] * 6


def test_a_reasoning_items_encrypted_content_goes_back_upstream_intact(
    codex: Path, runtime_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    thought = Reply.ok(reasoning="Read the note first.", tool_calls=[("exec_command", {"cmd": "cat note.txt"})])
    with gateway(tmp_path, [thought, Reply.ok("The note says 7.")]) as gw:
        run = run_codex(codex, runtime_env, gw, workdir, "What does note.txt say?")
        answered(run)
        assert [i["text"] for i in run.items("reasoning")] == ["Read the note first."]
        assert run.messages == ["The note says 7."], run
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)
        assert gw.summary(2) == [(200, "a", 1, "direct")] * 2

        first, second = gw.sent(gw.a)
        assert first["include"] == ["reasoning.encrypted_content"]  # Codex asks for it; it reaches a
        given = encrypted(gw, 0)
        reasoning, call, output = tail(second)
        assert reasoning["type"] == "reasoning"
        assert reasoning["encrypted_content"] == given  # byte for byte what a sent
        assert reasoning["summary"] == [{"type": "summary_text", "text": "Read the note first."}]
        assert (call["type"], output["type"]) == ("function_call", "function_call_output")


def encrypted(gw: Gateway, index: int) -> str:
    """The ``encrypted_content`` the fake gave in its answer to call ``index`` of ``a``: its
    signature of that response (``failover-fake-thinking:<provider>:<response id>``, base64)."""
    return base64.b64encode(f"failover-fake-thinking:a:resp_a_{index + 1}".encode()).decode()
