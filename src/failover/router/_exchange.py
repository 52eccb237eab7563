"""One exchange's plumbing, shared by every kind of work: the plain send, and the one place
that classifies what an exchange raised (a timeout, a transport error, a credential chain
that gave nothing) as the attempt's Failure.
"""

from __future__ import annotations

import asyncio

from ..auth import AuthError
from ..model import Failure, FailureKind, Request, Response, Target, TimeoutPhase
from ..transport import TransportError
from ._parts import RouterParts


async def plain_exchange(
    router: RouterParts, target: Target, request: Request, total: float, connect: float
) -> tuple[int, Response | Failure]:
    """One plain attempt's exchange, ``(status, outcome)``; a timeout, a transport error or an
    AuthError propagates (:func:`exchange_failure` classifies it)."""
    dialect = router.dialect(target)
    http = dialect.build(target, request)
    send_total, send_connect = total, connect
    if router.auth.needed(target):
        # a token refresh is part of the attempt: bounded by it, and what it took is
        # not the send's (a stream's first-event timer covers it the same way)
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(total):
            http = await router.auth.authorize(target, http)
        send_total = max(0.0, total - (loop.time() - began))
        send_connect = min(connect, send_total)
    if router.transport_enforces_total:
        resp = await router.transport.send(http, connect_timeout=send_connect, total_timeout=send_total)
    else:
        async with asyncio.timeout(send_total):
            resp = await router.transport.send(http, connect_timeout=send_connect, total_timeout=send_total)
    return resp.status, dialect.parse(target, resp)


def exchange_failure(
    exc: TimeoutError | TransportError | AuthError,
    total: float,
    left: float,
    target: Target,
    status: int | None = None,
) -> Failure:
    """What an attempt's exchange raised, as its classified Failure (``total``: the attempt's
    own cap, ``left``: the deadline's time when it started, ``status``: the answer's status
    when one had come). A stream's own timers are its own (see _stream.StreamTimers)."""
    if isinstance(exc, AuthError):  # the target's credential chain gave nothing to send with
        return Failure(kind=FailureKind.AUTHENTICATION_OR_PERMISSION, message=str(exc))
    if isinstance(exc, TimeoutError) or exc.phase == "total":
        return Failure(kind=FailureKind.TIMEOUT, phase=TimeoutPhase.TOTAL, message=_total_msg(total, left, target))
    if exc.phase == "connect_timeout":
        return Failure(kind=FailureKind.TIMEOUT, phase=TimeoutPhase.CONNECT, message=str(exc))
    if exc.phase == "too_large":  # an answer over the transport's limits: the upstream's fault
        return Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, status=status, message=str(exc))
    return Failure(kind=FailureKind.TRANSPORT_TRANSIENT, message=str(exc))


def maybe_billed(failure: Failure) -> bool:
    """A request that reached the provider and was cut off may have been billed for input."""
    return failure.kind is FailureKind.TIMEOUT and failure.phase is not TimeoutPhase.CONNECT


def _total_msg(total: float, left: float, target: Target) -> str:
    if total >= left:
        return f"no complete response before the deadline ({total:.3f}s left)"
    if total < target.attempt_cap():
        return f"no complete response within the {total:.3f}s this replay had (the rest is kept for the next tier)"
    return f"no complete response within the {total:.3f}s attempt cap"


__all__ = ["exchange_failure", "maybe_billed", "plain_exchange"]
