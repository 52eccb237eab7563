"""Exact counts from the provider, for requests near a context window.

Anthropic (``POST /v1/messages/count_tokens``) and Gemini (``:countTokens``) count a request
with the model's own tokenizer, for free, in one round trip. That is worth it only when the
local count cannot decide: :func:`near_window` says when. :func:`count_exactly` never raises
for a failed count (status, timeout, connection, a body it cannot read): it answers None and
the caller keeps its local count. Counting must never fail a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeGuard, runtime_checkable

from ..model import Failure, Request, Target
from ..providers import dialect_for
from ..transport import HttpRequest, HttpResponse, Transport

__all__ = ["CountingDialect", "count_exactly", "counts_remotely", "near_window"]

logger = logging.getLogger("failover.tokens")


@runtime_checkable
class CountingDialect(Protocol):
    """A dialect whose provider counts tokens (``AnthropicDialect``, ``GeminiDialect``)."""

    def build_count(self, target: Target, request: Request) -> HttpRequest: ...

    def parse_count(self, target: Target, response: HttpResponse) -> int | Failure: ...


def _dialect(target: Target, dialect: object | None) -> CountingDialect | None:
    if dialect is None:
        try:
            dialect = dialect_for(target.dialect)
        except ValueError:
            return None
    return dialect if _is_counting(dialect) else None


_COUNTING_TYPES: dict[type, bool] = {}


def _is_counting(dialect: object) -> TypeGuard[CountingDialect]:
    """``isinstance(dialect, CountingDialect)``, cached by class: a check against a
    runtime-checkable Protocol walks its members on every call (the router asks on every
    request), and for a dialect class the answer never changes."""
    kind = type(dialect)
    ok = _COUNTING_TYPES.get(kind)
    if ok is None:
        ok = _COUNTING_TYPES[kind] = isinstance(dialect, CountingDialect)
    return ok


def counts_remotely(target: Target, dialect: object | None = None) -> bool:
    """Whether ``target``'s dialect (or the ``dialect`` given) can ask its provider for a count."""
    return _dialect(target, dialect) is not None


def near_window(
    estimated: int, max_tokens: int | None, window: int, margin: float = 0.1, *, overcount: float = 2.0
) -> bool:
    """Whether a local count is too close to ``window`` to decide alone.

    True when ``estimated + max_tokens`` reaches ``(1 - margin) * window`` (the count may be
    low by that much: the estimate under-counts dense random text) and the input would still
    fit if the local count were ``overcount`` times too high (the estimate over-counts English
    prose ~1.9x, code ~1.6x). Above that, no exact count can rescue the request; below the
    margin, the local count is enough.

    >>> near_window(95_000, 4_000, 128_000)  # 99k of 128k: decided locally
    False
    >>> near_window(120_000, 4_000, 128_000)
    True
    >>> near_window(200_000, 4_000, 128_000)  # over, but 100k if the estimate is 2x: ask
    True
    """
    out = max_tokens or 0
    return estimated + out >= (1.0 - margin) * window and estimated / overcount + out <= window


async def count_exactly(
    target: Target,
    request: Request,
    transport: Transport,
    *,
    timeout: float,  # noqa: ASYNC109 - the transport takes it as connect and total timeouts
    dialect: object | None = None,
    authorize: Callable[[Target, HttpRequest], Awaitable[HttpRequest]] | None = None,
) -> int | None:
    """The provider's own count of ``request``'s input tokens on ``target``, or None.

    One ``build_count`` -> ``transport.send`` -> ``parse_count`` round trip, bounded by
    ``timeout`` seconds (keep it short: the request waits for it, and its deadline keeps
    running). None when the dialect has no count endpoint (OpenAI), when ``timeout`` is not
    positive, and on any failure: an error status, a timeout, a transport error, a body
    without a count. ``dialect`` defaults to the shared adapter of ``target.dialect``;
    ``authorize`` signs or authorises the request for targets whose cloud needs it.
    Cancellation propagates.
    """
    adapter = _dialect(target, dialect)
    if adapter is None or not timeout > 0:
        return None
    try:
        http = adapter.build_count(target, request)
        async with asyncio.timeout(timeout):
            if authorize is not None:
                http = await authorize(target, http)
            response = await transport.send(
                http, connect_timeout=min(target.timeouts.connect, timeout), total_timeout=timeout
            )
        outcome = adapter.parse_count(target, response)
    except Exception as exc:  # a count is an optimisation: nothing about it may fail the request
        logger.debug("token count on %s failed: %s: %s", target.name, type(exc).__name__, exc)
        return None
    if isinstance(outcome, Failure):
        logger.debug("token count on %s failed: %s", target.name, outcome.message)
        return None
    return outcome
