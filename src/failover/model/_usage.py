"""What a provider metered for one call: the tokens it used and what its rate-limit headers said."""

from __future__ import annotations

from dataclasses import dataclass


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
class RateLimitInfo:
    """What the provider's rate-limit headers said. Resets are seconds from receipt."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens: float | None = None
    limit_input_tokens: int | None = None
    remaining_input_tokens: int | None = None
    reset_input_tokens: float | None = None
    limit_output_tokens: int | None = None
    remaining_output_tokens: int | None = None
    reset_output_tokens: float | None = None
