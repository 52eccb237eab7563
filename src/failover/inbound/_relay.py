"""The events a client is sent of one streamed answer, so that it can never assemble another answer
than the one failover records.

A client assembles its answer from the pieces it is sent (text deltas, reasoning deltas, a tool
call's id and name, then argument fragments); failover records the answer its dialect parser
finished (the ``Completed`` Response). The two must be equal: text, reasoning, every tool call's
id, name and arguments, in order. A :class:`Relay` sits between the router's stream and one
client's format (the Chat Completions chunks, the Messages events, each framework adapter): fed
the router's events, it gives back the events to show, in a shape every format can follow:

- reasoning blocks one after another, in index order (a Chat Completions client joins their
  text; an Anthropic client keeps their order): the events of a later block wait until every
  earlier one is finished;
- tool calls started in index order (the openai SDK files a new index at the end of its list),
  each with a ``ToolCallStart`` before its fragments (a call given whole becomes a start, one
  fragment and its done);
- a ``ReasoningDone`` / ``ToolCallDone`` only after deltas that add up to its text or
  arguments: when the final value extends what was sent, the rest goes out as one more delta;
- at the end (:meth:`Relay.end`), every block or call left open or waiting is finished with the
  answer's own, and what the answer holds that was never sent (a block, the text, a call) goes
  out whole.

A final value that does NOT extend what the client already holds cannot be sent any more (a
stream cannot take a piece back): that raises :class:`RelayMismatch`, and the server ends the
stream with an error event instead of letting the client keep an answer failover did not record.

Text is kept as its length and a CRC-32 (a relay passes every delta on and keeps no second copy
of the text); a reasoning block's text and a tool call's arguments are kept while they are open.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..model import (
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    Restarted,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    UsageUpdate,
)

__all__ = ["Relay", "RelayMismatch", "mismatch_message"]

T = TypeVar("T")
_REASONING = (ReasoningDelta, ReasoningDone)
_CALL = (ToolCallStart, ToolCallDelta, ToolCallDone)


class RelayMismatch(Exception):
    """The answer failover finished differs from what the client was already sent, in a way no
    further piece can mend (the arguments of a call, a block's text or the text changed under
    it). The message names the part, never its content (it may hold the user's data)."""


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    done: ToolCall | None = None


class Relay:
    """The events one client is shown of one answer (see the module docstring): :meth:`feed`
    per router event, :meth:`end` with the finished answer. Both raise :class:`RelayMismatch`
    when the client could no longer end with the recorded answer."""

    __slots__ = ("_calls", "_calls_next", "_held", "_text_crc", "_text_len", "_thinking", "_thought", "_thought_next")

    def __init__(self) -> None:
        self._text_len = 0
        self._text_crc = 0
        self._thinking: dict[int, list[str]] = {}  # reasoning block index -> text sent, while open
        self._thought: dict[int, Reasoning] = {}  # reasoning block index -> the finished block
        self._thought_next = 0  # the first reasoning block not finished yet
        self._calls: dict[int, _Call] = {}
        self._calls_next = 0  # the first tool call not started yet
        self._held: list[StreamEvent] = []  # a later block's or call's events, waiting for an earlier one

    @property
    def text_sent(self) -> bool:
        """Whether the client was sent any text (else a format may show another rendering of
        the answer, e.g. structured output, at the end)."""
        return self._text_len > 0

    # -- the stream ---------------------------------------------------------------------------------

    def sent_text(self, text: str) -> bool:
        """Count a text delta as shown (the hot path: a renderer may call it for a TextDelta
        instead of :meth:`feed`); False for an empty one, which is not shown."""
        if not text:
            return False
        self._text_len += len(text)
        self._text_crc = zlib.crc32(text.encode("utf-8", "surrogatepass"), self._text_crc)
        return True

    def feed(self, event: object) -> list[StreamEvent]:
        """The events to show for one router event (none while it waits; more when it lets
        waiting events out or completes a call or block). Events a relay does not order (usage,
        stop, restarts) pass through; anything else (a terminal event) is not shown."""
        if isinstance(event, TextDelta):
            return [event] if self.sent_text(event.text) else []
        if isinstance(event, _REASONING):
            if event.index > self._next_reasoning():
                self._held.append(event)
                return []
            if isinstance(event, ReasoningDelta):
                return self._thinking_delta(event)
            return self._finish_reasoning(event)
        if isinstance(event, _CALL):
            if event.index > self._next_call():
                self._held.append(event)
                return []
            if isinstance(event, ToolCallStart):
                if event.index in self._calls:
                    return []
                self._calls[event.index] = _Call(event.id, event.name)
                return [event, *self._released()]
            if isinstance(event, ToolCallDelta):
                return self._arguments(event)
            return self._finish_call(event)
        return [event] if isinstance(event, UsageUpdate | Stop | Restarted) else []

    def _released(self) -> list[StreamEvent]:
        """An earlier block finished or call started: the events that waited, in their order."""
        if not self._held:
            return []
        held, self._held = self._held, []
        out: list[StreamEvent] = []
        for event in held:
            out += self.feed(event)
        return out

    def _next_reasoning(self) -> int:
        while self._thought_next in self._thought:
            self._thought_next += 1
        return self._thought_next

    def _next_call(self) -> int:
        while self._calls_next in self._calls:
            self._calls_next += 1
        return self._calls_next

    def _thinking_delta(self, event: ReasoningDelta) -> list[StreamEvent]:
        if event.index in self._thought:
            raise RelayMismatch(f"reasoning block {event.index} got more text after it was finished")
        if not event.text:
            return []
        self._thinking.setdefault(event.index, []).append(event.text)
        return [event]

    def _finish_reasoning(self, event: ReasoningDone) -> list[StreamEvent]:
        index, block = event.index, event.block
        before = self._thought.get(index)
        if before is not None:
            if before != block:
                raise RelayMismatch(f"reasoning block {index} was finished twice, differently")
            return []
        sent = "".join(self._thinking.pop(index, ()))
        if not block.text.startswith(sent):
            raise RelayMismatch(f"reasoning block {index}'s text differs from the deltas the client was sent")
        self._thought[index] = block
        rest = block.text[len(sent) :]
        out: list[StreamEvent] = [ReasoningDelta(index=index, text=rest)] if rest else []
        return [*out, event, *self._released()]

    def _arguments(self, event: ToolCallDelta) -> list[StreamEvent]:
        call = self._calls.get(event.index)
        if call is None:
            return []  # fragments of a call not started: the client gets it whole when it finishes
        if call.done is not None:
            raise RelayMismatch(f"tool call {event.index} got more arguments after it was finished")
        if not event.arguments:
            return []
        call.parts.append(event.arguments)
        return [event]

    def _finish_call(self, event: ToolCallDone) -> list[StreamEvent]:
        index, c = event.index, event.call
        out: list[StreamEvent] = []
        sent = self._calls.get(index)
        if sent is None:  # a dialect that gave the call whole
            sent = self._calls[index] = _Call(c.id, c.name)
            out.append(ToolCallStart(index=index, id=c.id, name=c.name))
        elif sent.done is not None:
            if _shown(sent.done) != _shown(c):
                raise RelayMismatch(f"tool call {index} was finished twice, differently")
            return []
        if (sent.id, sent.name) != (c.id, c.name):
            raise RelayMismatch(f"tool call {index}'s id or name differs from the one the client was sent")
        so_far = "".join(sent.parts)
        if not c.arguments.startswith(so_far):
            raise RelayMismatch(
                f"tool call {index} ({c.name}): its arguments differ from the fragments the client was sent"
            )
        sent.parts = [c.arguments]
        sent.done = c
        if len(c.arguments) > len(so_far):
            out.append(ToolCallDelta(index=index, arguments=c.arguments[len(so_far) :]))
        return [*out, event, *self._released()]

    # -- the end ------------------------------------------------------------------------------------

    def end(self, resp: Response) -> list[StreamEvent]:
        """The events that finish the answer for the client: every block or call left open or
        waiting, finished with ``resp``'s own; then what ``resp`` holds that was never sent.
        Everything sent is checked against ``resp``."""
        out: list[StreamEvent] = []
        while True:
            open_calls = sorted(i for i, c in self._calls.items() if c.done is None)
            if self._thinking or any(isinstance(e, _REASONING) for e in self._held):
                i = self._next_reasoning()
                out += self.feed(ReasoningDone(index=i, block=_nth(resp.reasoning, i, "reasoning block")))
            elif open_calls or self._held:
                i = open_calls[0] if open_calls else self._next_call()
                out += self.feed(ToolCallDone(index=i, call=_nth(resp.tool_calls, i, "tool call")))
            else:
                break
        for i, block in _unsent(self._thought, resp.reasoning, "reasoning block"):
            out += self.feed(ReasoningDone(index=i, block=block))
        if not self._text_len:
            if resp.text:
                out += self.feed(TextDelta(text=resp.text))
        elif self._text_len != len(resp.text) or self._text_crc != zlib.crc32(
            resp.text.encode("utf-8", "surrogatepass")
        ):
            raise RelayMismatch("the answer's text differs from the text deltas the client was sent")
        shown = {i: _shown(c.done) for i, c in self._calls.items()}
        for i, _ in _unsent(shown, [_shown(c) for c in resp.tool_calls], "tool call"):
            out += self.feed(ToolCallDone(index=i, call=resp.tool_calls[i]))
        return out


def _shown(call: ToolCall | None) -> tuple[str, str, str] | None:
    """What a client assembles of a call: its id, name and arguments (not failover's parse of them)."""
    return None if call is None else (call.id, call.name, call.arguments)


def _nth(items: Sequence[T], index: int, what: str) -> T:
    if 0 <= index < len(items):
        return items[index]
    raise RelayMismatch(f"the client was sent {what} {index}, which the answer does not hold")


def _unsent(sent: Mapping[int, T | None], final: Sequence[T], what: str) -> list[tuple[int, T]]:
    """Items of ``final`` by position: those sent must be equal, those never sent are returned."""
    extra = [i for i in sent if not 0 <= i < len(final)]
    if extra:
        raise RelayMismatch(f"the client was sent {what} {extra[0]}, which the answer does not hold")
    out: list[tuple[int, T]] = []
    for i, item in enumerate(final):
        if i not in sent:
            out.append((i, item))
        elif sent[i] != item:
            raise RelayMismatch(f"{what} {i} differs from the one the client was sent")
    return out


def mismatch_message(exc: RelayMismatch, request_id: str) -> str:
    """The error event's message when the finished answer differs from what a stream sent."""
    return (
        f"stream_mismatch: the answer failover finished differs from what this stream already sent ({exc}); "
        f"the stream ends here so that no client keeps an answer failover did not record (request id {request_id})"
    )
