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
from ._wire import WireError

# The OpenAI request fields whose loss cannot change the answer: prompt caching, abuse
# monitoring ids, stored-response bookkeeping, service tier, stream framing, and Codex's own
# ``client_metadata``. ``parallel_tool_calls``: failover has always taken it and let a target
# of another dialect go without (an answer may hold several calls). ``max_tool_calls`` caps
# hosted tool calls, which only a Responses target makes. ``truncation``: see VALUE_HINTS.
HINTS = frozenset(
    {
        "client_metadata",
        "max_tool_calls",
        "metadata",
        "parallel_tool_calls",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "safety_identifier",
        "service_tier",
        "store",
        "stream_options",
        "user",
    }
)
# Fields that are hints only with these values: ``truncation: "disabled"`` is what every target
# does (a conversation over the window fails instead of being cut); ``"auto"`` (cut it to fit)
# only a Responses target honours, so it is opaque.
VALUE_HINTS: Mapping[str, frozenset[object]] = MappingProxyType({"truncation": frozenset({"disabled"})})


# /v1/responses settings passed through verbatim, checked first (a typo is a 400, not a no-op
# a target of another dialect would never show): a Responses target honours each of them.
_TIERS = ("auto", "default", "flex", "scale", "priority")
_TRUNCATION = ("auto", "disabled")


def check_responses_settings(data: Mapping[str, Any]) -> None:
    """A 400 naming ``service_tier``, ``max_tool_calls`` or ``truncation`` when its value is
    not one the Responses API takes."""
    tier, calls, cut = data.get("service_tier"), data.get("max_tool_calls"), data.get("truncation")
    bad: tuple[str, str] | None = None
    if tier is not None and tier not in _TIERS:
        bad = ("service_tier", f"must be one of {', '.join(_TIERS)}")
    elif calls is not None and (isinstance(calls, bool) or not isinstance(calls, int) or calls < 1):
        bad = ("max_tool_calls", "must be a positive integer (the most hosted tool calls in one answer)")
    elif cut is not None and cut not in _TRUNCATION:
        bad = ("truncation", "must be 'auto' (only a Responses target can cut to fit) or 'disabled'")
    if bad is not None:
        name, rule = bad
        raise WireError(400, f"{name}: {rule}, got {data.get(name)!r:.60}", param=name, code="invalid_value")


def passthrough(dialect: str, fields: Mapping[str, Any]) -> Passthrough | None:
    """The Passthrough of ``fields`` (top-level name -> the client's value, in its order) for
    targets of ``dialect``; None when there are none."""
    if not fields:
        return None
    hints = frozenset(
        k for k, v in fields.items() if k in HINTS or v is None or (isinstance(v, str) and v in VALUE_HINTS.get(k, ()))
    )
    return Passthrough(
        dialect=dialect,
        fields=MappingProxyType(dict(fields)),
        hints=hints,
        opaque=frozenset(fields) - hints,
    )


__all__ = ["HINTS", "VALUE_HINTS", "check_responses_settings", "passthrough"]
