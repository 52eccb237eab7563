"""The OpenAI-compatible ASGI app: ``create_app(router, settings)``.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/messages`` and ``POST /v1/responses``
(plain and SSE), ``POST /v1/embeddings``, ``GET /v1/models`` (the routes),
``GET /v1/models/{route}``, ``GET /admin/health`` (admin key), ``GET /healthz``.

The chat endpoint is a plain ASGI callable rather than a Starlette request handler, so that
it can watch ``http.disconnect`` for the whole exchange: a client that goes away cancels the
router at once (the upstream HTTP request or stream is closed), for plain calls and streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import Mount
from starlette.routing import Route as HttpRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from ..inbound._headers import record_headers  # shared with failover.httpx_client
from ..model._json import dumps as _dumps
from ..policy import BreakerSnapshot
from ..router import Router
from ._chat import ChatCompletions
from ._embeddings import EmbeddingsEndpoint
from ._errors import ApiError
from ._gateway import Gateway
from ._http import answers_errors, json_response
from ._messages import Messages, count_tokens
from ._metrics import CONTENT_TYPE
from ._openapi import openapi_schema
from ._responses import Responses, stored_response
from ._settings import GatewaySettings, Tenant

log = logging.getLogger("failover.gateway")


Reloader = Callable[[], tuple[Router, GatewaySettings]]


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


def _reload_on_sighup(gw: Gateway, reload: Reloader) -> None:
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


def _drain_on_signals(gw: Gateway) -> None:
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


def _breaker_entry(snap: BreakerSnapshot, now: float) -> dict[str, Any]:
    """A breaker for /admin/health: ``retry_at`` as a UTC wall-clock time (the snapshot's is
    the event loop's clock, which means nothing outside the process), ``retry_in_s`` as seconds
    from now."""
    entry = dataclasses.asdict(snap)
    if snap.retry_at is None:
        entry["retry_in_s"] = None
        return entry
    left = max(0.0, snap.retry_at - now)
    entry["retry_in_s"] = round(left, 3)
    when = datetime.fromtimestamp(time.time() + left, UTC)
    entry["retry_at"] = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return entry


def _lab_app(gw: Gateway) -> ASGIApp:
    from ..lab._seed import LabPolicies
    from ..lab._web import lab_app  # imported only when the lab is switched on

    # the simulator runs with the served config's policies (a fresh budget with its parameters)
    policies = LabPolicies.of(gw.router.backoff, gw.router.retry_budget, "this gateway's config")
    keep = gw.settings.lab_live_keep
    if keep is None:
        return lab_app(policies=policies)
    from ..lab._live import LiveRecords
    from ..lab._web import LiveView

    def candidates(route: str) -> list[str]:
        r = gw.router.routes.get(route)
        return [t.name for t in r.targets] if r is not None else []

    records = LiveRecords(keep, scrub=lambda text: gw.scrub(text), candidates=candidates)
    gw.records = records

    async def authorize(request: HttpRequest) -> Response | None:
        try:
            gw.authenticate_admin(request.scope, request.headers)
        except ApiError as err:
            return json_response(err.status, err.body(), err.headers)
        return None

    return lab_app(
        policies=policies,
        live=LiveView(
            records=records,
            authorize=authorize,
            routes=lambda: list(gw.router.routes),
            closing=lambda: gw.draining,
        ),
    )


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

    def listing(request: HttpRequest) -> tuple[Tenant | None, bool]:
        """The caller's tenant, and whether it speaks Anthropic (its SDK always sends
        ``anthropic-version`` and may send its key as ``x-api-key``)."""
        headers = request.headers
        anthropic_client = "anthropic-version" in headers
        key = headers.get("x-api-key") if anthropic_client else None
        creds: Mapping[str, str] = {"authorization": f"Bearer {key.strip()}"} if key else headers
        return gw.authenticate(request.scope, creds), anthropic_client

    def model_entry(name: str, anthropic_client: bool) -> dict[str, Any]:
        if not anthropic_client:
            return {"id": name, "object": "model", "created": gw.started, "owned_by": "failover"}
        route = gw.router.routes[name]
        entry: dict[str, Any] = {
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": datetime.fromtimestamp(gw.started, UTC).isoformat().replace("+00:00", "Z"),
            "lifecycle": "active",
        }
        if route.primary:  # what the route's first target takes and gives
            entry["max_input_tokens"] = route.primary[0].context_window
            entry["max_tokens"] = route.primary[0].max_output_tokens
        return entry

    @answers_errors
    async def models(request: HttpRequest) -> Response:
        tenant, anthropic_client = listing(request)
        names = [name for name in gw.router.routes if tenant is None or tenant.allows(name)]
        data = [model_entry(name, anthropic_client) for name in names]
        if anthropic_client:  # Anthropic's page: one page with everything
            page = {"data": data, "has_more": False, "first_id": names[0] if names else None}
            return json_response(200, {**page, "last_id": names[-1] if names else None})
        return json_response(200, {"object": "list", "data": data})

    @answers_errors
    async def model(request: HttpRequest) -> Response:
        tenant, anthropic_client = listing(request)
        name = request.path_params["name"]
        if name not in gw.router.routes or (tenant is not None and not tenant.allows(name)):
            raise ApiError(404, f"the model {name!r} does not exist", code="model_not_found", param="model")
        return json_response(200, model_entry(name, anthropic_client))

    @answers_errors
    async def admin_health(request: HttpRequest) -> Response:
        gw.authenticate_admin(request.scope, request.headers)
        now = asyncio.get_running_loop().time()
        breakers = [_breaker_entry(b, now) for b in gw.router.breakers.snapshots(now)]
        limiters: dict[str, Any] = {}
        if gw.router.limiters is not None:
            # with a `state:` store, the fleet's buckets (each snapshot's `view` says whose)
            for snap in (await gw.router.limiters.shared_snapshot(now)).values():
                limiters[snap.name] = dataclasses.asdict(snap)
        body = {
            "status": "ok",
            "open": s.open,
            "routes": {
                name: {"primary": [t.name for t in r.primary], "fallbacks": [t.name for t in r.fallbacks]}
                for name, r in gw.router.routes.items()
            },
            "breakers": breakers,
            "limiters": limiters,
            "tenants": gw.quotas.snapshot() if gw.quotas.local else await gw.quotas.shared_snapshot(),
            "in_flight": len(gw.in_flight),
            "draining": gw.draining,
        }
        return json_response(200, body)

    async def healthz(request: HttpRequest) -> Response:
        return json_response(200, {"status": "ok"})

    async def readyz(request: HttpRequest) -> Response:
        if gw.draining:
            return json_response(503, {"status": "draining"}, {"retry-after": "1"})
        return json_response(200, {"status": "ready"})

    schema = _dumps(openapi_schema(metrics=s.metrics_enabled))

    async def openapi(request: HttpRequest) -> Response:
        return Response(schema, status_code=200, media_type="application/json")

    @answers_errors
    async def metrics(request: HttpRequest) -> Response:
        if s.metrics_require_admin_key:
            gw.authenticate_admin(request.scope, request.headers)
        return Response(gw.metrics.render(), status_code=200, media_type=CONTENT_TYPE)

    async def http_error(request: HttpRequest, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
        message = f"{request.method} {request.url.path}: " + (
            exc.detail if isinstance(exc, HTTPException) else "internal gateway error"
        )
        err = ApiError(status, message, code=code)
        headers = dict(err.headers)
        if isinstance(exc, HTTPException) and exc.headers:  # a 405's Allow
            headers.update(exc.headers)
        return json_response(status, err.body(), headers)

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
            _reload_on_sighup(gw, reload)
        try:
            yield
            await gw.drain(s.drain_seconds)  # a no-op when the server already drained (failover serve)
        finally:
            if close_router:
                await gw.router.aclose()

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
            HttpRoute("/admin/health", admin_health, methods=["GET"]),
            HttpRoute("/healthz", healthz, methods=["GET"]),
            HttpRoute("/readyz", readyz, methods=["GET"]),
            HttpRoute("/openapi.json", openapi, methods=["GET"]),
            *([HttpRoute("/metrics", metrics, methods=["GET"])] if s.metrics_enabled else []),
            *([Mount("/lab", app=_lab_app(gw))] if s.lab_enabled else []),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    # No redirect from /path/ to /path: Starlette would build it from the Host header (any
    # host a client names); a path with a trailing slash is a 404 like any unknown path.
    app.router.redirect_slashes = False
    app.state.gateway = gw
    return app


__all__ = ["GatewayApp", "create_app", "record_headers"]
