"""Prometheus metrics for the gateway, fed from each request's RouteRecord when it ends.

What the routers do (latency histograms under the OpenTelemetry GenAI names where they exist,
attempts, recoveries, deadline exhausted, no eligible candidate, limiter waits, tokens, cost) is
defined once, by the library (:class:`~failover.telemetry._prometheus.RouterMetrics`, which
``PrometheusHook`` extends, over ``failover.telemetry._instruments``), so the gateway and the
hook expose the same names and labels. Nothing is measured on the hot path beyond a few
counter increments and histogram observations at the end of a request, on label children
resolved once; breaker states and in-flight counts are read when ``/metrics`` is scraped. Each
app has its own registry (several apps in one process do not mix their numbers); with
``--workers N`` each worker process answers with its own counts, as its state is its own.

Label values are bounded by the configuration: routes (an unknown ``model`` is counted as
``route="-"``), targets, models, tenants, failure labels and HTTP statuses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..model import RouteRecord
from ..policy import BreakerState
from ..router import Router
from ..state import BackendHealth
from ..telemetry import CounterFamily, RouterMetrics, feed_record

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _StateCollector(Collector):
    """Gauges read at scrape time: breaker states, requests in flight, draining."""

    def __init__(self, router: Callable[[], Router], in_flight: Callable[[], int], draining: Callable[[], bool]):
        self._router = router
        self._in_flight = in_flight
        self._draining = draining

    def collect(self) -> Iterable[Metric]:
        state = GaugeMetricFamily(
            "failover_breaker_state",
            "Circuit-breaker state (1 for the current state of each breaker)",
            labels=["scope", "layer", "state"],
        )
        opened = GaugeMetricFamily(
            "failover_breaker_opened", "Times each breaker has opened since start", labels=["scope", "layer"]
        )
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            now = None
        if now is not None:
            for snap in self._router().breakers.snapshots(now):
                for s in BreakerState:
                    state.add_metric([snap.scope, snap.layer, s.value], 1.0 if snap.state is s else 0.0)
                opened.add_metric([snap.scope, snap.layer], float(snap.open_count))
        yield state
        yield opened
        yield from _state_backend(self._router())
        yield GaugeMetricFamily("failover_gateway_in_flight", "Chat requests in flight", value=self._in_flight())
        yield GaugeMetricFamily(
            "failover_gateway_draining", "1 while the gateway drains for shutdown", value=float(self._draining())
        )


def _state_backend(router: Router) -> Iterable[Metric]:
    """Where breakers and limits live (failover.state): up, and calls answered locally instead."""
    store = getattr(router.breakers, "store", None) or getattr(router.limiters, "store", None)
    health = BackendHealth(backend="memory", up=True, fallbacks=0, transitions=0) if store is None else store.health()
    up = GaugeMetricFamily(
        "failover_state_backend_up", "1 while the shared state backend answers in time", labels=["backend"]
    )
    up.add_metric([health.backend], 1.0 if health.up else 0.0)
    fallbacks = CounterMetricFamily(
        "failover_state_fallbacks", "Calls answered by local state because the backend did not", labels=["backend"]
    )
    fallbacks.add_metric([health.backend], float(health.fallbacks))
    yield up
    yield fallbacks


class GatewayMetrics(RouterMetrics):
    """The gateway's registry: the library's router metrics
    (:class:`~failover.telemetry._prometheus.RouterMetrics`, the ones ``PrometheusHook`` has
    too, so names and labels cannot drift apart), the gateway's own HTTP status and tenant
    refusal counters, and the state gauges read at scrape time.

    The router metrics are fed here from the RouteRecord when a request ends, not by putting
    the hook on the routers: events cost the hot path ~6% (frozen dataclasses built per
    attempt), a record read costs next to nothing. It also keeps a reload simple: the
    registry belongs to the Gateway and outlives every router a reload swaps in."""

    def __init__(
        self, router: Callable[[], Router], in_flight: Callable[[], int], draining: Callable[[], bool]
    ) -> None:
        super().__init__(CollectorRegistry(auto_describe=True))
        r = self.registry
        self._router = router
        self.requests = CounterFamily(
            "failover_gateway_requests", "Chat requests answered, by route and HTTP status", ["route", "status"], r
        )
        self.tenant_refusals = CounterFamily(
            "failover_gateway_tenant_refusals", "Requests refused by a tenant limit", ["tenant", "code"], r
        )
        self.client_retries = CounterFamily(
            "failover_gateway_client_retries",
            "Requests that arrived as a client's own retry (x-stainless-retry-count > 0, a repeated "
            "Idempotency-Key): their attempts are charged to the retry budget",
            ["route"],
            r,
        )
        r.register(_StateCollector(router, in_flight, draining))

    def _provider_of(self, target: str) -> str:
        """The target's dialect, looked up once per kind of attempt (the series are kept)."""
        for route in self._router().routes.values():
            for t in route.targets:
                if t.name == target:
                    return str(t.dialect)
        return ""

    def observe(self, route: str | None, status: int, tenant: str | None, record: RouteRecord | None) -> None:
        """Count one finished request. ``route`` is a route of the current router or None (an
        unknown ``model``, counted as ``route="-"``): the caller has checked it, as its access
        line needs the same answer, so label values stay bounded by the configuration."""
        label = route if route is not None else "-"
        self.requests.labels(label, str(status)).inc()
        if record is not None:
            feed_record(self, record, route=label, tenant=tenant)

    def render(self) -> bytes:
        return generate_latest(self.registry)


__all__ = ["CONTENT_TYPE", "GatewayMetrics"]
