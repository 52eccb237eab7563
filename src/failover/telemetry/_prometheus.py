"""Prometheus metrics from the events, for applications that use the library without the gateway.

    from prometheus_client import start_http_server
    router = Router(routes, hooks=[PrometheusHook()])   # the global registry
    start_http_server(9100)

:class:`RouterMetrics` holds the metrics the gateway exposes too (``failover.gateway._metrics``),
defined once in ``_instruments`` with their OpenTelemetry names: the GenAI histograms
``gen_ai_client_operation_duration_seconds``, ``gen_ai_client_operation_time_to_first_chunk_seconds``
and ``gen_ai_client_token_usage``; failover's ``failover_request_duration_seconds``,
``failover_request_time_to_first_chunk_seconds``, ``failover_limiter_wait_seconds`` histograms;
and the counters ``failover_attempts_total``, ``failover_recoveries_total``,
``failover_deadline_exhausted_total``, ``failover_no_eligible_candidate_total``,
``failover_cost_usd_total``, ``failover_failed_attempt_cost_usd_total``, and the prompt-cache
counters ``failover_input_tokens_total{route,target}`` and
``failover_cached_input_tokens_total{route,target}`` (their ratio is the cache-hit ratio). The hook adds what
the gateway has no counterpart for: ``failover_requests_total{route,outcome}``,
``failover_attempt_failures_total{target,kind}``, ``failover_backoffs_total{target,reason}`` and
``failover_backoff_seconds_total{target,reason}``, ``failover_breaker_transitions_total{scope,
layer,state}``.

Label values are bounded by the configuration (routes, targets, models, tenants, breaker scopes)
and by closed sets (outcomes, failure kinds, reasons). Events carry no keys or text, so neither
do the metrics. prometheus_client is imported when the hook is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _instruments as i
from ._events import AttemptEnded, Backoff, BreakerChanged, Event, RequestEnded
from ._instruments import Instrument, feed
from ._series import CounterFamily, HistogramFamily, HistogramSeries

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


class RouterMetrics:
    """The metrics the gateway exposes too (:mod:`._instruments`), as a :class:`~._instruments.Measures`.

    Defined once for both: :class:`PrometheusHook` feeds them from events and adds the library's
    own metrics; the gateway's metrics (``failover.gateway._metrics``) feed them from each
    request's RouteRecord when it ends rather than from events (building the events costs the
    gateway's hot path several percent).

    The series are plain Python numbers rendered at scrape time (:mod:`._series`, the same
    exposition as prometheus_client's own metrics at a fraction of the cost per update), kept
    once per label set, and in bundles per kind of attempt. Label values are bounded (see the
    module docstring), so the series are too.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import REGISTRY

        r = registry if registry is not None else REGISTRY
        self.registry = r
        self.operation_duration = _histogram(i.OPERATION_DURATION, r)
        self.time_to_first_chunk = _histogram(i.TIME_TO_FIRST_CHUNK, r)
        self.token_usage = _histogram(i.TOKEN_USAGE, r)
        self.request_duration = _histogram(i.REQUEST_DURATION, r)
        self.request_time_to_first_chunk = _histogram(i.REQUEST_TIME_TO_FIRST_CHUNK, r)
        self.limiter_wait_seconds = _histogram(i.LIMITER_WAIT, r)
        self.attempts = _counter(i.ATTEMPTS, r)
        self.recoveries = _counter(i.RECOVERIES, r)
        self.deadline_exhausted = _counter(i.DEADLINE_EXHAUSTED, r)
        self.no_candidate = _counter(i.NO_ELIGIBLE_CANDIDATE, r)
        self.cost = _counter(i.COST, r)
        self.failed_attempt_cost = _counter(i.FAILED_ATTEMPT_COST, r)
        self.input_tokens = _counter(i.INPUT_TOKENS, r)
        self.cached_input_tokens = _counter(i.CACHED_INPUT_TOKENS, r)
        self._attempt_series: dict[tuple[object, ...], _AttemptSeries] = {}
        self._request_series: dict[tuple[str, str, str, str], HistogramSeries] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(registry={self.registry!r})"

    def _provider_of(self, target: str) -> str:
        """The dialect of a target the caller did not name one for (the gateway looks it up)."""
        return ""

    # -- Measures -----------------------------------------------------------------------------

    def attempt(
        self,
        route: str,
        target: str,
        model: str,
        provider: str | None,
        outcome: str,
        failure: str | None,
        seconds: float,
        first_chunk: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
        cached_input_tokens: int | None,
        cost: float,
    ) -> None:
        key = (target, model, outcome, provider)
        s = self._attempt_series.get(key)
        if s is None:
            name = i.provider_name(provider if provider is not None else self._provider_of(target))
            s = self._attempt_series[key] = _AttemptSeries(self, target, model, name, outcome, failure)
        s.attempts.inc()
        s.duration.observe(seconds if seconds > 0 else 0.0)
        if first_chunk is not None:
            (s.first_chunk or s.streamed(self)).observe(first_chunk if first_chunk > 0 else 0.0)
        if input_tokens is not None or output_tokens is not None:
            tokens = s.tokens or s.counted(self)
            if input_tokens is not None:
                tokens[0].observe(input_tokens)
            if output_tokens is not None:
                tokens[1].observe(output_tokens)
        if input_tokens is not None:
            # Both series appear with the first usage, so the cache-hit ratio reads 0, not nothing.
            self.input_tokens.labels(route, target).inc(max(0, input_tokens))
            self.cached_input_tokens.labels(route, target).inc(max(0, cached_input_tokens or 0))
        if cost > 0 and outcome != "ok":
            self.failed_attempt_cost.labels(route, target).inc(cost)

    def limiter_wait(self, target: str, seconds: float) -> None:
        self.limiter_wait_seconds.labels(target).observe(seconds if seconds > 0 else 0.0)

    def request(
        self,
        route: str,
        workflow: str,
        answered_by: str,
        outcome: str,
        seconds: float,
        first_chunk: float | None,
        recovery: str | None,
        attempts: int,
        cost: float,
        tenant: str | None,
    ) -> None:
        key = (route, workflow, answered_by, outcome)
        duration = self._request_series.get(key)  # a dict lookup: a call fewer than labels()
        if duration is None:
            duration = self._request_series[key] = self.request_duration.labels(*key)
        duration.observe(seconds if seconds > 0 else 0.0)
        if first_chunk is not None:
            self.request_time_to_first_chunk.labels(route).observe(first_chunk if first_chunk > 0 else 0.0)
        if recovery is not None:
            self.recoveries.labels(route, workflow, recovery).inc()
        if outcome == "deadline_exhausted":
            self.deadline_exhausted.labels(route).inc()
        elif outcome == "contract_failure" and attempts == 0:
            self.no_candidate.labels(route).inc()
        if cost > 0:
            self.cost.labels(route, tenant or "-").inc(cost)


class _AttemptSeries:
    """The label children one kind of attempt (target, model, outcome) observes. The time to
    first chunk and the token series are resolved at their first use, so a kind of attempt
    that never streams or never reports usage shows no empty series for them."""

    __slots__ = ("attempts", "duration", "first_chunk", "genai", "target", "tokens")

    def __init__(
        self, metrics: RouterMetrics, target: str, model: str, provider: str, outcome: str, failure: str | None
    ) -> None:
        self.genai = (i.OPERATION, provider, model)
        self.target = target
        self.attempts = metrics.attempts.labels(target, outcome)
        self.duration = metrics.operation_duration.labels(*self.genai, i.error_type(outcome, failure), target)
        self.first_chunk: HistogramSeries | None = None
        self.tokens: tuple[HistogramSeries, HistogramSeries] | None = None

    def streamed(self, metrics: RouterMetrics) -> HistogramSeries:
        self.first_chunk = metrics.time_to_first_chunk.labels(*self.genai, self.target)
        return self.first_chunk

    def counted(self, metrics: RouterMetrics) -> tuple[HistogramSeries, HistogramSeries]:
        usage = metrics.token_usage
        self.tokens = (
            usage.labels(*self.genai, "input", self.target),
            usage.labels(*self.genai, "output", self.target),
        )
        return self.tokens


def _counter(instrument: Instrument, registry: CollectorRegistry) -> CounterFamily:
    return CounterFamily(instrument.prometheus_name, instrument.description, instrument.labels, registry)


def _histogram(instrument: Instrument, registry: CollectorRegistry) -> HistogramFamily:
    return HistogramFamily(
        instrument.prometheus_name, instrument.description, instrument.labels, registry, instrument.buckets
    )


class PrometheusHook(RouterMetrics):
    """A :class:`~failover.telemetry.Hook` that measures requests, attempts, waits, tokens and cost.

    >>> registry = CollectorRegistry()
    >>> router = Router(routes, hooks=[PrometheusHook(registry)])
    >>> registry.get_sample_value("failover_attempts_total", {"target": "a", "outcome": "ok"})

    One hook per registry: a second one on the same registry would register the same names
    twice (prometheus_client refuses that); share the hook between Routers instead.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.requests = CounterFamily(
            "failover_requests", "Requests that ended, by route and outcome", ["route", "outcome"], r
        )
        self.attempt_failures = CounterFamily(
            "failover_attempt_failures", "Failed attempts, by target and failure kind", ["target", "kind"], r
        )
        self.backoffs = CounterFamily(
            "failover_backoffs", "Waits between attempts, by target and reason", ["target", "reason"], r
        )
        self.backoff_seconds = CounterFamily(
            "failover_backoff_seconds", "Seconds waited between attempts", ["target", "reason"], r
        )
        self.breaker_transitions = CounterFamily(
            "failover_breaker_transitions",
            "Circuit-breaker state changes, by scope, layer and the state entered",
            ["scope", "layer", "state"],
            r,
        )

    def __call__(self, event: Event, /) -> None:
        if isinstance(event, AttemptEnded):
            if event.failure is not None:
                self.attempt_failures.labels(event.target, event.failure).inc()
        elif isinstance(event, Backoff):
            self.backoffs.labels(event.target, event.reason).inc()
            self.backoff_seconds.labels(event.target, event.reason).inc(max(0.0, event.seconds))
        elif isinstance(event, RequestEnded):
            self.requests.labels(event.route, event.outcome).inc()
        elif isinstance(event, BreakerChanged):
            self.breaker_transitions.labels(event.scope, event.layer, event.new).inc()
            return
        feed(self, event)
