"""Anthropic Messages stream events to stream events; ``finish`` reuses the body parse's rules
(:mod:`._parse`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ...model import REASONING_ANTHROPIC as REASONING_SOURCE
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
from ._parse import STOP, error, judge, redacted, result_of, usage_of


class _ToolBlock:
    """A streamed ``tool_use`` block: its ``input_json_delta`` fragments, until its stop."""

    __slots__ = ("call", "id", "name", "parts", "position")

    def __init__(self, position: int, call_id: str, name: str) -> None:
        self.position = position  # the tool call's position among this message's calls
        self.id = call_id
        self.name = name
        self.parts: list[str] = []  # partial_json fragments
        self.call: ToolCall | None = None  # set by content_block_stop: the call is final

    def tool_call(self) -> ToolCall:
        if self.call is not None:
            return self.call
        # Joined fragments; blank (a tool without parameters streams only "") is {}.
        arguments, parsed = tool_arguments("".join(self.parts))
        return ToolCall(id=self.id, name=self.name, arguments=arguments, parsed=parsed)


class _ThinkingBlock:
    """A streamed ``thinking`` (``thinking_delta`` text, then ``signature_delta``) or
    ``redacted_thinking`` block (its ``data`` whole at block start), until its stop."""

    __slots__ = ("block", "origin", "parts", "position", "redacted", "signature")

    def __init__(self, position: int, origin: str, redacted: str | None = None) -> None:
        self.position = position  # the block's position among this message's reasoning blocks
        self.origin = origin
        self.redacted = redacted
        self.parts: list[str] = []
        self.signature = ""
        self.block: Reasoning | None = None  # set by content_block_stop: the block is final

    def reasoning(self) -> Reasoning:
        if self.block is not None:
            return self.block
        if self.redacted is not None:
            return redacted(self.redacted, self.origin)
        return Reasoning(
            text="".join(self.parts),
            signature=self.signature or None,
            source=REASONING_SOURCE,
            origin=self.origin,
        )


_TEXT: Final = "text"  # a text block: its deltas go straight to the answer's text

_Block = _ToolBlock | _ThinkingBlock | str


class MessageStream(ParserBase):
    """Messages stream events to stream events; ``finish`` reuses the body parse's rules.

    The event's ``type`` field decides (the SSE ``event:`` name repeats it). Content blocks
    are kept by their ``index``, as the SDK's accumulator keeps them, so fragments of several
    open blocks may interleave in any order (Anthropic sends blocks one after another; a
    proxy may not): each ``input_json_delta`` goes to its own call, each ``thinking_delta``
    and ``signature_delta`` to its own reasoning block. A block is final at its own
    ``content_block_stop`` (``ToolCallDone`` / ``ReasoningDone``); a fragment for a block
    that has stopped is not part of it (dropped). Calls and reasoning blocks are numbered,
    and listed in the Response, in the order their blocks start, which is the order of their
    indexes: a start whose index goes back is a malformed stream, as the SDK refuses it.
    Interleaved thinking (thinking blocks between tool_use blocks) keeps that order within
    the reasoning and within the calls.

    Usage is the message_start usage overwritten by each message_delta's cumulative counts,
    as the SDK accumulates it. The terminal marker is message_delta's ``stop_reason``: after
    it only message_stop can come, which adds nothing. A tool_use block without its
    content_block_stop (max_tokens hit mid-input) is kept in the Response with whatever
    arguments arrived, but no ``ToolCallDone`` is emitted for it; likewise a thinking block
    cut before its stop is kept with what arrived (no ``ReasoningDone``).
    """

    __slots__ = (
        "_blocks",
        "_calls",
        "_details",
        "_id",
        "_last_index",
        "_model",
        "_reasoning",
        "_stop",
        "_text",
        "_usage",
        "_usage_raw",
    )

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        super().__init__(target, headers, meta)
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._blocks: dict[Any, _Block] = {}
        self._last_index = -1
        self._calls: list[_ToolBlock] = []
        self._reasoning: list[_ThinkingBlock] = []
        self._stop: str | None = None
        self._details: dict[str, Any] = {}
        self._usage_raw: dict[str, Any] = {}
        self._usage = Usage()

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        if event.event == "ping":
            return EMPTY
        data = load_event(event.data, "anthropic", self._target, self._meta)
        kind = data.get("type") or event.event
        if kind == "content_block_delta":
            return self._delta(self._blocks.get(data.get("index")), data.get("delta"))
        if kind == "content_block_start":
            index = data.get("index")
            if isinstance(index, int):
                # Indexes are positions in the message's content, started in order; the SDK
                # refuses a start that goes back (an index already started, or a lower one),
                # and so does this parser: which block a later fragment means is unknowable.
                if index <= self._last_index:
                    why = f"content_block_start index {index} after index {self._last_index}"
                    raise malformed(event.data, "anthropic", self._target, self._meta, why)
                self._last_index = index
            return self._block_start(data)
        if kind == "content_block_stop":
            block = self._blocks.get(data.get("index"))
            if isinstance(block, _ToolBlock) and block.call is None:
                block.call = block.tool_call()
                return (ToolCallDone(index=block.position, call=block.call),)
            if isinstance(block, _ThinkingBlock) and block.block is None:
                block.block = block.reasoning()
                return (ReasoningDone(index=block.position, block=block.block),)
            return EMPTY
        if kind == "message_start":
            message = as_dict(data.get("message"))
            self._id = as_str(message.get("id")) or self._id
            self._model = as_str(message.get("model")) or self._model
            return self._merge_usage(message.get("usage"))
        if kind == "message_delta":
            out: list[StreamEvent] = []
            delta = as_dict(data.get("delta"))
            stop = as_str(delta.get("stop_reason"))
            if stop:
                self._stop = stop
                self._details = as_dict(delta.get("stop_details"))
                out.append(StopEvent(reason=STOP.get(stop, StopReason.OTHER), raw=stop))
            out.extend(self._merge_usage(data.get("usage")))
            return out
        if kind == "error":
            failure = error(self._target, event_response(event.data, self._headers), self._meta, data)
            raise StreamFailed(with_partial(failure, self._response()))
        return EMPTY  # message_stop, and event types newer than this parser

    def finish(self) -> Response | Failure:
        result = self._response()
        if self._stop is None:
            return incomplete("anthropic", result, self._meta)
        return judge(result, 200, self._meta)

    # ------------------------------------------------------------------------------ internals

    def _delta(self, block: _Block | None, delta: Any) -> Sequence[StreamEvent]:
        if block is None or not isinstance(delta, dict):
            return EMPTY
        dtype = delta.get("type")
        if block is _TEXT:
            text = delta.get("text") if dtype == "text_delta" else None
            if text and isinstance(text, str):
                self._text.append(text)
                return (TextDelta(text=text),)
        elif isinstance(block, _ToolBlock):
            partial = delta.get("partial_json") if dtype == "input_json_delta" else None
            if partial and isinstance(partial, str) and block.call is None:
                block.parts.append(partial)
                return (ToolCallDelta(index=block.position, arguments=partial),)
        elif isinstance(block, _ThinkingBlock) and block.block is None and block.redacted is None:
            if dtype == "thinking_delta":
                text = delta.get("thinking")
                if text and isinstance(text, str):
                    block.parts.append(text)
                    return (ReasoningDelta(index=block.position, text=text),)
            elif dtype == "signature_delta":
                signature = delta.get("signature")
                if isinstance(signature, str):
                    block.signature = signature  # it replaces, as the SDK's accumulator does
        return EMPTY  # citations_delta, and delta types newer than this parser

    def _block_start(self, data: dict[str, Any]) -> Sequence[StreamEvent]:
        content = as_dict(data.get("content_block"))
        btype = content.get("type")
        index = data.get("index")
        if btype == "text":
            self._blocks[index] = _TEXT
            text = as_str(content.get("text"))
            if text:
                self._text.append(text)
                return (TextDelta(text=text),)
            return EMPTY
        if btype == "thinking" or btype == "redacted_thinking":
            redacted = (as_str(content.get("data")) or "") if btype == "redacted_thinking" else None
            thinking = _ThinkingBlock(len(self._reasoning), self._target.key, redacted)
            self._blocks[index] = thinking
            self._reasoning.append(thinking)
            if redacted is not None:
                return EMPTY
            thinking.signature = as_str(content.get("signature")) or ""
            text = as_str(content.get("thinking"))
            if text:
                thinking.parts.append(text)
                return (ReasoningDelta(index=thinking.position, text=text),)
            return EMPTY
        if btype != "tool_use":
            return EMPTY  # server tool blocks and block types newer than this parser: not carried
        block = _ToolBlock(len(self._calls), as_str(content.get("id")) or "", as_str(content.get("name")) or "")
        self._blocks[index] = block
        self._calls.append(block)
        out: list[StreamEvent] = [ToolCallStart(index=block.position, id=block.id, name=block.name)]
        initial = content.get("input")
        if isinstance(initial, dict) and initial:  # a proxy that sends the whole input up front
            text = json.dumps(initial, ensure_ascii=False, separators=(",", ":"))
            block.parts.append(text)
            out.append(ToolCallDelta(index=block.position, arguments=text))
        return out

    def _merge_usage(self, usage: Any) -> Sequence[StreamEvent]:
        if not isinstance(usage, dict):
            return EMPTY
        # Counts are cumulative; one a message_delta omits (or sends as null) keeps its earlier value.
        self._usage_raw.update((k, v) for k, v in usage.items() if v is not None)
        self._usage = usage_of(self._usage_raw)
        return (UsageUpdate(usage=self._usage),)

    def _response(self) -> Response:
        return result_of(
            text="".join(self._text),
            calls=tuple(b.tool_call() for b in self._calls),
            reasoning=tuple(b.reasoning() for b in self._reasoning),
            raw_stop=self._stop,
            stop_details=self._details,
            usage=self._usage,
            model=self._model,
            response_id=self._id,
            meta=self._meta,
        )
