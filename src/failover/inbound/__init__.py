"""The dialects as a server speaks them: request bodies in, answers and stream events out.

``failover.inbound.openai`` (Chat Completions), ``failover.inbound.anthropic`` (Messages) and
``failover.inbound.responses`` (the OpenAI Responses API, stateless) turn a decoded JSON body
into a provider-neutral :class:`~failover.model.Request`, and a
:class:`~failover.model.Response` or the router's stream events back into that dialect's
bodies and SSE events. They know wire formats only (no HTTP server, no starlette): the
gateway serves them over HTTP, and an in-process client can use them without one.

A body a dialect cannot accept raises :class:`WireError` (status, message naming the field,
``param``, OpenAI-style ``type`` and ``code``); the server maps it to its own error answer.

What a client assembles from a stream always equals the answer failover records: the stream
renderers send what is missing when a piece finishes and before the end, and raise
:class:`RelayMismatch` when the finished answer no longer matches what the client was sent (the
server then ends the stream with an error event rather than leave the client a different answer).

Error tree::

    Exception
     ├── WireError        a refused request body (400 unless said)
     └── RelayMismatch    a finished answer that differs from what a stream client was sent
"""

from . import _failures as failures
from . import anthropic, embeddings, openai, responses
from ._failures import CHAT, MESSAGES, RESPONSES, SDK_CHAT, SDK_MESSAGES, Scrubber, Shape, render, unavailable
from ._headers import (
    answered_by,
    capped_to,
    envelope_with_headers,
    live_reasoning,
    record_headers,
    retry_headers,
    streamed_by,
    with_affinity,
)
from ._origins import Origins
from ._relay import Relay, RelayMismatch, mismatch_message
from ._responses_stream import Event as ResponsesEvent
from ._wire import SchemaField, WireError, check_schema_limits, check_schemas

__all__ = [
    "CHAT",
    "MESSAGES",
    "RESPONSES",
    "SDK_CHAT",
    "SDK_MESSAGES",
    "Scrubber",
    "Shape",
    "failures",
    "render",
    "unavailable",
    "Origins",
    "Relay",
    "ResponsesEvent",
    "answered_by",
    "capped_to",
    "envelope_with_headers",
    "live_reasoning",
    "mismatch_message",
    "record_headers",
    "retry_headers",
    "streamed_by",
    "with_affinity",
    "RelayMismatch",
    "SchemaField",
    "WireError",
    "anthropic",
    "embeddings",
    "check_schema_limits",
    "check_schemas",
    "openai",
    "responses",
]
