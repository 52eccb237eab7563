"""Bedrock ConverseStream events to stream events; ``finish`` reuses the body parse's rules.

The events arrive as :class:`~failover.providers._base.SSEEvent` objects made by :mod:`._eventstream` from the
AWS event-stream frames: the event name is the frame's ``:event-type`` (or
``:exception-type``), the data its JSON payload. A message is ``messageStart``, then per
content block (by ``contentBlockIndex``) an optional ``contentBlockStart`` (only tool use
has one: its id and name), ``contentBlockDelta`` events (``text``, ``toolUse.input``
fragments, ``reasoningContent`` text / signature / redacted data) and a
``contentBlockStop``; then ``messageStop`` (the stop reason: the terminal marker) and
``metadata`` (usage). Payloads also carry a ``p`` field of padding, ignored.

An exception frame mid-stream (``throttlingException``, ``serviceUnavailableException``,
``modelStreamErrorException``, ``internalServerException``, ``validationException``) is
classified like the same error type on a plain response, with the status the API reference
gives it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ...model import (
    Failure,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    StopReason,
    StreamEvent,
    Target,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from ...model import Stop as StopEvent
from .._base import SSEEvent, StreamFailed
from .._common import as_dict, as_str, tool_arguments
from .._headers import HeaderMeta
from .._streaming import EMPTY, ParserBase, event_response, incomplete, load_event, malformed, with_partial
from ._eventstream import MALFORMED
from ._parse import JSON_TOOL, REASONING_SOURCE, STATUS, STOP, error, judge, result_of, usage_of

__all__ = ["ConverseStreamParser"]

_TEXT: Final = "text"  # a text block: its deltas go straight to the answer's text
_JSON: Final = "json"  # the structured-output tool: its input fragments ARE the answer's text


class _ToolBlock:
    """A streamed ``toolUse`` block: its ``input`` fragments, until its stop."""

    __slots__ = ("call", "id", "name", "parts", "position")

    def __init__(self, position: int, call_id: str, name: str) -> None:
        self.position = position
        self.id = call_id
        self.name = name
        self.parts: list[str] = []
        self.call: ToolCall | None = None  # set at contentBlockStop: the call is final

    def tool_call(self) -> ToolCall:
        if self.call is not None:
            return self.call
        arguments, parsed = tool_arguments("".join(self.parts))  # blank (no parameters) is {}
        return ToolCall(id=self.id, name=self.name, arguments=arguments, parsed=parsed)


class _ThinkingBlock:
    """A streamed ``reasoningContent`` block: text deltas and a signature, or redacted data."""

    __slots__ = ("block", "origin", "parts", "position", "redacted", "signature")

    def __init__(self, position: int, origin: str) -> None:
        self.position = position
        self.origin = origin
        self.parts: list[str] = []
        self.signature = ""
        self.redacted: str | None = None
        self.block: Reasoning | None = None  # set at contentBlockStop: the block is final

    def reasoning(self) -> Reasoning:
        if self.block is not None:
            return self.block
        source = REASONING_SOURCE
        if self.redacted is not None:
            return Reasoning(redacted=self.redacted, source=source, origin=self.origin)
        return Reasoning(text="".join(self.parts), signature=self.signature or None, source=source, origin=self.origin)


_Block = _ToolBlock | _ThinkingBlock | str


class ConverseStreamParser(ParserBase):
    """One ConverseStream answer. Blocks are kept by ``contentBlockIndex``, so fragments of
    several open blocks may interleave; calls and reasoning blocks are numbered in the order
    they start. A block is final at its own ``contentBlockStop`` (``ToolCallDone`` /
    ``ReasoningDone``); a fragment for a stopped block is dropped. ``messageStop`` is the
    terminal marker; ``metadata`` (usage) follows it."""

    __slots__ = ("_blocks", "_calls", "_reasoning", "_stop", "_text", "_usage")

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        super().__init__(target, headers, meta)
        self._text: list[str] = []
        self._blocks: dict[Any, _Block] = {}
        self._calls: list[_ToolBlock] = []
        self._reasoning: list[_ThinkingBlock] = []
        self._stop: str | None = None
        self._usage = Usage()

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        name = event.event
        if name == MALFORMED:
            raise malformed(event.data, "bedrock", self._target, self._meta, "a frame of the event stream is broken")
        data = load_event(event.data, "bedrock", self._target, self._meta)
        if name == "contentBlockDelta":
            return self._delta(data.get("contentBlockIndex"), as_dict(data.get("delta")))
        if name == "contentBlockStart":
            return self._start(data.get("contentBlockIndex"), as_dict(as_dict(data.get("start")).get("toolUse")))
        if name == "contentBlockStop":
            block = self._blocks.get(data.get("contentBlockIndex"))
            if isinstance(block, _ToolBlock) and block.call is None:
                block.call = block.tool_call()
                return (ToolCallDone(index=block.position, call=block.call),)
            if isinstance(block, _ThinkingBlock) and block.block is None:
                block.block = block.reasoning()
                return (ReasoningDone(index=block.position, block=block.block),)
            return EMPTY
        if name == "messageStop":
            stop = as_str(data.get("stopReason"))
            if not stop:
                return EMPTY
            self._stop = stop
            reason = STOP.get(stop, StopReason.OTHER)
            if stop == "tool_use" and not self._calls:
                reason = StopReason.END_TURN  # only the structured-output tool: that is the answer
            return (StopEvent(reason=reason, raw=stop),)
        if name == "metadata":
            usage = data.get("usage")
            if not isinstance(usage, dict):
                return EMPTY
            self._usage = usage_of(usage)
            return (UsageUpdate(usage=self._usage),)
        if name.endswith("Exception"):
            err_type = name[:1].upper() + name[1:]
            headers = {**self._headers, "x-amzn-errortype": err_type}
            response = event_response(event.data, headers, STATUS.get(err_type, 500))
            raise StreamFailed(with_partial(error(self._target, response, self._meta, data), self._response()))
        return EMPTY  # messageStart, and event types newer than this parser

    def finish(self) -> Response | Failure:
        result = self._response()
        if self._stop is None:
            return incomplete("bedrock", result, self._meta)
        return judge(result, 200, self._meta)

    # ------------------------------------------------------------------------------ internals

    def _start(self, index: Any, use: dict[str, Any]) -> Sequence[StreamEvent]:
        if not use or index in self._blocks:
            return EMPTY  # a start for another kind of block (a tool result, an image), or a repeat
        name = as_str(use.get("name")) or ""
        if name == JSON_TOOL:
            self._blocks[index] = _JSON
            return EMPTY
        block = _ToolBlock(len(self._calls), as_str(use.get("toolUseId")) or "", name)
        self._blocks[index] = block
        self._calls.append(block)
        return (ToolCallStart(index=block.position, id=block.id, name=block.name),)

    def _delta(self, index: Any, delta: dict[str, Any]) -> Sequence[StreamEvent]:
        block = self._blocks.get(index)
        if "text" in delta:
            text = as_str(delta.get("text"))
            if block is None:
                block = self._blocks[index] = _TEXT
            if text and block is _TEXT:
                self._text.append(text)
                return (TextDelta(text=text),)
            return EMPTY
        if "toolUse" in delta:
            fragment = as_str(as_dict(delta.get("toolUse")).get("input"))
            if not fragment:
                return EMPTY
            if block is _JSON:
                self._text.append(fragment)
                return (TextDelta(text=fragment),)
            if isinstance(block, _ToolBlock) and block.call is None:
                block.parts.append(fragment)
                return (ToolCallDelta(index=block.position, arguments=fragment),)
            return EMPTY
        if "reasoningContent" in delta:
            if block is None:
                block = _ThinkingBlock(len(self._reasoning), self._target.key)
                self._blocks[index] = block
                self._reasoning.append(block)
            if isinstance(block, _ThinkingBlock) and block.block is None:
                return self._thinking(block, as_dict(delta.get("reasoningContent")))
        return EMPTY  # citations, tool results, images: not carried

    @staticmethod
    def _thinking(block: _ThinkingBlock, content: dict[str, Any]) -> Sequence[StreamEvent]:
        text = as_str(content.get("text"))
        if text:
            block.parts.append(text)
            return (ReasoningDelta(index=block.position, text=text),)
        signature = as_str(content.get("signature"))
        if signature is not None:
            block.signature = signature
        redacted = as_str(content.get("redactedContent"))
        if redacted is not None:
            block.redacted = (block.redacted or "") + redacted
        return EMPTY

    def _response(self) -> Response:
        return result_of(
            text="".join(self._text),
            calls=tuple(b.tool_call() for b in self._calls),
            reasoning=tuple(b.reasoning() for b in self._reasoning),
            raw_stop=self._stop,
            usage=self._usage,
            target=self._target,
            meta=self._meta,
        )
