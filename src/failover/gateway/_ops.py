"""The operator's endpoints: ``/healthz``, ``/readyz`` (503 while draining), ``/admin/health``
(routes, breakers, limiters, tenants; admin key), ``/metrics`` (Prometheus), ``/openapi.json``,
and the lab page under ``/lab`` (with the live view of the gateway's last requests)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.routing import Route as HttpRoute
from starlette.types import ASGIApp

from ..model import dumps as _dumps
from ..policy import BreakerSnapshot
from ._auth import authenticate_admin
from ._errors import ApiError, error_response
from ._gateway import Gateway
from ._http import answers_errors, json_response
from ._metrics import CONTENT_TYPE
from ._openapi import openapi_schema


def ops_routes(gw: Gateway) -> list[BaseRoute]:
    """The operator's routes, for the settings the gateway starts with (``/metrics`` and
    ``/lab`` only where they are switched on)."""
    s = gw.settings

    @answers_errors
    async def admin_health(request: HttpRequest) -> Response:
        authenticate_admin(gw.settings, request.scope, request.headers)
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
            authenticate_admin(gw.settings, request.scope, request.headers)
        return Response(gw.metrics.render(), status_code=200, media_type=CONTENT_TYPE)

    return [
        HttpRoute("/admin/health", admin_health, methods=["GET"]),
        HttpRoute("/healthz", healthz, methods=["GET"]),
        HttpRoute("/readyz", readyz, methods=["GET"]),
        HttpRoute("/openapi.json", openapi, methods=["GET"]),
        *([HttpRoute("/metrics", metrics, methods=["GET"])] if s.metrics_enabled else []),
        *([Mount("/lab", app=_lab_app(gw))] if s.lab_enabled else []),
    ]


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
    from ..lab import (
        LabPolicies,
        lab_app,  # imported only when the lab is switched on
    )

    # the simulator runs with the served config's policies (a fresh budget with its parameters)
    policies = LabPolicies.of(gw.router.backoff, gw.router.retry_budget, "this gateway's config")
    keep = gw.settings.lab_live_keep
    if keep is None:
        return lab_app(policies=policies)
    from ..lab import LiveRecords, LiveView

    def candidates(route: str) -> list[str]:
        r = gw.router.routes.get(route)
        return [t.name for t in r.targets] if r is not None else []

    records = LiveRecords(keep, scrub=lambda text: gw.scrub(text), candidates=candidates)
    gw.records = records

    async def authorize(request: HttpRequest) -> Response | None:
        try:
            authenticate_admin(gw.settings, request.scope, request.headers)
        except ApiError as err:
            return error_response(err)
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


__all__ = ["ops_routes"]
