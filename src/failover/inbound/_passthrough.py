"""What an OpenAI client sent that failover does not interpret, as a
:class:`~failover.model.Passthrough` for the targets of its own dialect.

``/v1/responses`` and ``/v1/chat/completions`` both use it: a top-level field the parser does
not read goes verbatim to a target of the endpoint's dialect (a Responses target, an OpenAI
Chat Completions target). For a target of another dialect each field is judged by name: one
that only tunes caching, tracing, billing or bookkeeping (:data:`HINTS`, or any field sent as
``null``, which asks for nothing) is dropped and the attempt records it; any other makes that
target ineligible, since failover cannot tell what losing it would change.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..model import Passthrough

# The OpenAI request fields whose loss cannot change the answer: prompt caching, abuse
# monitoring ids, stored-response bookkeeping, service tier, stream framing, and Codex's own
# ``client_metadata``. ``parallel_tool_calls`` and ``truncation``: failover has always taken
# them and let a target of another dialect go without (an answer may hold several calls; a
# conversation over the window fails instead of being cut).
HINTS = frozenset(
    {
        "client_metadata",
        "metadata",
        "parallel_tool_calls",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "safety_identifier",
        "service_tier",
        "store",
        "stream_options",
        "truncation",
        "user",
    }
)


def passthrough(dialect: str, fields: Mapping[str, Any]) -> Passthrough | None:
    """The Passthrough of ``fields`` (top-level name -> the client's value, in its order) for
    targets of ``dialect``; None when there are none."""
    if not fields:
        return None
    hints = frozenset(k for k, v in fields.items() if k in HINTS or v is None)
    return Passthrough(
        dialect=dialect,
        fields=MappingProxyType(dict(fields)),
        hints=hints,
        opaque=frozenset(fields) - hints,
    )


__all__ = ["HINTS", "passthrough"]
