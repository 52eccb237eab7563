"""The dialects as a server speaks them: request bodies in, answers and stream events out.

``failover.inbound.openai`` (Chat Completions) and ``failover.inbound.anthropic`` (Messages)
turn a decoded JSON body into a provider-neutral :class:`~failover.model.Request`, and a
:class:`~failover.model.Response` or the router's stream events back into that dialect's
bodies and SSE events. They know wire formats only (no HTTP server, no starlette): the
gateway serves them over HTTP, and an in-process client can use them without one.

A body a dialect cannot accept raises :class:`WireError` (status, message naming the field,
``param``, OpenAI-style ``type`` and ``code``); the server maps it to its own error answer.

Error tree::

    Exception
     └── WireError        a refused request body (400 unless said)
"""

from . import anthropic, openai
from ._wire import SchemaField, WireError, check_schema_limits, check_schemas

__all__ = ["SchemaField", "WireError", "anthropic", "check_schema_limits", "check_schemas", "openai"]
