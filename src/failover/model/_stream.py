"""The normalized stream a caller iterates: deltas, tool calls, usage, stop, and the end.

>>> async with router.stream("triage", request, envelope) as s:
...     async for event in s:
...         match event:
...             case TextDelta(text=t): print(t, end="")
...             case ReasoningDelta(text=t): show_thinking(t)
...             case ToolCallDone(call=c): run(c)
...             case PartialOutput(failure=f): warn(f.kind)   # stream cut after output began
...             case Completed(response=r): print(r.record.target_used)

Exactly one terminal event ends every stream: ``Completed`` (the whole Response with its
RouteRecord) or ``PartialOutput`` (output reached the caller and then the attempt failed;
nothing else is spliced on). A failure before any output reached the caller raises
``Unavailable`` from the iteration instead, like ``complete`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._reasoning import Reasoning
from ._record import Failure, Response, RouteRecord, StopReason
from ._request import ToolCall
from ._usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    """A piece of the model's readable reasoning (thinking, or its summary).

    ``index`` numbers the reasoning blocks of this response (0, 1, ...): deltas of one block
    share it. Reasoning is not the answer: until the answer's first text or tool call, these
    events are held back with the rest of the attempt (a failure while the model thinks is an
    ordinary attempt failure), unless the stream was opened with ``live_reasoning=True``.
    """

    index: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDone:
    """A reasoning block is complete: ``block`` holds its whole text and, where the provider
    sent them, its signature or redacted data (what the model needs back in a tool loop)."""

    index: int
    block: Reasoning


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStart:
    index: int  # position of the call in this response
    id: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    index: int
    arguments: str  # a fragment of the JSON arguments; concatenate in order


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDone:
    index: int
    call: ToolCall  # complete; ``call.parsed`` holds the decoded arguments (None if malformed)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdate:
    usage: Usage  # cumulative for the current response


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    reason: StopReason
    raw: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Restarted:
    """A new response begins after a partial one (only when envelope and caller opted in).

    Everything before this event belongs to the abandoned response ``previous_id``; the
    deltas after it belong to ``response_id`` and start from scratch.
    """

    response_id: str
    previous_id: str
    failure: Failure


@dataclass(frozen=True, slots=True, kw_only=True)
class PartialOutput:
    """Terminal: output reached the caller, then the attempt failed. Never a complete answer."""

    text: str  # what was delivered
    tool_calls: tuple[ToolCall, ...]  # calls that were completed before the cut
    failure: Failure  # why it stopped
    record: RouteRecord
    reasoning: tuple[Reasoning, ...] = ()  # reasoning blocks delivered before the cut (the last may be partial)


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed:
    """Terminal: the whole, validated Response, with its RouteRecord."""

    response: Response


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | ReasoningDone
    | ToolCallStart
    | ToolCallDelta
    | ToolCallDone
    | UsageUpdate
    | Stop
    | Restarted
)
Terminal = PartialOutput | Completed
