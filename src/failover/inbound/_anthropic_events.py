"""A streamed answer as Anthropic's named server-sent events (:class:`EventRenderer`), as
``(event name, data)`` pairs."""

from __future__ import annotations

from typing import Any, Literal

from ..model import (
    Completed,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
)
from ._anthropic_message import answer_text, error_body, stop_details, stop_reason, usage_body
from ._anthropic_signature import client_signature
from ._placing import OneOpenBlock
from ._relay import Relay
from ._wire import record_summary

Event = tuple[str, dict[str, Any]]


class _Block:
    """The content block now open: a text, a tool_use (``key`` = the call's index) or a thinking
    block (``key`` = the reasoning block's index). A tool_use or thinking block is never
    interrupted: events of other blocks wait until it is finished."""

    __slots__ = ("index", "key", "kind")

    def __init__(self, index: int, kind: Literal["text", "tool", "thinking"], key: int = -1) -> None:
        self.index = index
        self.kind = kind
        self.key = key


class EventRenderer(OneOpenBlock):
    """Server-sent events of one streamed message, as ``(event name, data)`` pairs.

    ``start()`` gives ``message_start`` and a ``ping``; ``render(event)`` turns failover's
    stream events into ``content_block_start`` / ``content_block_delta`` (``text_delta``,
    ``thinking_delta`` and ``signature_delta``, ``input_json_delta``) / ``content_block_stop``;
    ``end(completed)`` closes the open block and gives ``message_delta`` (stop_reason, usage) and
    ``message_stop``; ``error(...)`` is the ``error`` event that ends a stream cut after output
    began.

    Content blocks are sequential, as Anthropic's are: a tool_use or thinking block that has not
    finished is never interrupted. A dialect that interleaves parallel calls (OpenAI), or text
    with a reasoning block it has not finished, has the other blocks' events held until the
    open one finishes; a dialect that gives a call whole (Gemini) becomes one block with one
    ``input_json_delta``. A reasoning block is a ``thinking`` block (its signature as
    :func:`client_signature` gives it, in one ``signature_delta`` before it stops) or a
    ``redacted_thinking`` block.

    The events pass through a :class:`~failover.inbound._relay.Relay` first, so what the client
    assembles always equals the answer failover records: an answer that no longer matches what
    was sent raises :class:`~failover.inbound.RelayMismatch` (the server ends the stream with an
    error event).

    >>> r = EventRenderer("msg_1", "chat")
    >>> [name for name, _ in r.start() + r.render(TextDelta(text="Hi"))]
    ['message_start', 'ping', 'content_block_start', 'content_block_delta']
    """

    TEXT = "text"
    REASONING = "thinking"
    TOOL = "tool"

    def __init__(self, message_id: str, model: str, *, request_id: str | None = None) -> None:
        self.message_id = message_id
        self.model = model
        self.request_id = request_id  # shown in x_failover when the response has no record
        self.relay = Relay()
        self._blocks = 0  # blocks started so far: the next block's index
        self._open: _Block | None = None
        self._answer_blocks = 0  # text and tool_use blocks started (not thinking)
        self._held: list[StreamEvent] = []  # events waiting for the open tool_use / thinking block
        self._usage = Usage()

    # -- the frame ----------------------------------------------------------------------------

    def start(self) -> list[Event]:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_body(self._usage),
        }
        return [("message_start", {"type": "message_start", "message": message}), ("ping", {"type": "ping"})]

    def end(self, completed: Completed) -> list[Event]:
        resp = completed.response
        out: list[Event] = []
        for e in self.relay.end(resp):  # every block finished: nothing waits after this
            out += self._place(e)
        out.extend(self._close())
        if not self.relay.text_sent:
            text = "" if resp.tool_calls else answer_text(resp)  # structured output or a refusal without text
            # an answer with no text or tool_use block still has one (empty) text block, as Anthropic's does
            if text or not self._answer_blocks:
                out.extend(self._open_text())
                if text:
                    out.append(self._text_delta(text))
                out.extend(self._close())
        delta: dict[str, Any] = {"stop_reason": stop_reason(resp), "stop_sequence": None}
        details = stop_details(resp)
        if details is not None:
            delta["stop_details"] = details
        message_delta = {
            "type": "message_delta",
            "delta": delta,
            "usage": usage_body(resp.usage),
            "x_failover": record_summary(resp, self.request_id),
        }
        out.append(("message_delta", message_delta))
        out.append(("message_stop", {"type": "message_stop"}))
        return out

    def error(self, message: str, *, type: str = "api_error", code: str | None = None) -> list[Event]:
        """The ``error`` event that ends a stream after output began (never a splice)."""
        return [("error", error_body(500, message, type=type, code=code, request_id=self.request_id))]

    # -- events -------------------------------------------------------------------------------

    def render(self, event: object) -> list[Event]:
        open_block = self._open
        if type(event) is TextDelta and (open_block is None or open_block.kind == "text"):
            # the hot path: a text delta with no tool_use or thinking block open
            if not self.relay.sent_text(event.text):
                return []
            return (
                [self._text_delta(event.text)]
                if open_block is not None
                else [*self._open_text(), self._text_delta(event.text)]
            )
        return self._placed(event)

    def _event(self, event: StreamEvent) -> list[Event]:
        if isinstance(event, TextDelta):
            out = [] if self._open is not None else self._open_text()
            return [*out, self._text_delta(event.text)]
        if isinstance(event, ReasoningDelta):
            out = [] if self._open is not None and self._open.kind == "thinking" else self._open_thinking(event.index)
            return [*out, self._delta({"type": "thinking_delta", "thinking": event.text})]
        if isinstance(event, ReasoningDone):
            block = event.block
            if block.redacted is not None:  # never had deltas: a block of its own, start and stop
                closed = self._close()
                start = self._start("thinking", {"type": "redacted_thinking", "data": block.redacted}, event.index)
                return [*closed, start, *self._released()]
            out = [] if self._open is not None and self._open.kind == "thinking" else self._open_thinking(event.index)
            signature = {"type": "signature_delta", "signature": client_signature(block)}
            return [*out, self._delta(signature), *self._released()]
        if isinstance(event, ToolCallStart):
            closed = self._close()
            tool_use = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            return [*closed, self._start("tool", tool_use, event.index)]
        if isinstance(event, ToolCallDelta):
            return [self._delta({"type": "input_json_delta", "partial_json": event.arguments})]
        if isinstance(event, ToolCallDone):
            return self._released()
        return []

    # -- blocks -------------------------------------------------------------------------------

    def _start(self, kind: Literal["text", "tool", "thinking"], content_block: dict[str, Any], key: int = -1) -> Event:
        index = self._blocks
        self._blocks += 1
        self._open = _Block(index, kind, key)
        if kind != "thinking":
            self._answer_blocks += 1
        return ("content_block_start", {"type": "content_block_start", "index": index, "content_block": content_block})

    def _delta(self, delta: dict[str, Any]) -> Event:
        assert self._open is not None
        return ("content_block_delta", {"type": "content_block_delta", "index": self._open.index, "delta": delta})

    def _open_text(self) -> list[Event]:
        closed = self._close()
        return [*closed, self._start("text", {"type": "text", "text": ""})]

    def _open_thinking(self, index: int) -> list[Event]:
        closed = self._close()
        return [*closed, self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""}, index)]

    def _text_delta(self, text: str) -> Event:
        return self._delta({"type": "text_delta", "text": text})

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        index, self._open = self._open.index, None
        return [("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _released(self) -> list[Event]:
        """The open tool_use / thinking block finished: it stops, and the events that waited go out."""
        out = self._close()
        held, self._held = self._held, []
        for waiting in held:
            out += self._place(waiting)
        return out
