"""Wire dialects: build the HTTP request, parse the answer, classify what went wrong.

One module per dialect; each is the ONE place where a provider's format and errors are
known. Adapters are stateless, so :func:`dialect_for` hands out shared instances.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import Dialect
from ._base import DialectAdapter, SSEComment, StreamFailed
from ._sse import MAX_EVENT_CHARS, EventTooLarge, stream_decoder
from .anthropic import AnthropicDialect
from .bedrock import BedrockDialect
from .gemini import GeminiDialect
from .openai import OpenAIDialect
from .responses import OpenAIResponsesDialect

__all__ = [
    "EventTooLarge",
    "MAX_EVENT_CHARS",
    "SSEComment",
    "StreamFailed",
    "stream_decoder",
    "AnthropicDialect",
    "BedrockDialect",
    "DialectAdapter",
    "GeminiDialect",
    "OpenAIDialect",
    "OpenAIResponsesDialect",
    "dialect_for",
]

_DIALECTS: Mapping[Dialect, DialectAdapter] = {
    Dialect.OPENAI: OpenAIDialect(),
    Dialect.OPENAI_RESPONSES: OpenAIResponsesDialect(),
    Dialect.ANTHROPIC: AnthropicDialect(),
    Dialect.GEMINI: GeminiDialect(),
    Dialect.BEDROCK: BedrockDialect(),
}


def dialect_for(d: Dialect) -> DialectAdapter:
    """The shared (stateless) adapter for dialect ``d``."""
    # A member, or its value, is found as it is: Dialect(d), an enum lookup in Python, cost more
    # than the rest (the router asks for every target of every request).
    adapter = _DIALECTS.get(d) if isinstance(d, str) else None
    if adapter is not None:
        return adapter
    try:
        return _DIALECTS[Dialect(d)]
    except (KeyError, ValueError):
        raise ValueError(f"no wire dialect for {d!r}; known: {', '.join(known.value for known in Dialect)}") from None
