"""Prometheus metrics from the events, for applications that use the library without the gateway.

    from prometheus_client import start_http_server
    router = Router(routes, hooks=[PrometheusHook()])   # the global registry
    start_http_server(9100)

Names and label sets match the gateway's own metrics (``failover.gateway._metrics``) wherever
they measure the same thing, so one dashboard reads both: ``failover_attempts_total{target,
outcome}``, ``failover_recoveries_total{workflow}``, ``failover_deadline_exhausted_total{route}``,
``failover_no_eligible_candidate_total{route}``, ``failover_limiter_waits_total{target}``,
``failover_limiter_wait_seconds_total{target}``, ``failover_tokens_total{target,kind}``,
``failover_cost_usd_total{route,tenant}``. The library adds what the gateway has no counterpart
for: ``failover_requests_total{route,outcome}``, ``failover_attempt_failures_total{target,kind}``,
``failover_backoffs_total{target,reason}`` and ``failover_backoff_seconds_total{target,reason}``,
``failover_breaker_transitions_total{scope,layer,state}``, and the histograms
``failover_attempt_duration_seconds{target,result}`` and ``failover_request_duration_seconds{route}``.

Label values are bounded by the configuration (routes, targets, tenants, breaker scopes) and
by closed sets (outcomes, failure kinds, reasons). Events carry no keys or text, so neither do
the metrics. prometheus_client is imported when the hook is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._events import AttemptEnded, Backoff, BreakerChanged, Event, RequestEnded

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter

# Seconds: an LLM attempt runs from ~100 ms (a fast 429) to minutes (a long generation).
ATTEMPT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)


class RouterCounters:
    """The counters the gateway exposes too, fed by the events: attempts, recoveries, deadline
    exhausted, no eligible candidate, limiter waits and seconds, tokens and cost.

    Defined once for both: :class:`PrometheusHook` adds the library's own metrics, and the
    gateway's metrics (``failover.gateway._metrics``) are these counters too, fed from each
    request's RouteRecord when it ends rather than from events (building the events costs the
    gateway's hot path several percent). Label children are kept (``labels()`` validates and
    locks on every call, and a request increments several); label values are bounded (see the
    module docstring), so the cache is too.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import REGISTRY, Counter

        r = registry if registry is not None else REGISTRY
        self.registry = r
        self._children: dict[tuple[object, ...], Counter] = {}
        self.attempts = Counter(
            "failover_attempts", "Attempts against targets, by target and outcome", ["target", "outcome"], registry=r
        )
        self.recoveries = Counter(
            "failover_recoveries",
            "Requests answered after an earlier attempt failed, by workflow",
            ["workflow"],
            registry=r,
        )
        self.deadline_exhausted = Counter(
            "failover_deadline_exhausted", "Requests that ran out of their deadline", ["route"], registry=r
        )
        self.no_candidate = Counter(
            "failover_no_eligible_candidate",
            "Requests refused before any attempt: no candidate could meet the contract",
            ["route"],
            registry=r,
        )
        self.limiter_waits = Counter(
            "failover_limiter_waits", "Waits for the client-side rate limiter, by target", ["target"], registry=r
        )
        self.limiter_wait_seconds = Counter(
            "failover_limiter_wait_seconds", "Seconds spent waiting for the rate limiter", ["target"], registry=r
        )
        self.tokens = Counter(
            "failover_tokens", "Tokens reported by providers, by target and kind", ["target", "kind"], registry=r
        )
        self.cost = Counter("failover_cost_usd", "USD spent, failed attempts included", ["route", "tenant"], registry=r)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(registry={self.registry!r})"

    def _child(self, counter: Counter, *labels: str) -> Counter:
        key = (id(counter), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = counter.labels(*labels)
        return child

    def __call__(self, event: Event, /) -> None:
        if isinstance(event, AttemptEnded):
            self._attempt(event)
        elif isinstance(event, Backoff):
            self._waited(event)
        elif isinstance(event, RequestEnded):
            self._request(event)

    def _attempt(self, e: AttemptEnded) -> None:
        self._child(self.attempts, e.target, e.outcome).inc()
        if e.input_tokens:
            self._child(self.tokens, e.target, "input").inc(e.input_tokens)
        if e.output_tokens:
            self._child(self.tokens, e.target, "output").inc(e.output_tokens)

    def _waited(self, e: Backoff) -> None:
        if e.reason == "rate_limit":  # the gateway's names for the client-side limiter
            self.limiter_waits.labels(e.target).inc()
            self.limiter_wait_seconds.labels(e.target).inc(max(0.0, e.seconds))

    def _request(self, e: RequestEnded) -> None:
        if e.recovered:
            self.recoveries.labels(e.workflow).inc()
        if e.outcome == "deadline_exhausted":
            self.deadline_exhausted.labels(e.route).inc()
        if e.outcome == "contract_failure" and e.attempts == 0:
            self.no_candidate.labels(e.route).inc()
        if e.total_cost > 0:
            self._child(self.cost, e.route, e.tenant or "-").inc(e.total_cost)


class PrometheusHook(RouterCounters):
    """A :class:`~failover.telemetry.Hook` that counts requests, attempts, waits, tokens and cost.

    >>> registry = CollectorRegistry()
    >>> router = Router(routes, hooks=[PrometheusHook(registry)])
    >>> registry.get_sample_value("failover_attempts_total", {"target": "a", "outcome": "ok"})

    One hook per registry: a second one on the same registry would register the same names
    twice (prometheus_client refuses that); share the hook between Routers instead.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import Counter, Histogram

        super().__init__(registry)
        r = self.registry
        self.requests = Counter(
            "failover_requests", "Requests that ended, by route and outcome", ["route", "outcome"], registry=r
        )
        self.attempt_failures = Counter(
            "failover_attempt_failures",
            "Failed attempts, by target and failure kind",
            ["target", "kind"],
            registry=r,
        )
        self.backoffs = Counter(
            "failover_backoffs", "Waits between attempts, by target and reason", ["target", "reason"], registry=r
        )
        self.backoff_seconds = Counter(
            "failover_backoff_seconds", "Seconds waited between attempts", ["target", "reason"], registry=r
        )
        self.breaker_transitions = Counter(
            "failover_breaker_transitions",
            "Circuit-breaker state changes, by scope, layer and the state entered",
            ["scope", "layer", "state"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "failover_attempt_duration_seconds",
            "Attempt latency, by target and result (ok, failed, cancelled)",
            ["target", "result"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.request_duration = Histogram(
            "failover_request_duration_seconds",
            "End-to-end request latency, recovery included, by route",
            ["route"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )

    def __call__(self, event: Event, /) -> None:
        if isinstance(event, BreakerChanged):
            self.breaker_transitions.labels(event.scope, event.layer, event.new).inc()
        else:
            super().__call__(event)

    def _attempt(self, e: AttemptEnded) -> None:
        super()._attempt(e)
        if e.failure is not None:
            self.attempt_failures.labels(e.target, e.failure).inc()
        result = "ok" if e.outcome == "ok" else "cancelled" if e.outcome == "cancelled" else "failed"
        self.attempt_duration.labels(e.target, result).observe(max(0.0, e.duration))

    def _waited(self, e: Backoff) -> None:
        seconds = max(0.0, e.seconds)
        self.backoffs.labels(e.target, e.reason).inc()
        self.backoff_seconds.labels(e.target, e.reason).inc(seconds)
        super()._waited(e)

    def _request(self, e: RequestEnded) -> None:
        self.requests.labels(e.route, e.outcome).inc()
        self.request_duration.labels(e.route).observe(max(0.0, e.elapsed_ms / 1000))
        super()._request(e)
