"""Preflight: does a request fit a target's context window, before anything is sent?

Input tokens plus the output the request reserves must fit the window. A request that does
not fit any candidate is a ``context_overflow`` decided locally, at no cost, unless the caller
supplied a :class:`CompactionHook` that shortens it. The router's use, per request:

1. count on every candidate (``counter_for(target)``); where :func:`near_window` says the
   count cannot decide and the dialect counts remotely, ask the provider
   (:func:`count_exactly`, short timeout, None on any failure);
2. :func:`preflight` each candidate with that count; a candidate whose result does not fit is
   excluded with ``result.reason``;
3. when no candidate fits and a hook is set: call it ONCE, for the candidate that is over by
   the fewest tokens, with ``result.over``; if it returns a request, count and preflight that
   one again from step 1; if it returns None, or the new request still fits nowhere, stop with
   ``context_overflow`` before any request is sent.

:func:`measure` does steps 1 and 2 for one target.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from ..model import Dialect, Request, Target
from ..transport import Transport
from ._choose import counter_for
from ._counter import TokenCounter
from ._remote import count_exactly, counts_remotely, near_window

__all__ = ["CompactionHook", "PreflightResult", "measure", "preflight", "reserved_output"]


class CompactionHook(Protocol):
    """Shortens a request that does not fit: ``await hook(request, target, tokens_over)``.

    ``tokens_over`` is by how many tokens input plus reserved output exceed ``target``'s
    window (by the count used in preflight). Return a shorter request (summarised history,
    dropped attachments, a smaller ``max_tokens``), or None to give up. The router calls it at
    most once per request, and counts the new request again before sending it.

    >>> async def drop_oldest(request: Request, target: Target, tokens_over: int) -> Request | None:
    ...     keep = [m for m in request.messages if m.role == "system"] + list(request.messages[-4:])
    ...     return replace(request, messages=tuple(keep)) if len(keep) < len(request.messages) else None
    """

    def __call__(self, request: Request, target: Target, tokens_over: int, /) -> Awaitable[Request | None]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PreflightResult:
    """The window check of one request on one target."""

    tokens: int  # the input tokens the decision used
    max_tokens: int  # the output the request reserves (see reserved_output)
    window: int | None  # None: the target declares none and none is known: it fits
    fits: bool
    exact: bool  # tokens is the provider's own count
    counter: str  # the name of the counter that counted, or "<dialect> count_tokens"
    reason: str | None  # why it does not fit, in an Exclusion's words; None when it fits

    @property
    def over(self) -> int:
        """By how many tokens input plus reserved output exceed the window (0 when it fits, or
        when the window is unknown)."""
        if self.window is None:
            return 0
        return max(0, self.tokens + self.max_tokens - self.window)


def reserved_output(target: Target, request: Request) -> int:
    """The output tokens a request reserves in the window: its ``max_tokens``.

    Without one, the Anthropic and Bedrock dialects send the target's ``max_output_tokens``
    (the Messages API requires max_tokens and counts it against the window; Converse's
    ``maxTokens`` is sent likewise); the other dialects send none.
    """
    if request.max_tokens is not None:
        return request.max_tokens
    return target.max_output_tokens if target.dialect in (Dialect.ANTHROPIC, Dialect.BEDROCK) else 0


def preflight(
    target: Target,
    request: Request,
    counter: TokenCounter,
    *,
    exact: int | None = None,
    counted: int | None = None,
    window: int | None = None,
) -> PreflightResult:
    """Whether ``request`` fits ``target``'s context window.

    Uses ``exact`` (a provider's count from :func:`count_exactly`) when given, else
    ``counted`` (a count ``counter`` already made: a caller that caches counts, like the
    router, need not count twice), else ``counter.count(request)``. Fits when input +
    :func:`reserved_output` <= the window: ``window`` when given (one a provider stated, see
    :class:`failover.policy.WindowBoard`), else the target's ``context_window``. A target with
    no known window always fits: an undeclared window is unknown, not small.
    """
    if exact is not None:
        tokens = exact
    else:
        tokens = counted if counted is not None else counter.count(request)
    out = reserved_output(target, request)
    if window is None:
        window = target.context_window
    fits = window is None or tokens + out <= window
    source = f"{target.dialect} count_tokens" if exact is not None else counter.name
    reason = None
    if not fits and window is not None:
        approx = "" if exact is not None else "~"
        reason = (
            f"input {approx}{tokens} ({source}) + max_tokens {out} tokens exceeds "
            f"context window {window} by {tokens + out - window}"
        )
    return PreflightResult(
        tokens=tokens, max_tokens=out, window=window, fits=fits, exact=exact is not None, counter=source, reason=reason
    )


async def measure(
    target: Target,
    request: Request,
    *,
    transport: Transport | None = None,
    timeout: float = 1.0,  # noqa: ASYNC109 - passed on to count_exactly
    counter: TokenCounter | None = None,
    margin: float = 0.1,
    window: int | None = None,
) -> PreflightResult:
    """Count ``request`` on ``target`` and check the window, asking the provider when useful.

    The local count (``counter``, default ``counter_for(target)``) decides, unless it is
    :func:`near_window` and a ``transport`` is given and the target's dialect counts remotely:
    then :func:`count_exactly` is awaited (at most ``timeout`` seconds) and its count decides
    when it answers. ``window``: a window the target's provider stated, for a target that
    declares none; with no known window nothing is asked (anything fits an unknown window).
    """
    local = counter if counter is not None else counter_for(target)
    estimated = local.count(request)
    exact = None
    known = window if window is not None else target.context_window
    if (
        transport is not None
        and known is not None
        and near_window(estimated, reserved_output(target, request), known, margin)
        and counts_remotely(target)
    ):
        exact = await count_exactly(target, request, transport, timeout=timeout)
    return preflight(target, request, local, exact=exact, counted=estimated, window=known)
