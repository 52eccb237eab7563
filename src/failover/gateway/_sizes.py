"""What one request may hold, and the work proportional to a body done once, off the event loop.

Every tenant shares one event loop, and a 10 MiB body may hold 180,000 tools, 300,000
messages or 100,000 content blocks, each of which costs work: translating it, checking its
text and schemas, counting its tokens, writing it upstream. So:

- the counts are bounded first (``gateway.limits``: ``max_tools``, ``max_messages``,
  ``max_blocks``; for embeddings ``max_embedding_inputs`` and ``max_embedding_values``), on
  the parsed body, before anything walks it: over one is a 400 ``too_many_items`` that names
  the limit and how to raise it (:func:`check_counts`);
- a body larger than :data:`~failover.gateway._body.HEAVY_JSON_BYTES` is translated, its text
  and schemas checked and its tokens counted in a worker thread (:func:`vet`), once: the
  router is handed what was checked (:class:`~failover.router.Vetted`) and does not walk the
  request again. A smaller one is checked on the loop (a few hundred microseconds at most),
  its schemas in a worker thread as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from ..inbound import SchemaField, check_schemas
from ..model import InvalidRequest, Request, Route
from ..router import Vetted, check_text
from ..tokens import counter_for
from ..validation import SchemaLimits
from ._errors import ApiError
from ._settings import GatewaySettings

TOO_MANY = "too_many_items"


def too_many(param: str, count: int, what: str, setting: str, limit: int) -> ApiError:
    """The 400 for a request holding more of something than ``gateway.limits.<setting>`` allows."""
    return ApiError(
        400,
        f"{param}: {count} {what}; at most {limit} are taken in one request (gateway.limits.{setting}); "
        f"send fewer, or raise gateway.limits.{setting}",
        code=TOO_MANY,
        param=param,
    )


_ABSENT = object()
# (model class, name) -> whether getattr() may find ``name`` other than as a field or extra
# field: on the class (a property, a method) or as a private attribute
_ON_CLASS: dict[tuple[type, str], bool] = {}


def field_of(value: Any, name: str) -> Any:
    """``value[name]`` of a decoded JSON object, ``value.name`` of a parsed body; None if absent."""
    if isinstance(value, dict):
        return value.get(name)
    if isinstance(value, BaseModel):
        # getattr() of a name a pydantic model lacks raises and catches three AttributeErrors
        # (~15k instructions, and a chat body lacks "input" and "system"): what it would find
        # is read directly, its fields from its __dict__, its extra ones from __pydantic_extra__
        cls = type(value)
        on_class = _ON_CLASS.get((cls, name))
        if on_class is None:
            on_class = _ON_CLASS[cls, name] = hasattr(cls, name) or name in cls.__private_attributes__
        if not on_class:
            found = value.__dict__.get(name, _ABSENT)
            if found is not _ABSENT:
                return found
            extra = value.__pydantic_extra__
            return extra.get(name) if extra else None
    return getattr(value, name, None)


def _blocks(items: Iterable[Any]) -> int:
    """Content blocks of messages (or input items): each list ``content`` counts its items, and
    the blocks nested in them (a tool result's own content) count too."""
    n = 0
    for m in items:
        content = field_of(m, "content")
        if isinstance(content, list):
            n += len(content)
            for block in content:
                inner = field_of(block, "content")
                if isinstance(inner, list):
                    n += len(inner)
    return n


def check_counts(settings: GatewaySettings, body: Any) -> None:
    """A 400 when a chat body (any dialect: its ``tools``, and its ``messages``, or the
    Responses ``input`` items) holds more than the limits allow. ``body``: the decoded JSON, so
    that a body over a limit is refused before it is validated (pydantic holds the GIL while
    it validates: ~4 us a tool), or the parsed body. Counting is a walk over the messages'
    lists, never into their text: microseconds for any body the limits take."""
    tools = field_of(body, "tools")
    if isinstance(tools, list) and len(tools) > settings.max_tools:
        raise too_many("tools", len(tools), "tools", "max_tools", settings.max_tools)
    param = "messages"
    messages: Sequence[Any] | None = field_of(body, "messages")
    if messages is None:
        param = "input"
        messages = field_of(body, "input")
    if not isinstance(messages, list):
        return
    if len(messages) > settings.max_messages:
        raise too_many(param, len(messages), "messages", "max_messages", settings.max_messages)
    system = field_of(body, "system")  # Anthropic's system prompt may be a list of blocks
    blocks = _blocks(messages) + (len(system) if isinstance(system, list) else 0)
    if blocks > settings.max_blocks:
        raise too_many(param, blocks, "content blocks", "max_blocks", settings.max_blocks)


def count_tokens(route: Route, request: Request) -> dict[str, int]:
    """The request's input tokens by each distinct counter of the route's targets (what the
    router's preflight and limiters would count), keyed by counter name."""
    out: dict[str, int] = {}
    for target in route.targets:
        counter = counter_for(target)
        if counter.name not in out:
            out[counter.name] = counter.count(request)
    return out


def _vet_here(route: Route | None, request: Request, fields: list[SchemaField], limits: SchemaLimits) -> Vetted:
    check_schemas(fields, limits)
    check_text(request)
    return Vetted(request, count_tokens(route, request) if route is not None else {})


async def vet(
    route: Route | None, request: Request, fields: list[SchemaField], limits: SchemaLimits, *, big: bool
) -> Vetted:
    """``request`` checked (its client schemas, then its text) and, for a ``big`` body, its
    tokens counted, all in a worker thread; a small body's text is checked on the loop (its
    schemas, when it has any, in a worker thread: compiling a new one can take milliseconds).
    A refusal is a 400 naming the field (a schema's a WireError, answered as any)."""
    try:
        if big:
            return await asyncio.to_thread(_vet_here, route, request, fields, limits)
        if fields:
            await asyncio.to_thread(check_schemas, fields, limits)
        check_text(request)
    except InvalidRequest as exc:
        raise ApiError(400, str(exc), code="invalid_unicode", param=exc.field) from None
    return Vetted(request)


__all__ = ["TOO_MANY", "check_counts", "count_tokens", "field_of", "too_many", "vet"]
