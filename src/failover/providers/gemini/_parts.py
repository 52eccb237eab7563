"""Gemini's answer parts, read in order: the same reader for a whole GenerateContentResponse
(:mod:`._parse`) and for a stream's chunks (:mod:`._stream`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from ...model import REASONING_GEMINI as REASONING_SOURCE
from ...model import (
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
)
from .._common import as_str
from .._streaming import EMPTY


class _Thought:
    """A reasoning block being read: thought parts' text, until a signature or an answer part."""

    __slots__ = ("block", "position", "signature", "texts")

    def __init__(self, position: int) -> None:
        self.position = position
        self.texts: list[str] = []
        self.signature: str | None = None
        self.block: Reasoning | None = None  # set when the block is closed


class Parts:
    """The answer's parts, read in order: the same for a whole response and for a stream.

    A stream's chunks are pieces of one candidate: text parts are pieces of its text, and
    consecutive thought parts are pieces of one reasoning block (``thought: true``), which
    ends at a part that carries a ``thoughtSignature`` (the block's own), at the first answer
    part, or at the candidate's finishReason. A signature on an answer part (a functionCall,
    a text part, a stream's closing empty text part) is a reasoning block of its own, with no
    text, in part order; ``gemini._model_parts`` puts it back on its part. A functionCall part is a
    whole call (the Gemini API does not stream call arguments), so it starts, delivers its
    arguments and completes at once; calls are numbered in the order they arrive.
    """

    __slots__ = ("_open", "calls", "origin", "reasoning", "texts")

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.reasoning: list[_Thought] = []
        self._open: _Thought | None = None

    def read(self, candidate: dict[str, Any], response_id: str | None, out: list[StreamEvent]) -> None:
        """Read one candidate's parts, appending their events to ``out``."""
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            return
        for raw in parts:
            if not isinstance(raw, dict):
                continue
            text = raw.get("text")
            signature = raw.get("thoughtSignature")
            if signature is not None and not (isinstance(signature, str) and signature):
                signature = None
            if raw.get("thought") is True:
                self._thought(text if isinstance(text, str) else "", signature, out)
                continue
            call = raw.get("functionCall")
            if not isinstance(text, str) and not isinstance(call, dict):
                continue  # inlineData, executableCode...: not carried (nor their signatures)
            if self._open is not None:
                out.extend(self.close())
            if text and isinstance(text, str):
                self.texts.append(text)
                out.append(TextDelta(text=text))
            if isinstance(call, dict):
                out.extend(self._call(call, response_id))
            if signature is not None:
                bare = _Thought(len(self.reasoning))
                bare.signature = signature
                self.reasoning.append(bare)
                out.extend(self._done(bare))

    def close(self) -> Sequence[StreamEvent]:
        """End the open reasoning block, if any (an answer part or the finish came)."""
        thought, self._open = self._open, None
        return self._done(thought) if thought is not None else EMPTY

    def response_reasoning(self) -> tuple[Reasoning, ...]:
        return tuple(t.block or self._block(t) for t in self.reasoning)

    def _thought(self, text: str, signature: str | None, out: list[StreamEvent]) -> None:
        thought = self._open
        if thought is None:
            thought = self._open = _Thought(len(self.reasoning))
            self.reasoning.append(thought)
        if text:
            thought.texts.append(text)
            out.append(ReasoningDelta(index=thought.position, text=text))
        if signature is not None:
            thought.signature = signature
            out.extend(self.close())

    def _call(self, call: dict[str, Any], response_id: str | None) -> list[StreamEvent]:
        args = call.get("args")
        if args is None:
            args = {}  # absent (or null) for a call without parameters
        # Vertex streams a call's arguments in pieces (partialArgs, willContinue) only when the
        # request sets streamFunctionCallArguments, which this dialect never does (the Gemini
        # API has no such option). Should one arrive anyway, its args are not the call's: the
        # call is malformed rather than silently called with {}.
        partial = call.get("willContinue") is True or "partialArgs" in call
        index = len(self.calls)
        tc = ToolCall(
            id=as_str(call.get("id")) or _call_id(response_id, index),
            name=as_str(call.get("name")) or "",
            arguments=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
            parsed=args if isinstance(args, dict) and not partial else None,
        )
        self.calls.append(tc)
        return [
            ToolCallStart(index=index, id=tc.id, name=tc.name),
            ToolCallDelta(index=index, arguments=tc.arguments),
            ToolCallDone(index=index, call=tc),
        ]

    def _done(self, thought: _Thought) -> Sequence[StreamEvent]:
        thought.block = self._block(thought)
        return (ReasoningDone(index=thought.position, block=thought.block),)

    def _block(self, thought: _Thought) -> Reasoning:
        return Reasoning(
            text="".join(thought.texts),
            signature=thought.signature,
            source=REASONING_SOURCE,
            origin=self.origin,
        )


def _call_id(response_id: str | None, index: int) -> str:
    # The Gemini API rarely sends call ids; ours must be unique across turns because the
    # tool-execution ledger keys on them. responseId is unique per response.
    return f"call_{response_id}_{index}" if response_id else f"call_{uuid.uuid4().hex[:24]}"
