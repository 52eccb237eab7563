"""The gateway as an ASGI app: ``create_app(router, settings)`` puts the pieces together.

Endpoints: ``POST /v1/chat/completions`` (:mod:`._chat`), ``POST /v1/messages`` (:mod:`._messages`)
and ``POST /v1/responses`` (:mod:`._responses`), plain and SSE, each one dialect of the shared
lifecycle (:mod:`._endpoint`, streams relayed by :mod:`._stream_reply`); ``POST /v1/embeddings``
(:mod:`._embeddings`); ``GET /v1/models`` and ``GET /v1/models/{route}`` (:mod:`._listing`);
``GET /admin/health``, ``/healthz``, ``/readyz``, ``/metrics``, ``/openapi.json`` and the lab
(:mod:`._ops`). Their shared state is :class:`~failover.gateway._gateway.Gateway`; SIGHUP and
SIGTERM / SIGINT are handled by :mod:`._signals`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import Route as HttpRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from ..inbound import record_headers  # shared with failover.httpx_client
from ..router import Router
from ._chat import ChatCompletions
from ._embeddings import EmbeddingsEndpoint
from ._errors import ApiError, error_response
from ._gateway import Gateway
from ._listing import model_listing
from ._logs import drain_logs
from ._messages import Messages, count_tokens
from ._ops import ops_routes
from ._responses import Responses, stored_response
from ._settings import GatewaySettings
from ._signals import Reloader, reload_on_sighup
from ._signals import drain_on_signals as _drain_on_signals  # (create_app has a flag of that name)

log = logging.getLogger("failover.gateway")


class GatewayApp(Starlette):
    """Starlette, with the hot endpoints dispatched before its middleware stack and router.

    Every route registered as a raw ASGI app on a fixed path (``/v1/chat/completions``, and
    the same way any other inbound format such as ``/v1/messages``) is called directly when
    the method matches: Starlette's error and exception middleware, its router's path
    matching and its per-request ``Request`` objects cost about a tenth of the gateway's CPU
    per request. These endpoints answer their own errors (JSON bodies), so nothing is lost;
    an exception that escapes still reaches the server, which logs it and answers 500.
    Everything else (and every route, when CORS middleware is configured) goes through
    Starlette as usual.
    """

    def __init__(self, *, fast_dispatch: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fast_routes: dict[str, tuple[ASGIApp, frozenset[str]]] = {}
        if not fast_dispatch:
            return
        for r in self.routes:
            if isinstance(r, HttpRoute) and not r.param_convertors and r.app is r.endpoint and r.methods:
                self.fast_routes[r.path] = (r.app, frozenset(r.methods))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            hit = self.fast_routes.get(scope["path"])
            if hit is not None and scope["method"] in hit[1]:
                scope["app"] = self
                await hit[0](scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _http_error(request: HttpRequest, exc: Exception) -> Response:
    """Starlette's own errors (an unknown path, a wrong method) in the gateway's error body."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    message = f"{request.method} {request.url.path}: " + (
        exc.detail if isinstance(exc, HTTPException) else "internal gateway error"
    )
    extra = exc.headers if isinstance(exc, HTTPException) else None  # a 405's Allow
    return error_response(ApiError(status, message, code=code, headers=extra))


def create_app(
    router: Router,
    settings: GatewaySettings | None = None,
    *,
    close_router: bool = False,
    drain_on_signals: bool = False,
    reload: Reloader | None = None,
) -> Starlette:
    """The gateway as an ASGI app. ``close_router``: ``aclose()`` the router at shutdown.
    ``drain_on_signals`` (``failover serve`` sets it): SIGTERM / SIGINT drain in-flight
    requests before the server's own shutdown begins. ``reload``: on SIGHUP, call it (in a
    thread) for a new router and settings and swap them in without dropping requests."""
    gw = Gateway(router, settings or GatewaySettings())
    s = gw.settings
    if s.open:
        log.warning(
            "gateway is OPEN: no tenants are configured, so no API key is checked; it answers loopback clients only"
        )
    middleware = []
    if s.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(s.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=list(s.cors_headers),
                expose_headers=["x-request-id", "x-failover-request-id", "x-failover-target", "x-failover-attempts"],
            )
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gw.draining = False  # a (re)started server serves again
        if drain_on_signals:
            _drain_on_signals(gw)
        if reload is not None:
            reload_on_sighup(gw, reload)
        try:
            yield
            await gw.drain(s.drain_seconds)  # a no-op when the server already drained (failover serve)
        finally:
            if close_router:
                await gw.router.aclose()
            drain_logs()  # the last access lines, before the process ends (bounded: 2 s)

    models, model = model_listing(gw)
    app = GatewayApp(
        fast_dispatch=not middleware,  # CORS must see every request
        routes=[
            HttpRoute("/v1/chat/completions", ChatCompletions(gw), methods=["POST"]),
            HttpRoute("/v1/messages", Messages(gw), methods=["POST"]),
            HttpRoute("/v1/messages/count_tokens", count_tokens(gw), methods=["POST"]),
            HttpRoute("/v1/responses", Responses(gw), methods=["POST"]),
            HttpRoute("/v1/responses/{id:path}", stored_response(gw), methods=["GET", "POST", "DELETE"]),
            HttpRoute("/v1/embeddings", EmbeddingsEndpoint(gw), methods=["POST"]),
            HttpRoute("/v1/models", models, methods=["GET"]),
            HttpRoute("/v1/models/{name:path}", model, methods=["GET"]),
            *ops_routes(gw),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    # No redirect from /path/ to /path: Starlette would build it from the Host header (any
    # host a client names); a path with a trailing slash is a 404 like any unknown path.
    app.router.redirect_slashes = False
    app.state.gateway = gw
    return app


__all__ = ["GatewayApp", "create_app", "record_headers"]
