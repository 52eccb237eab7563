"""The gateway's signal handlers: SIGHUP reloads the configuration, SIGTERM / SIGINT drain the
requests in flight before the server's own shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from ..router import Router
from ._gateway import Gateway
from ._settings import GatewaySettings

log = logging.getLogger("failover.gateway")

Reloader = Callable[[], tuple[Router, GatewaySettings]]


def reload_on_sighup(gw: Gateway, reload: Reloader) -> None:
    """On SIGHUP: build a new router and settings (in a thread: it reads files) and swap them
    in. A configuration error keeps the old one serving and is logged."""
    loop = asyncio.get_running_loop()

    async def run() -> None:
        try:
            router, settings = await asyncio.to_thread(reload)
        except Exception as exc:
            log.error("reload failed, still serving the previous configuration: %s", gw.scrub(str(exc)))
            return
        gw.swap(router, settings)
        log.info("configuration reloaded: %d route(s), %d tenant(s)", len(router.routes), len(settings.tenants))

    def handle() -> None:
        gw._reload_task = loop.create_task(run())

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, AttributeError):
        loop.add_signal_handler(signal.SIGHUP, handle)


def drain_on_signals(gw: Gateway) -> None:
    """On SIGTERM / SIGINT: drain first (readyz 503, new requests 503, in-flight ones finish or
    are cut after ``drain_seconds``), then hand the signal to the server's own handler (uvicorn
    then closes its sockets and exits). A second signal skips the wait."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def handle(sig: signal.Signals = sig, previous: Callable[[int, Any], Any] = previous) -> None:
            async def drain_then_exit() -> None:
                try:
                    await gw.drain(gw.settings.drain_seconds)
                finally:
                    previous(sig, None)

            if gw.draining:
                previous(sig, None)
            else:
                gw._drain_task = loop.create_task(drain_then_exit())

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, handle)


__all__ = ["Reloader", "drain_on_signals", "reload_on_sighup"]
