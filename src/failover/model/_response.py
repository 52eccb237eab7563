"""The normalized result of one successful provider call."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ._reasoning import Reasoning
from ._request import Message, ToolCall

if TYPE_CHECKING:
    from ._failure import RateLimitInfo
    from ._record import RouteRecord


class StopReason(StrEnum):
    END_TURN = "end_turn"  # openai "stop", anthropic "end_turn", gemini "STOP"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"  # openai "tool_calls"
    MAX_TOKENS = "max_tokens"  # openai "length", gemini "MAX_TOKENS"
    CONTENT_FILTER = "content_filter"  # openai "content_filter", gemini SAFETY & co
    REFUSAL = "refusal"  # anthropic "refusal", openai message.refusal
    OTHER = "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # included in input_tokens
    reasoning_tokens: int = 0  # included in output_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """What a provider answered, normalized.

    ``parsed`` holds the decoded JSON for structured output. ``record`` is attached by the
    router: the RouteRecord of the request that produced this response.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[Reasoning, ...] = ()  # what the model thought first, in order (see Reasoning)
    parsed: Any = None
    usage: Usage = Usage()
    stop_reason: StopReason = StopReason.END_TURN
    raw_stop_reason: str | None = None
    refusal: str | None = None
    model: str | None = None
    provider_request_id: str | None = None
    response_id: str | None = None
    rate_limits: RateLimitInfo | None = None  # what the provider's rate-limit headers said
    record: RouteRecord | None = None

    @property
    def reasoning_text(self) -> str:
        """The readable reasoning of every block, joined (empty when the model sent none)."""
        return "".join(r.text for r in self.reasoning)

    def message(self) -> Message:
        """This answer as the assistant turn of the next request's history (with its reasoning,
        which a provider needs back in a tool loop, and which failover only sends to a target
        that can read it)."""
        return Message.assistant(self.text, tool_calls=self.tool_calls, reasoning=self.reasoning)

    @property
    def degraded(self) -> bool:
        """True for a non-model fallback answer (see ``record.degraded_reason``)."""
        return self.record is not None and self.record.degraded
