"""A thin synchronous facade for scripts and non-async code."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from ..model import Embeddings, EmbedInput, EmbedRequest, Envelope, Request, Response, Route
from ._router import Router

T = TypeVar("T")


class SyncRouter:
    """Runs a :class:`Router` on a private event loop in a background thread.

    >>> with SyncRouter(lambda: Router(routes)) as router:
    ...     router.complete("triage", Request.simple("hi"))

    The router (and its HTTP pool) lives on that loop for its whole life, so connections
    are reused across calls; each call blocks the calling thread only.
    """

    def __init__(self, factory: Callable[[], Router]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="failover-sync", daemon=True)
        self._thread.start()

        async def make() -> Router:
            return factory()

        self._router = self._run(make())

    @property
    def router(self) -> Router:
        return self._router

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the router's loop; ``.result()`` blocks for it, ``.cancel()``
        cancels it there. For code that drives the Router itself (``failover.sync_httpx_client``)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def complete(self, route: str | Route, request: Request, envelope: Envelope | None = None) -> Response:
        return self._run(self._router.complete(route, request, envelope))

    def embed(
        self,
        route: str | Route,
        inputs: str | Sequence[str] | EmbedRequest,
        *,
        dimensions: int | None = None,
        input_type: EmbedInput | str | None = None,
        envelope: Envelope | None = None,
    ) -> Embeddings:
        """:meth:`Router.embed`, blocking."""
        return self._run(
            self._router.embed(route, inputs, dimensions=dimensions, input_type=input_type, envelope=envelope)
        )

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._router.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> SyncRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
