"""One block open at a time: what the Anthropic Messages and the OpenAI Responses renderers share.

Both dialects stream an answer as blocks (content blocks, output items) of which only one is
open at a time, while failover's stream events of several tool calls or reasoning parts may
interleave. A renderer built on :class:`OneOpenBlock` passes each event through the relay,
keeps the usage, and holds the events of another block while a tool-call or reasoning block is
open; it renders them when that block closes. The subclass names its dialect's block kinds and
renders one event (``_event``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from ..model import (
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from ._relay import Relay

__all__ = ["OneOpenBlock"]


class _Open(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def key(self) -> int: ...


class OneOpenBlock:
    """The placing of events into blocks; see the module docstring."""

    TEXT: ClassVar[str]  # the kind of the block text goes into
    REASONING: ClassVar[str]  # the kind of a reasoning block
    TOOL: ClassVar[str]  # the kind of a tool call's block

    relay: Relay
    _usage: Usage
    _held: list[StreamEvent]
    _open: _Open | None

    def _event(self, event: StreamEvent) -> list[Any]:
        raise NotImplementedError

    def _placed(self, event: object) -> list[Any]:
        """The wire events for ``event``, after the relay has assembled it."""
        out: list[Any] = []
        for e in self.relay.feed(event):
            out += self._place(e)
        return out

    def _place(self, event: StreamEvent) -> list[Any]:
        if isinstance(event, UsageUpdate):
            self._usage = event.usage
            return []
        block = self._open
        if block is not None and block.kind != self.TEXT and not self._belongs(event, block):
            self._held.append(event)  # another block's: after the open one finishes
            return []
        return self._event(event)

    @classmethod
    def _belongs(cls, event: StreamEvent, block: _Open) -> bool:
        if isinstance(event, ReasoningDelta | ReasoningDone):
            return block.kind == cls.REASONING and event.index == block.key
        if isinstance(event, ToolCallStart | ToolCallDelta | ToolCallDone):
            return block.kind == cls.TOOL and event.index == block.key
        return not isinstance(event, TextDelta)  # Stop, Restarted: nothing to show
