"""Noticing that a client went away, and cancelling what was being done for it.

Under ``failover serve`` the serving protocol resolves a future of its own when a connection is
lost (the :data:`CONNECTION_LOST` scope extension); under any other ASGI server a task waits on
``receive()``, as the server only reports a disconnect to a pending ``receive()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.types import Receive, Scope

_T = TypeVar("_T")

CONNECTION_LOST = "failover.connection_lost"  # the scope extension failover serve's protocol adds
WRITE_TIMED_OUT = "failover.write_timed_out"  # set (True) by that protocol when it dropped a client that did not read
# a callable of that protocol's: True once the request's whole body has arrived (receive() will not wait)
BODY_RECEIVED = "failover.body_received"


class Disconnect:
    """Tells when the client goes away (``future`` resolves).

    Under ``failover serve`` the serving protocol offers a future of its own, resolved when
    the connection is lost (the ``failover.connection_lost`` scope extension): no task per
    request. Under any other ASGI server, a task waits on ``receive()``, as the server only
    reports a disconnect to a pending ``receive()``."""

    __slots__ = ("_task", "future")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        ext = scope.get("extensions")
        lost = ext.get(CONNECTION_LOST) if ext else None
        if lost is not None:
            self.future: asyncio.Future[None] = lost
            self._task: asyncio.Future[None] | None = None
        else:
            self.future = self._task = asyncio.ensure_future(_wait_disconnect(receive))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()  # (the protocol's future is the connection's, never ours to cancel)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


@dataclasses.dataclass(slots=True)
class Interrupted:
    """Why :func:`interruptible` cancelled its call: ``"client"`` (disconnected) or ``"drain"``.
    ``outer``: the cancellation came from outside (the server); re-raise it after logging."""

    reason: str
    outer: BaseException | None = None


async def interruptible(
    call: Coroutine[Any, Any, _T],
    scope: Scope,
    receive: Receive,
    stop: asyncio.Future[None],
    gone: Disconnect | None = None,
) -> _T | Interrupted:
    """Await ``call`` in the current task, and cancel it at once when the client disconnects
    or the drain resolves ``stop``; its own exceptions propagate. ``gone``: the caller's own
    watch on the client (it closes it); left out, one is made here and closed on return.

    Running ``call`` in this task (rather than in a task of its own raced with
    ``asyncio.wait``) saves a task and a wait on every request, and a turn of the loop
    before ``call`` starts."""
    task = asyncio.current_task()
    assert task is not None
    why: list[str] = []

    def on_client(future: asyncio.Future[None]) -> None:
        if not why and not future.cancelled():
            why.append("client")
            task.cancel()

    def on_drain(future: asyncio.Future[None]) -> None:
        if not why:
            why.append("drain")
            task.cancel()

    own = gone is None
    watch = Disconnect(scope, receive) if gone is None else gone
    watch.future.add_done_callback(on_client)
    stop.add_done_callback(on_drain)

    def detach() -> None:
        watch.future.remove_done_callback(on_client)
        stop.remove_done_callback(on_drain)
        if own:
            watch.close()

    try:
        result = await call
    except asyncio.CancelledError as exc:
        detach()
        if not why:
            return Interrupted("client", outer=exc)
        task.uncancel()
        return Interrupted(why[0])
    except BaseException:
        detach()
        raise
    detach()
    if why:  # cancelled as the call finished without noticing: the answer has nobody to go to
        task.uncancel()
        return Interrupted(why[0])
    return result


def gone_note(scope: Scope) -> str:
    """The access line's note for a stream whose client left: it disconnected, or the serving
    protocol dropped it for not reading."""
    ext = scope.get("extensions")
    if ext and ext.get(WRITE_TIMED_OUT):
        return "client stopped reading (limits.write_timeout_s); connection dropped, upstream stream closed"
    return "client disconnected; upstream stream closed"


__all__ = ["CONNECTION_LOST", "WRITE_TIMED_OUT", "Disconnect", "Interrupted", "gone_note", "interruptible"]
