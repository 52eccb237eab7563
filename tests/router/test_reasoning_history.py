"""Reasoning in the router: the history each target may read, and what a stream shows when."""

from __future__ import annotations

from failover.model import (
    Dialect,
    Failure,
    FailureKind,
    Message,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    StreamEvent,
    Target,
    TextDelta,
    Usage,
    UsageUpdate,
    readable_by,
)
from failover.router._history import readable_history
from failover.router._stream import Output

CLAUDE = "anthropic:claude-x"
SIGNED = Reasoning(text="think", signature="sig-1", source="anthropic", origin=CLAUDE)
CLIENTS = Reasoning(text="client's thinking", signature="sig-2", source="anthropic")
DEEPSEEK = Reasoning(text="chat reasoning", source="openai", origin="openai:deepseek-x")


def _history(*blocks: Reasoning) -> Request:
    return Request(
        messages=(
            Message.user("hi"),
            Message.assistant("calling", reasoning=blocks),
            Message.tool("call_1", "42"),
        )
    )


def test_a_block_goes_back_only_to_the_model_that_wrote_it_or_a_reader_of_its_format() -> None:
    assert readable_by(SIGNED, CLAUDE, "anthropic")
    assert readable_by(SIGNED, CLAUDE, "bedrock")  # the same model on another cloud
    assert not readable_by(SIGNED, "anthropic:claude-other", "anthropic")  # another model
    assert not readable_by(SIGNED, "gemini:g", "gemini")
    assert readable_by(CLIENTS, "anthropic:claude-other", "anthropic")  # origin unknown: by format
    assert not readable_by(CLIENTS, "openai:gpt", "openai")


def test_the_history_keeps_what_the_target_reads_and_counts_what_it_leaves_out() -> None:
    request = _history(SIGNED, CLIENTS, DEEPSEEK)
    same, n = readable_history(request, CLAUDE, "anthropic")
    assert n == 1 and same.messages[1].reasoning == (SIGNED, CLIENTS)
    other, n = readable_history(request, "gemini:g", "gemini")
    assert n == 3 and other.messages[1].reasoning == ()
    assert other.messages[1].text == "calling" and other.messages[0] is request.messages[0]
    assert request.messages[1].reasoning == (SIGNED, CLIENTS, DEEPSEEK)  # the caller's request is untouched


def test_a_history_without_reasoning_is_passed_as_is() -> None:
    request = _history()
    assert readable_history(request, CLAUDE, "anthropic") == (request, 0)
    kept = _history(SIGNED)
    assert readable_history(kept, CLAUDE, "anthropic") == (kept, 0)


def _output(live: bool = False) -> tuple[Output, list[StreamEvent]]:
    seen: list[StreamEvent] = []
    out = Output(seen.append)
    out.source = "anthropic"
    out.upstream = Target(name="c", dialect=Dialect.ANTHROPIC, model="claude-x", base_url="http://c.test/v1")
    assert out.upstream.key == CLAUDE
    if live:
        out.live_reasoning()
    return out, seen


def test_reasoning_waits_for_the_answer_and_a_failure_while_thinking_discards_it() -> None:
    out, seen = _output()
    out.deliver([ReasoningDelta(index=0, text="hmm"), UsageUpdate(usage=Usage(output_tokens=3))])
    assert seen == [] and not out.started
    out.discard_attempt()  # the attempt failed while the model was thinking: nothing was shown
    block = Reasoning(text="let me see", signature="s", source="anthropic")
    out.deliver([ReasoningDelta(index=0, text="let me see"), ReasoningDone(index=0, block=block)])
    assert seen == []
    out.deliver([TextDelta(text="Answer")])
    assert [type(e).__name__ for e in seen] == ["ReasoningDelta", "ReasoningDone", "TextDelta"]
    assert out.started and out.partial_reasoning() == (block,)


def test_live_reasoning_commits_at_the_first_reasoning_event() -> None:
    out, seen = _output(live=True)
    out.deliver([ReasoningDelta(index=0, text="thinking out loud")])
    assert out.started and seen == [ReasoningDelta(index=0, text="thinking out loud")]
    # a cut while the block is open: the caller keeps what it was shown, as a partial block
    # (with its origin: the next request sends it back only to the model that wrote it)
    assert out.partial_reasoning() == (Reasoning(text="thinking out loud", source="anthropic", origin=CLAUDE),)


def test_an_answer_of_reasoning_only_is_flushed_before_the_end() -> None:
    out, seen = _output()
    block = Reasoning(text="nothing to add", source="openai")
    out.deliver([ReasoningDelta(index=0, text="nothing to add"), ReasoningDone(index=0, block=block)])
    assert seen == []
    out.flush()
    assert [type(e).__name__ for e in seen] == ["ReasoningDelta", "ReasoningDone"] and out.started


def test_a_restart_forgets_the_reasoning_shown_before() -> None:
    out, _ = _output(live=True)
    out.deliver([ReasoningDelta(index=0, text="a")])
    out.restart(Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message="cut"))
    assert out.partial_reasoning() == () and not out.started
