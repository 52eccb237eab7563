"""The orchestrator: one deadline, classified failures, retries, failover and fallback.

    Router.complete(route, request, envelope)
      preflight    count tokens, check the schema version                  (_preflight)
      select       contract filter -> cool-downs, breakers -> ranking    (policy.plan)
      loop         per candidate, what the engine decides (_engine.decide, pure), carried
                   out by the run's loop (_run):
                     Go     -> one attempt: reserve, permit, dialect.build -> transport.send
                               -> dialect.parse, validate (schema, tool arguments) (_attempt)
                     Sleep  -> backoff or Retry-After, every admission check already passed
                     Repair -> the one corrective request
                     Next   -> the next candidate (why goes into the record)
                     Stop   -> Unavailable now
      record       RouteRecord on the Response, or in Unavailable              (_record)

Three workflows follow from the request's state, never from a provider's name: replay and
equivalent failover while the request is replayable; cross-model fallback only to approved
models the envelope allows; stop when nothing safe is left.

This module is the Router itself: its construction (the process's shared parts), its entry
points (``complete``, ``stream``, ``embed``) and ``aclose``. A request is carried out by a
run (:class:`~._run.Run`), which sees the Router only as :class:`~._parts.RouterParts`.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..auth import Authorizers
from ..config import Config, load_config
from ..ledger import Ledger
from ..model import (
    LONE_SURROGATE,
    LONE_SURROGATE_FIX,
    ConfigError,
    Embeddings,
    EmbedInput,
    EmbedRequest,
    Envelope,
    Failure,
    InvalidRequest,
    Request,
    Response,
    Route,
    RouteRecord,
    Target,
    Unavailable,
    UnknownRoute,
    request_surrogate,
)
from ..policy import (
    Backoff,
    BackoffDecision,
    BreakerBoard,
    BreakerEvent,
    BreakerState,
    HealthBoard,
    Hold,
    LimiterBoard,
    LoadBoard,
    NoBreakers,
    RetryBudget,
    StatsBoard,
    Unlimited,
    WindowBoard,
    canary_problems,
    close_shared,
    hold_of,
    shared_policies,
)
from ..providers import dialect_for
from ..telemetry import Hook, Hooks
from ..tokens import (
    CompactionHook,
    counter_for,
)
from ..transport import Http1Transport, Transport
from ..validation import (
    DEFAULT_LIMITS,
    SchemaLimits,
    check_contract,
    check_request_schemas,
)
from ._embed import embed_request
from ._engine import Policies
from ._hooks import DegradeHandler, QualityGate, degraded
from ._run import Run
from ._stream import RouteStream
from ._telemetry import breaker_changed

if TYPE_CHECKING:
    from ..providers import DialectAdapter


def check_text(request: Request) -> None:
    """InvalidRequest for text no provider can be sent (a lone surrogate), before any attempt."""
    where = request_surrogate(request)
    if where is not None:
        raise InvalidRequest(where, LONE_SURROGATE, LONE_SURROGATE_FIX)


@dataclass(frozen=True, slots=True, eq=False)
class Vetted:
    """What a caller already did for ``request`` (the gateway, off its event loop): its text
    checked (:func:`check_text`), its JSON Schemas checked and compiled, and its input tokens
    counted by each of ``tokens``' counters (counter name -> tokens; may be empty). Given to
    :meth:`Router.complete` or :meth:`Router.stream` with that very request object, it spares
    them a second walk of every message and schema; with any other request it is ignored."""

    request: Request
    tokens: Mapping[str, int] = field(default_factory=dict)


def _vetted(request: Request, vetted: Vetted | None, limits: SchemaLimits) -> Mapping[str, int]:
    """The counts ``vetted`` holds for ``request``; the checks run here when nothing vetted it."""
    if vetted is not None and vetted.request is request:
        return vetted.tokens
    check_text(request)
    check_request_schemas(request, limits)
    return {}


class Router:
    """Routes requests over configured targets within each request's envelope.

    >>> router = Router([route], transport=FakeNetwork(a, b))
    >>> resp = await router.complete("triage", Request.simple("hi"), Envelope(budget=5))
    >>> resp.record.target_used
    'a'

    One Router holds the shared state of a process: the HTTP pool, the retry budget and
    the health board. Create one, use it for every request, ``await router.aclose()``.

    ``schema_limits`` bounds the JSON Schemas a request may carry (see
    :class:`~failover.validation.SchemaLimits`); assign another to change them.
    """

    schema_limits: SchemaLimits = DEFAULT_LIMITS

    def __init__(
        self,
        routes: Iterable[Route] | Mapping[str, Route],
        *,
        transport: Transport | None = None,
        retry_budget: RetryBudget | Unlimited | None = None,
        backoff: Backoff | None = None,
        health: HealthBoard | None = None,
        rng: random.Random | None = None,
        dialects: Mapping[str, DialectAdapter] | None = None,
        stream_threshold: float | None = 60.0,
        breakers: BreakerBoard | NoBreakers | None = None,
        limiters: LimiterBoard | None = None,
        gates: Mapping[str, QualityGate] | None = None,
        degrade: Mapping[str, DegradeHandler] | None = None,
        stats: StatsBoard | None = None,
        canary_rng: random.Random | None = None,
        compaction: CompactionHook | None = None,
        count_timeout: float = 0.5,
        ledger: Ledger | None = None,
        hooks: Iterable[Hook] = (),
        auth: Authorizers | None = None,
        windows: WindowBoard | None = None,
        load: LoadBoard | None = None,
        balance_rng: random.Random | None = None,
    ) -> None:
        items = routes.values() if isinstance(routes, Mapping) else routes
        self.routes: dict[str, Route] = {r.name: r for r in items}
        # failover's own HTTP/1.1 client by default: half aiohttp's CPU per request, which was
        # already 3-28x below httpx (docs/benchmarks.md, "Upstream HTTP client"); AiohttpTransport
        # and HttpxTransport remain available.
        self.transport: Transport = transport if transport is not None else Http1Transport()
        self.transport_enforces_total = bool(getattr(self.transport, "enforces_total", False))
        # cloud credential chains (SigV4, google-auth, Entra ID) for the targets that need one
        self.auth = auth if auth is not None else Authorizers()
        self.retry_budget = retry_budget if retry_budget is not None else RetryBudget()
        self.backoff = backoff or Backoff()
        self.health = health or HealthBoard()
        # Requests in flight, peak-EWMA latency and quota headers per deployment, for the balancer.
        self.load = load if load is not None else LoadBoard()
        # The balancer's draws (p2c, weighted) use their own rng, as canary draws do.
        self.balance_rng = balance_rng or random.Random()
        # The context windows providers stated in overflow errors, for targets that declare none.
        self.windows = windows if windows is not None else WindowBoard()
        # Circuit breakers per target scope and per key + model; BreakerBoard(config) to tune,
        # NoBreakers() to switch them off.
        self.breakers: BreakerBoard | NoBreakers = breakers if breakers is not None else BreakerBoard()
        # Client-side rate limits for targets that declare `limits` (RPM, TPM, concurrency).
        self.limiters: LimiterBoard | None = limiters if limiters is not None else LimiterBoard()
        # Per route: a quality gate (task-level success) and a non-model degrade handler.
        self.gates: dict[str, QualityGate] = dict(gates or {})
        self.degrade: dict[str, DegradeHandler] = dict(degrade or {})
        self.rng = rng or random.Random()
        self._dialects = dict(dialects or {})
        # Plain calls whose expected generation (max_tokens at the target's output rate)
        # exceeds this many seconds are streamed internally: a long silent connection is
        # not reliable, and streaming gives first-event and idle timeouts. None: never.
        self.stream_threshold = stream_threshold
        # Called once when a request fits no candidate's context window; None: context_overflow.
        self.compaction = compaction
        # The tool-execution ledger: with it, a task whose side-effecting tool may have run is
        # never replayed from scratch or handed to another model (workflow 3).
        self.ledger = ledger
        # Cap on a provider token count (Anthropic, Gemini) near a window; 0 disables them.
        self.count_timeout = count_timeout
        # Telemetry (failover.telemetry): every request's events; nothing is built when empty.
        self.hooks = Hooks(hooks)
        self.policies: Policies = _Policies(self)  # what the recovery engine asks, read at each decision
        # Resolved (and replaced) whenever a breaker opens: a request waiting to replay a target
        # wakes and asks again, instead of sleeping out a wait that now ends in a refusal.
        self._opened: asyncio.Future[None] | None = None
        if isinstance(self.breakers, BreakerBoard):  # breaker state changes reach the hooks too
            self.breakers.hooks.append(self._breaker_changed)
        for r in self.routes.values():
            check_contract(r.contract)  # a bad pattern or language fails at start-up, not on a request
            problems = canary_problems(r)
            if problems:
                raise ConfigError(
                    f"routes.{r.name}.canary", "; ".join(problems), "list only fallbacks, shares in (0, 1]"
                )
        # Canary draws use their own rng, so a canary does not shift backoff jitter.
        self.canary_rng = canary_rng or random.Random()
        # Transport / contract / task success per route and target, fed by every RouteRecord.
        self.stats = stats if stats is not None else StatsBoard()
        for r in self.routes.values():  # load tokenizers now, not on the first request
            for t in r.targets:
                counter_for(t)

    @classmethod
    def from_config(
        cls, config: str | os.PathLike[str] | Config, *, transport: Transport | None = None, **kw: Any
    ) -> Router:
        """A Router over the routes of a YAML file (or an already loaded Config)."""
        cfg = config if isinstance(config, Config) else load_config(config)
        # a `state:` section (sqlite/redis) shares breakers, limiters and the retry budget
        shared = shared_policies(cfg.state, cfg.retry_budget)
        if cfg.breakers is not None:  # the file's `breakers:` tuning, on the shared store if there is one
            board = shared.get("breakers")
            store = board.store if isinstance(board, BreakerBoard) else None
            shared["breakers"] = cfg.breakers.board(store=store)
        kw = {"retry_budget": cfg.retry_budget, **shared, **kw}
        if transport is None and cfg.upstream is not None:  # the file's `upstream:` limits and pool
            transport = cfg.upstream.transport()
        return cls(cfg.routes, transport=transport, backoff=cfg.backoff, **kw)

    def dialect(self, target: Target) -> DialectAdapter:
        d = self._dialects.get(target.dialect)
        return d if d is not None else dialect_for(target.dialect)

    def route(self, name: str | Route) -> Route:
        if isinstance(name, Route):
            return name
        try:
            return self.routes[name]
        except KeyError:
            raise UnknownRoute(name, list(self.routes)) from None

    async def complete(
        self, route: str | Route, request: Request, envelope: Envelope | None = None, *, vetted: Vetted | None = None
    ) -> Response:
        """An acceptable Response (with ``.record``), or :class:`Unavailable`. Never both.

        :class:`~failover.validation.InvalidSchema` (a ValueError) before any call when a
        JSON Schema of ``request`` is refused (too large, a remote ``$ref``, a pattern the
        linear-time engine cannot run, not valid draft 2020-12). ``vetted``: those checks (and
        the token counts) already made for this very request (see :class:`Vetted`)."""
        r = self.route(route)
        tokens = _vetted(request, vetted, self.schema_limits)
        run = Run.generation(self, r, request, envelope or Envelope(), tokens=tokens)
        record: RouteRecord | None = None
        try:
            try:
                resp = await run.execute()
            except Unavailable as exc:
                self.stats.observe(record := exc.record)
                fallback = await degraded(self.degrade.get(r.name), request, exc)
                if fallback is None:
                    raise
                record = fallback.record
                return fallback
            if (record := resp.record) is not None:
                self.stats.observe(record)
            return resp
        finally:
            if self.hooks:
                run.ended(record)

    def stream(
        self,
        route: str | Route,
        request: Request,
        envelope: Envelope | None = None,
        *,
        coalesce: float | None = None,
        restart_on_partial: bool = False,
        keep_text: bool = True,
        live_reasoning: bool = False,
        vetted: Vetted | None = None,
    ) -> RouteStream:
        """Stream a response: ``async with router.stream(...) as s: async for event in s:``.

        Events: ReasoningDelta / ReasoningDone, TextDelta, ToolCallStart / ToolCallDelta /
        ToolCallDone, UsageUpdate, Stop, then one terminal event, ``Completed`` (the Response
        with its RouteRecord) or ``PartialOutput``. Before the first content event (text or a
        tool call) a failure is retried, failed over or falls back like in :meth:`complete`;
        after it, nothing is ever spliced on. Reasoning is held back with the attempt's other
        events until its answer begins, so a failure while the model thinks is still
        recoverable; ``live_reasoning=True`` passes reasoning on as it comes, and then the first
        reasoning event is the commit point. With
        ``restart_on_partial=True`` AND ``envelope.allow_after_partial``, a cut stream is
        followed by ``Restarted`` and a new response. ``coalesce`` merges text deltas
        arriving within that many seconds, for slow consumers. ``keep_text=False`` is for a relay
        that has already passed every delta on (the gateway): the text is not kept a second
        time, and ``PartialOutput.text`` is empty. ``vetted``: as in :meth:`complete`.
        """
        tokens = _vetted(request, vetted, self.schema_limits)  # InvalidRequest and InvalidSchema here, as in complete()
        env = envelope or Envelope()
        run = Run.generation(
            self, self.route(route), request, env, stream=True, restart_on_partial=restart_on_partial, tokens=tokens
        )
        run.output.keep_text = keep_text
        if live_reasoning:
            run.output.live_reasoning()
        return RouteStream(run, request, coalesce=coalesce)

    async def embed(
        self,
        route: str | Route,
        inputs: str | Sequence[str] | EmbedRequest,
        *,
        dimensions: int | None = None,
        input_type: EmbedInput | str | None = None,
        envelope: Envelope | None = None,
    ) -> Embeddings:
        """One vector per input, in input order (with ``.record``), or :class:`Unavailable`.

        >>> out = await router.embed("search", ["first text", "second text"], dimensions=256)
        >>> len(out.vectors), out.dimensions, out.record.target_used
        (2, 256, 'openai-us')

        The same deadline, classification, replays, breakers, limits and record as
        :meth:`complete`, but failover only to an equivalent of the route's first primary that
        gives vectors of the same size: a cross-model fallback never answers an embedding
        request (vectors of different models are not comparable), and the record says why
        each target was left out. ``input_type`` (``query``, ``document``, ``similarity``,
        ``classification``, ``clustering``) tunes the vectors where the model takes a hint.
        :class:`~failover.model.InvalidRequest` before any call for no input, an empty one, or
        a bad ``dimensions`` or ``input_type``."""
        req = embed_request(inputs, dimensions, input_type)
        run = Run.embedding(self, self.route(route), req, envelope or Envelope())
        record: RouteRecord | None = None
        try:
            try:
                resp = await run.execute()
            except Unavailable as exc:
                self.stats.observe(record := exc.record)
                raise
            if (record := resp.record) is not None:
                self.stats.observe(record)
            return resp
        finally:
            if self.hooks:
                run.ended(record)

    def _breaker_changed(self, event: BreakerEvent) -> None:
        opened = self._opened
        if event.new is BreakerState.OPEN and opened is not None:
            self._opened = None
            if not opened.done():
                opened.set_result(None)
        if self.hooks:
            self.hooks(breaker_changed(event))

    async def wait_unless_opened(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less if a breaker opens meanwhile (then True)."""
        loop = asyncio.get_running_loop()
        if self._opened is None or self._opened.get_loop() is not loop:  # a router may outlive a loop
            self._opened = loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._opened), seconds)
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        await self.transport.aclose()
        await self.auth.aclose()
        await close_shared(self.breakers, self.limiters, self.retry_budget, self.load)  # failover.state, if any

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Policies:
    """The router's policy objects as the engine asks them (read at call time: tests and the
    gateway may swap a board between requests)."""

    __slots__ = ("router",)

    def __init__(self, router: Router) -> None:
        self.router = router

    def pool(self, target: Target) -> str:
        return self.router.retry_budget.pool_of(target)

    def budget_left(self, pool: str, now: float) -> int:
        return self.router.retry_budget.available(now, pool)

    def hold(self, target: Target, now: float) -> Hold | None:
        r = self.router
        return hold_of(target, now, r.health, r.breakers)

    def limiter_wait(self, target: Target, input_tokens: int, max_output_tokens: int, now: float) -> float:
        limiters = self.router.limiters
        limiter = limiters.existing(target) if limiters is not None else None
        return 0.0 if limiter is None else limiter.room_in(input_tokens, max_output_tokens, now)

    def expected_latency(self, target: Target) -> float | None:
        return self.router.health.latency(target)

    def backoff(self, failure: Failure, replay: int, rng: random.Random) -> BackoffDecision:
        return self.router.backoff.wait(failure, replay, rng)

    def window(self, target: Target) -> int | None:
        return self.router.windows.known(target)
