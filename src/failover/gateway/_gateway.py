"""The state every endpoint shares (:class:`Gateway`): the router and settings (swapped by a
reload), the secret scrubber, tenant quotas, metrics, the requests in flight (for a graceful
drain), and the end of every request (the tenant's charge, metrics, the access line)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Protocol

from pydantic import ValidationError

from ..inbound import Origins, SchemaField, Scrubber, check_schemas
from ..model import RouteRecord, may_overflow
from ..router import Router
from ._body import decode_json
from ._envelope import RecentRequests
from ._exchange import Exchange
from ._logs import ACCESS_LOGGER, AccessLine
from ._metrics import GatewayMetrics
from ._openai import ChatCompletionBody, parse_body
from ._quota import TenantQuotas, store_of
from ._reclaim import Reclaimer
from ._settings import GatewaySettings

log = logging.getLogger("failover.gateway")
access_log = logging.getLogger(ACCESS_LOGGER)

_ACCESS_FORMAT = "%s route=%s tenant=%s status=%d request_id=%s target=%s attempts=%s ms=%.1f%s"
_access_line = AccessLine(access_log, _ACCESS_FORMAT)


class RecordSink(Protocol):
    """Receives every finished chat request's RouteRecord: the lab's live view
    (``gateway.lab_live``). ``add`` runs on the event loop at the end of each request."""

    def add(self, record: RouteRecord, *, status: int, tenant: str | None, stream: bool) -> None: ...

    def close(self) -> None:
        """The gateway drains: end what is waiting on new records."""


class Gateway:
    """The state shared by every endpoint: the router, the settings, the secret scrubber,
    tenant quotas, metrics, and the requests in flight (for a graceful drain)."""

    def __init__(self, router: Router, settings: GatewaySettings) -> None:
        router.schema_limits = settings.schema_limits  # what the router checks of a request not vetted here
        self.router = router
        self.settings = settings
        self.scrub = Scrubber.of(router.routes.values())
        self.started = int(time.time())
        self.quotas = TenantQuotas(settings.tenants, store=store_of(router))  # fleet-wide with a `state:` store
        self.in_flight: dict[asyncio.Future[None], Router] = {}  # request -> the router it runs on
        self.draining = False
        self._idle: asyncio.Event | None = None
        self._drain_task: asyncio.Task[None] | None = None
        self._reclaimer = Reclaimer()  # see reclaim_soon
        self._retiring: asyncio.Task[None] | None = None
        self._reload_task: asyncio.Task[None] | None = None
        self._retiring_done: dict[int, asyncio.Event] = {}
        self.metrics = GatewayMetrics(lambda: self.router, lambda: len(self.in_flight), lambda: self.draining)
        self.recent = RecentRequests()  # Idempotency-Keys and bodies seen: a repeat is a client's retry
        self.records: RecordSink | None = None  # the lab's live view, when gateway.lab_live is on
        self.origins = Origins()  # who wrote the reasoning handed out raw: kept from another model

    # -- in flight and drain ----------------------------------------------------------------------

    def enter(self, router: Router) -> asyncio.Future[None]:
        """Register a request in flight; the future is resolved when the drain cuts it."""
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.in_flight[stop] = router
        return stop

    def leave(self, stop: asyncio.Future[None]) -> None:
        router = self.in_flight.pop(stop, None)
        done = self._retiring_done.get(id(router))
        if done is not None and not any(r is router for r in self.in_flight.values()):
            done.set()  # the last request on a replaced router is done: it can be closed
        if not self.in_flight and self._idle is not None:
            self._idle.set()

    async def _until_idle(self, seconds: float) -> None:
        if not self.in_flight:
            return
        self._idle = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), seconds)

    async def drain(self, seconds: float, *, grace: float = 5.0) -> int:
        """Stop accepting chat requests, wait up to ``seconds`` for those in flight, then cut
        the rest (their upstream calls and streams are closed). Returns how many were cut."""
        self.draining = True
        if self.records is not None:
            self.records.close()  # open live-view streams end, so the server can stop
        await self._until_idle(seconds)
        cut = 0
        for stop in list(self.in_flight):
            if not stop.done():
                stop.set_result(None)
                cut += 1
        if cut:
            log.warning("drain: cutting %d request(s) still in flight after %.1fs", cut, seconds)
            await self._until_idle(grace)
        return cut

    # -- reload ---------------------------------------------------------------------------------

    def swap(self, router: Router, settings: GatewaySettings) -> asyncio.Task[None]:
        """Serve new requests with ``router`` and ``settings``; requests in flight finish on
        the old router, which is closed once the last of them is done (the returned task).
        Tenant quota state carries over for tenants whose limits did not change."""
        old = self.router
        router.schema_limits = settings.schema_limits
        quotas = TenantQuotas(settings.tenants, clock=self.quotas.clock, wall=self.quotas.wall, store=store_of(router))
        quotas.carry_over(self.quotas)
        self.router, self.settings, self.scrub, self.quotas = (
            router,
            settings,
            Scrubber.of(router.routes.values()),
            quotas,
        )

        async def retire() -> None:
            if old is router:
                return
            if any(r is old for r in self.in_flight.values()):
                done = self._retiring_done[id(old)] = asyncio.Event()
                try:
                    await done.wait()
                finally:
                    self._retiring_done.pop(id(old), None)
            await old.aclose()

        task = asyncio.get_running_loop().create_task(retire())
        self._retiring = task
        return task

    # -- the request's work -------------------------------------------------------------------

    def reclaim_soon(self) -> None:
        """Reclaim, a moment from now, what a hostile or cut request left behind (see _reclaim);
        one pending reclaim at a time."""
        self._reclaimer.soon()

    async def check_schemas(self, fields: list[SchemaField]) -> None:
        """Meta-validate and compile the request's client schemas (cached) off the event loop:
        a large new schema takes tens of milliseconds, and none of it may stall other tenants.
        A refused one is a 400 naming the field (a WireError)."""
        if not fields:
            return
        await asyncio.to_thread(check_schemas, fields, self.settings.schema_limits)

    def chat_body(self, raw: bytes) -> ChatCompletionBody:
        """Decode and validate a chat body in one pass (pydantic's JSON parser) when the body
        cannot be too deep (fewer brackets than the depth limit) and holds no number that may
        overflow a float (pydantic reads 1e999 as infinity). Any problem, or a deeper-looking
        body, takes the general path, so errors read exactly as before."""
        if raw.count(b"{") + raw.count(b"[") < self.settings.max_json_depth and not may_overflow(raw):
            with contextlib.suppress(ValidationError):
                return ChatCompletionBody.model_validate_json(raw)
        return parse_body(decode_json(raw, self.settings.max_json_depth))

    # -- the end of a request -------------------------------------------------------------------

    def finish(
        self, ex: Exchange, status: int, *, record: RouteRecord | None = None, note: str = "", code: str | None = None
    ) -> None:
        """The end of one request: how it ended is kept on ``ex``; charge the tenant, count it,
        log one access line."""
        ex.status, ex.record, ex.note, ex.code = status, record, note, code
        tenant, route, request_id, stream = ex.tenant, ex.route, ex.request_id, ex.stream
        tenant_name = tenant.name if tenant is not None else None
        known_route = route if route is not None and route in self.router.routes else None  # None: an unknown model
        # a stream's note is its failure; an answer given without any upstream attempt (a hold,
        # a limiter or budget refusal) cost nothing upstream: the client coming back is new
        tried = record is None or bool(record.attempts)
        spent = not tried and record is not None and record.retry_budget_exhausted
        self.recent.ended(request_id, status, cut=status < 400 and bool(note), tried=tried, spent=spent)
        if status >= 499:  # a client that left, an upstream that failed: their exceptions hold cycles
            self.reclaim_soon()
        try:
            self.quotas.charge(tenant, record)
            self.metrics.observe(known_route, status, tenant_name, record)
            if code in {"rate_limit_exceeded", "budget_exhausted"} and tenant_name is not None:
                self.metrics.tenant_refusals.labels(tenant_name, code).inc()
            if self.records is not None and record is not None:
                self.records.add(record, status=status, tenant=tenant_name, stream=stream)
        except Exception as exc:  # accounting must never break an answer
            log.error("accounting failed for request %s: %s", request_id, type(exc).__name__)
        if not access_log.isEnabledFor(logging.INFO):
            return
        seconds = time.perf_counter() - ex.started
        entry = (request_id, tenant_name, known_route, stream, status, record, seconds, code, note)
        _access_line.write(_access_parts, entry)


# what finish() keeps of a request for its access line
_AccessEntry = tuple[str | None, str | None, str | None, bool, int, RouteRecord | None, float, str | None, str]


def _access_parts(entry: _AccessEntry) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The access line's message arguments and JSON fields, from what :meth:`Gateway.finish`
    kept of a request (made when the line's batch is written: see AccessLine)."""
    request_id, tenant_name, route, stream, status, record, seconds, code, note = entry
    elapsed = round(seconds * 1000, 1)
    fields: dict[str, Any] = {
        "event": "request",
        "request_id": request_id,
        "tenant": tenant_name,
        "route": route,
        "stream": stream,
        "status": status,
        "target": record.target_used if record is not None else None,
        "attempts": len(record.attempts) if record is not None else 0,
        "recovered": record.recovered if record is not None else False,
        "workflow": record.workflow.value if record is not None else None,
        "elapsed_ms": elapsed,
        "cost_usd": round(record.total_cost, 8) if record is not None else 0.0,
    }
    if code:
        fields["code"] = code
    if note:
        fields["note"] = note
    args = (  # the text line shows "-" where the JSON line has null (a 404's unknown model: no route)
        "stream" if stream else "chat",
        route or "-",
        tenant_name or "-",
        status,
        request_id or "-",
        fields["target"] or "-",
        fields["attempts"],
        elapsed,
        f" {note}" if note else "",
    )
    return args, fields


__all__ = ["Gateway", "RecordSink"]
