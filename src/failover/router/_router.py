"""The orchestrator: one deadline, classified failures, retries, failover and fallback.

    Router.complete(route, request, envelope)
      preflight    count tokens, check the schema version
      select       contract filter -> cool-downs, breakers -> ranking    (policy.plan)
      loop         per candidate, what the engine decides (router._engine.decide, pure):
                     Go     -> attempt = dialect.build -> transport.send -> dialect.parse
                               validate (schema, tool arguments)         (validation)
                     Sleep  -> backoff or Retry-After, every admission check already passed
                     Repair -> the one corrective request
                     Next   -> the next candidate (why goes into the record)
                     Stop   -> Unavailable now
      record       RouteRecord on the Response, or in Unavailable

Three workflows follow from the request's state, never from a provider's name: replay and
equivalent failover while the request is replayable; cross-model fallback only to approved
models the envelope allows; stop when nothing safe is left.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..auth import AuthError, Authorizers
from ..config import Config, load_config
from ..ledger import Ledger, tenant_task_id
from ..model import (
    Attempt,
    Capability,
    ConfigError,
    Embeddings,
    EmbedInput,
    EmbedRequest,
    Envelope,
    Failure,
    FailureKind,
    InvalidRequest,
    PartialOutput,
    Phase,
    Request,
    Response,
    Route,
    RouteRecord,
    SideEffectMode,
    StreamEvent,
    Target,
    TimeoutPhase,
    Unavailable,
    UnknownRoute,
    Validation,
    disposition,
)
from ..model._record import watch_connect
from ..model._text import LONE_SURROGATE, LONE_SURROGATE_FIX, request_surrogate
from ..policy import (
    Backoff,
    BackoffDecision,
    BreakerBoard,
    BreakerState,
    Candidate,
    Deadline,
    HealthBoard,
    LimiterBoard,
    LimitWaitTooLong,
    NoBreakers,
    Plan,
    Reservation,
    RetryBudget,
    TargetLimiter,
    Unlimited,
    plan,
)
from ..policy._breaker import BreakerEvent
from ..policy._canary import CanaryGate, StatsBoard, canary_problems
from ..policy._selection import Hold, hold_of
from ..policy._shared import close_shared, shared_policies
from ..providers import dialect_for
from ..telemetry import AttemptStarted, Hook, Hooks, RequestStarted
from ..telemetry import Backoff as Waited
from ..tokens import (
    CompactionHook,
    count_exactly,
    counter_for,
    counts_remotely,
    near_window,
    observe_usage,
    reserved_output,
)
from ..transport import Http1Transport, Transport, TransportError
from ..validation import (
    DEFAULT_LIMITS,
    SchemaLimits,
    check_contract,
    check_request_schemas,
    checks_anything,
    repair_request,
    validate,
)
from ._engine import Decision, Go, Lane, Next, Repair, RunState, Sleep, Stop, conclude, decide
from ._history import readable_history
from ._hooks import DegradeHandler, QualityGate, degraded
from ._parts import RouterParts
from ._record import Recorder
from ._stream import Output, RouteStream, _Partial, stream_exchange
from ._telemetry import attempt_ended, breaker_changed, request_ended

if TYPE_CHECKING:
    from ..providers import DialectAdapter

log = logging.getLogger("failover.router")


def check_text(request: Request) -> None:
    """InvalidRequest for text no provider can be sent (a lone surrogate), before any attempt."""
    where = request_surrogate(request)
    if where is not None:
        raise InvalidRequest(where, LONE_SURROGATE, LONE_SURROGATE_FIX)


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
        self.policies = _Policies(self)  # what the recovery engine asks, read at each decision
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

    async def complete(self, route: str | Route, request: Request, envelope: Envelope | None = None) -> Response:
        """An acceptable Response (with ``.record``), or :class:`Unavailable`. Never both.

        :class:`~failover.validation.InvalidSchema` (a ValueError) before any call when a
        JSON Schema of ``request`` is refused (too large, a remote ``$ref``, a pattern the
        linear-time engine cannot run, not valid draft 2020-12)."""
        r = self.route(route)
        check_text(request)
        check_request_schemas(request, self.schema_limits)
        run = _Run(self, r, request, envelope or Envelope())
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
        time, and ``PartialOutput.text`` is empty.
        """
        check_text(request)  # InvalidRequest and InvalidSchema here, as in complete()
        check_request_schemas(request, self.schema_limits)
        env = envelope or Envelope()
        run = _Run(self, self.route(route), request, env, stream=True, restart_on_partial=restart_on_partial)
        run.output.keep_text = keep_text
        if live_reasoning:
            run.output.live_reasoning()
        return RouteStream(run, coalesce=coalesce)

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
        from ._embed import EmbedRun, embed_request  # it builds on this module

        req = embed_request(inputs, dimensions, input_type)
        run = EmbedRun(self, self.route(route), req, envelope or Envelope())
        record: RouteRecord | None = None
        try:
            try:
                resp = await run.execute()
            except Unavailable as exc:
                self.stats.observe(record := exc.record)
                raise
            record = resp.record
            if record is not None:
                self.stats.observe(record)
            out: Embeddings = resp.parsed
            return replace(out, record=record)
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
        await close_shared(self.breakers, self.limiters, self.retry_budget)  # failover.state, if any

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

    def backoff(self, failure: Failure, replay: int) -> BackoffDecision:
        r = self.router
        return r.backoff.wait(failure, replay, r.rng)


class _Run:
    """One request on its way through its candidates: the I/O that the engine's decisions ask for.

    What to do next is :func:`failover.router._engine.decide`'s answer, a pure function of
    ``self.state`` (a :class:`RunState`) and the lane of the candidate being tried; this
    class only carries it out: it pays for attempts, sleeps, sends, and records.
    """

    def __init__(
        self,
        router: Router,
        route: Route,
        request: Request,
        envelope: Envelope,
        *,
        stream: bool = False,
        restart_on_partial: bool = False,
    ) -> None:
        if stream:
            envelope = replace(envelope, required=envelope.required | {Capability.STREAMING})
        self.router = router
        self.route = route
        self.request = request
        self.env = envelope
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time()
        self.deadline = Deadline.after(now=self.t0, budget=envelope.budget)
        self.rec = Recorder(envelope.request_id, route.name, self.t0, listing=route)
        self.state = RunState(
            envelope=envelope,
            t0=self.t0,
            deadline_at=self.deadline.at,
            input_tokens=self.input_tokens,
            max_tokens=request.max_tokens,
            fallback_reserve=route.fallback_reserve,
            replay_timeouts=route.replay_timeouts,
        )
        self.policies = router.policies
        self.used: Attempt | None = None
        self._tokens: dict[str, int] = {}
        self._exact: dict[str, int] = {}  # target name -> the provider's own count
        self.compacted = False
        self.output = Output(None)
        self.canary = CanaryGate(route, router.canary_rng)  # draws only when a fallback is needed
        self.restart_ok = restart_on_partial and envelope.allow_after_partial

    @property
    def sink(self) -> Callable[[StreamEvent], None] | None:
        return self.output.sink

    # -- preflight -------------------------------------------------------------------------

    def input_tokens(self, target: Target) -> int:
        exact = self._exact.get(target.name)
        return exact if exact is not None else self.local_tokens(target)

    def local_tokens(self, target: Target) -> int:
        counter = counter_for(target)
        n = self._tokens.get(counter.name)
        if n is None:
            n = self._tokens[counter.name] = counter.count(self.request)
        return n

    async def count_near_window(self) -> None:
        """Ask the providers that count (Anthropic, Gemini) where the local count is near a window."""
        timeout = min(self.router.count_timeout, self.deadline.remaining(self.loop.time()) / 4)
        groups: dict[tuple[str, str, str], list[Target]] = {}
        for t in self.route.targets:
            dialect = self.router.dialect(t)
            if t.name in self._exact or not counts_remotely(t, dialect):
                continue
            if near_window(self.local_tokens(t), reserved_output(t, self.request), t.context_window):
                groups.setdefault((t.dialect, t.model, t.base_url), []).append(t)
        if not groups or timeout <= 0:
            return
        counts = await asyncio.gather(
            *(
                count_exactly(
                    ts[0],
                    self.request,
                    self.router.transport,
                    timeout=timeout,
                    dialect=self.router.dialect(ts[0]),
                    authorize=self.router.auth.authorize if self.router.auth.needed(ts[0]) else None,
                )
                for ts in groups.values()
            )
        )
        for ts, n in zip(groups.values(), counts, strict=True):
            if n is not None:
                self._exact.update((t.name, n) for t in ts)

    def overflows(self, required: frozenset[Capability]) -> list[tuple[Target, int]]:
        """The targets that could serve but for their window, and by how many tokens they are over."""
        out = []
        for t in self.route.targets:
            if not required <= t.capabilities or (t not in self.route.primary and not self.env.allow_fallback):
                continue
            over = self.input_tokens(t) + reserved_output(t, self.request) - t.context_window
            if over > 0:
                out.append((t, over))
        return out

    async def make_plan(self) -> Plan:
        await self.count_near_window()
        return plan(
            self.route,
            self.request,
            self.env,
            input_tokens=self.input_tokens,
            health=self.router.health,
            now=self.t0,
            breakers=self.router.breakers,
        )

    def unavailable(self, stop: Stop) -> Unavailable:
        now = self.loop.time()
        s = self.state
        for t in self.route.targets:  # a breaker that opened since a target failed outlasts its hint
            if t.name in s.back or t.name in s.anytime:
                held = self.policies.hold(t, now)
                if held is not None:
                    s.held(held)
        self.rec.retry_budget_exhausted = s.budget_spent
        record = self.rec.freeze(now, used=None, outcome=stop.kind.value, stopped=stop.stopped)
        until = s.retry_after(now)
        retry_after_ms = None if until is None else math.ceil((until - now) * 1000)
        log.info(
            "request %s on route %s unavailable: %s: %s", self.rec.request_id, self.route.name, stop.kind, stop.message
        )
        return Unavailable(
            stop.kind,
            stop.message,
            retryable=disposition(stop.kind).retryable if stop.retryable is None else stop.retryable,
            retry_after_ms=retry_after_ms,
            request_id=self.rec.request_id,
            record=record,
        )

    def partial(self, failure: Failure) -> _Partial:
        now = self.loop.time()
        record = self.rec.freeze(now, used=None, outcome=FailureKind.PARTIAL_OUTPUT.value, stopped=True)
        out = self.output
        log.info("request %s: stream cut after output began: %s", self.rec.request_id, failure.label)
        return _Partial(
            PartialOutput(
                text="".join(out.text),
                tool_calls=tuple(out.calls),
                failure=failure,
                record=record,
                reasoning=out.partial_reasoning(),
            )
        )

    async def execute(self) -> Response:
        env, route, s = self.env, self.route, self.state
        if self.router.hooks:
            self.router.hooks(RequestStarted(request_id=self.rec.request_id, route=route.name, at=self.t0))
        wanted, served = env.schema_version, route.contract.schema_version
        if wanted and served and wanted != served:
            raise self.unavailable(
                Stop(
                    FailureKind.CONTRACT_FAILURE,
                    f"route {route.name} serves schema version {served}, the request requires {wanted}",
                )
            )
        await self.side_effects_allow("this request")  # a replay of the task from scratch
        p = await self.make_plan()
        hook = self.router.compaction
        if not p.candidates and hook is not None and not self.compacted:
            over = self.overflows(p.required)
            if over:
                best, tokens_over = min(over, key=lambda to: to[1])
                self.compacted = True
                shorter = await hook(self.request, best, tokens_over)
                if shorter is not None:
                    self.request = shorter
                    s.max_tokens = shorter.max_tokens
                    self._tokens.clear()
                    self._exact.clear()
                    p = await self.make_plan()
        self.rec.excluded.extend(p.excluded)
        if route.primary:
            self.rec.input_tokens = self.input_tokens(route.primary[0])
        for hold in p.holds:  # left out only for now: the request may be retried when the first returns
            s.held(hold)
        s.candidates = p.candidates
        if not p.candidates:
            why = "; ".join(f"{e.target}: {e.reason}" for e in p.excluded) or "the route has no targets"
            if p.holds:
                first = min(p.holds, key=lambda h: h.until)
                raise self.unavailable(
                    Stop(first.kind, f"no candidate can serve this request now ({why})", retryable=True)
                )
            kind = FailureKind.CONTRACT_FAILURE  # every exclusion is final: contract, window or envelope
            if self.overflows(p.required) and len(self.overflows(p.required)) == len(p.excluded):
                kind = FailureKind.CONTEXT_OVERFLOW
            raise self.unavailable(Stop(kind, f"no candidate can serve this request ({why})"))

        cands = p.candidates
        start = 0
        if route.hedge_after is not None and self.sink is None and len(cands) > 1:
            resp = await self.hedged(cands[0], cands[1], route.hedge_after)
            if resp is not None:
                return resp
            start = 2
        for i in range(start, len(cands)):
            resp = await self.try_candidate(cands[i], after=i + 1, fresh=i == 0)
            if resp is not None:
                return resp
        raise self.unavailable(conclude(s, self.rec.attempts, self.rec.excluded, self.loop.time(), env.budget))

    async def hedged(self, first: Candidate, second: Candidate, delay: float) -> Response | None:
        """Hedging: if ``first`` has no answer after ``delay``, race ``second`` against it.

        The first acceptable result wins and the other is cancelled (its connection closed);
        both attempts stay in the record with their cost. The hedge is an extra attempt: it
        draws on the attempt limit like a retry, and on its pool's retry budget when that is
        the lead's pool.
        """
        lead: asyncio.Future[Response | None] = asyncio.ensure_future(self.try_candidate(first, after=2, fresh=True))
        started, _ = await asyncio.wait({lead}, timeout=delay)
        if started:
            resp = lead.result()
            return resp if resp is not None else await self.try_candidate(second, after=2)
        hedge = asyncio.ensure_future(self.try_candidate(second, after=2, hedge=True))
        pending: set[asyncio.Future[Response | None]] = {lead, hedge}
        winner: Response | None = None
        try:
            while pending and winner is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    winner = winner or task.result()
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        if winner is None or winner.record is None or self.used is None:
            return winner
        # the loser's cancelled attempt belongs in the story too
        record = self.rec.freeze(self.loop.time(), used=self.used, outcome="ok", validation=winner.record.validation)
        return replace(winner, record=record)

    # -- one candidate ---------------------------------------------------------------------

    async def side_effects_allow(self, what: str) -> None:
        """Workflow 3: refuse to replay or fall back once a side effect of the task may have happened."""
        ledger, env = self.router.ledger, self.env
        if ledger is None or env.task_id is None or env.side_effects is SideEffectMode.NONE:
            return
        try:
            # Under the tenant's own namespace: another tenant's task of the same id is never read.
            task = tenant_task_id(env.tenant, env.task_id)
            decision = await ledger.side_effects(task, env.side_effects, resumed_from=env.resumed_from)
        except Exception as exc:  # the store is down or slow: fail closed, never replay blindly
            log.warning("request %s: the ledger could not be read: %r", self.rec.request_id, exc)
            raise self.unavailable(
                Stop(
                    FailureKind.SIDE_EFFECT_UNCERTAIN,
                    f"{what} refused: the tool ledger could not be read ({type(exc).__name__}), so whether a side "
                    f"effect of task {env.task_id} already happened is unknown",
                    stopped=True,
                )
            ) from exc
        if decision.refused:
            self.rec.uncertain_operation = decision.operation_name
            raise self.unavailable(
                Stop(FailureKind.SIDE_EFFECT_UNCERTAIN, f"{what} refused: {decision.reason}", stopped=True)
            )

    async def try_candidate(
        self, cand: Candidate, *, after: int, hedge: bool = False, fresh: bool = False
    ) -> Response | None:
        """Carry out the engine's decisions for one candidate until it answers or is left."""
        target, phase = cand.target, cand.phase
        if phase is Phase.FALLBACK:  # reached only when a fallback is needed: canary shares apply here
            why = self.canary.why_not(target.name)
            if why is not None:
                self.rec.exclude(target.name, phase, why)
                return None
        s, loop = self.state, self.loop
        pool = self.router.retry_budget.pool_of(target)
        lane = Lane(target=target, phase=phase, request=self.request, after=after, pool=pool, hedge=hedge, fresh=fresh)
        try:
            while True:
                now = loop.time()
                d = decide(s, lane, self.policies, now)
                if not isinstance(d, Go):
                    if await self.carry_out(lane, d, now):
                        continue  # slept, or built the repair: ask again
                    return None  # left (Next, or no hedge)
                if s.launched:  # workflow 3: an attempt after the first needs the ledger's leave
                    await self.side_effects_allow(f"{lane.phase.value} attempt on {target.name}")
                if not lane.paid:
                    self.pay(lane, d.retry, now)
                outcome = await self.attempt(lane, d.until)
                if isinstance(outcome, str):  # turned away by its limiter or breaker
                    self.refund(lane)
                    why = outcome if not lane.tries else f"no replay: {outcome}"
                    self.rec.exclude(target.name, lane.phase, why, temporary=True)
                    return None
                s.attempted(lane, outcome if isinstance(outcome, Failure) else None, loop.time())
                if isinstance(outcome, Response):
                    return outcome
                if self.output.started:  # the commit point: output reached the caller
                    if not self.restart_ok:
                        raise self.partial(outcome)
                    self.output.restart(outcome)
        finally:
            if lane.paid:  # paid for an attempt that was never made (a refusal after a wait)
                self.refund(lane)

    async def carry_out(self, lane: Lane, d: Decision, now: float) -> bool:
        """Every decision but Go: False when the lane is left, True to ask the engine again."""
        s, target = self.state, lane.target
        if isinstance(d, Next):
            s.leave(lane, d)
            if d.reason is not None:
                self.rec.exclude(target.name, lane.phase, d.reason, d.temporary)
            return False
        if isinstance(d, Stop):
            if lane.tries:
                s.note_end(target.name, lane.failure, lane.failed_at)
            if lane.hedge and not d.stopped and not lane.tries:  # no hedge: the lead carries on alone
                self.rec.exclude(target.name, lane.phase, f"no hedge: {d.message}")
                return False
            raise self.unavailable(d)
        if isinstance(d, Repair):
            assert lane.failure is not None
            s.repair(lane, repair_request(lane.request, lane.failure, target, self.input_tokens(target)))
            return True
        assert isinstance(d, Sleep)
        if s.launched:  # the ledger is asked before a wait too: a refusal then costs no sleep
            await self.side_effects_allow(f"{lane.phase.value} attempt on {target.name}")
        if not lane.paid:  # the slot and the budget's share are taken before the wait
            self.pay(lane, d.retry, now)
        loop = self.loop
        end = now + d.seconds
        while (left := end - loop.time()) > 0 and await self.router.wait_unless_opened(left):
            held = self.policies.hold(target, loop.time())
            if held is not None and held.until > end:
                break  # its breaker opened meanwhile: the wait would end in a refusal
        self.waited(target.name, now, d.source)
        lane.waited = True
        return True

    def pay(self, lane: Lane, retry: bool, now: float) -> None:
        """Take the attempt's slot and its share of the pool's retry budget."""
        if retry:
            self.router.retry_budget.try_withdraw(now, lane.pool)  # the engine saw room
        else:
            self.router.retry_budget.record_request(now, lane.pool)
        self.state.pay(lane, lane.pool, retry)

    def refund(self, lane: Lane) -> None:
        if lane.paid_retry:
            self.router.retry_budget.refund(self.loop.time(), lane.pool)
        self.state.refund(lane)

    def output_reserve(self, target: Target, request: Request) -> int:
        """The output tokens the limiter holds for an attempt until its usage is known."""
        return request.max_tokens or target.max_output_tokens

    def streams(self, target: Target, request: Request) -> bool:
        """Stream this attempt? Always for a streaming caller; for a plain call only when the
        caller's own ``max_tokens`` promises a generation longer than a silent connection should
        be trusted with (``stream_threshold`` seconds at the target's output rate)."""
        if self.sink is not None:
            return True
        threshold = self.router.stream_threshold
        if threshold is None or request.max_tokens is None or Capability.STREAMING not in target.capabilities:
            return False
        return request.max_tokens / max(target.output_tps, 1e-9) > threshold

    async def attempt(self, lane: Lane, until: float) -> Response | Failure | str:
        """One attempt that must end by ``until``; a string is why it could not start."""
        target, phase, request = lane.target, lane.phase, lane.request
        router, loop, s = self.router, self.loop, self.state
        reservation = None
        limiter = router.limiters.limiter_for(target) if router.limiters is not None else None
        if limiter is not None:
            # Wait locally rather than provoke a 429, but only as long as the deadline allows.
            asked = loop.time()
            try:
                reservation = await limiter.acquire(
                    input_tokens=self.input_tokens(target),
                    max_output_tokens=self.output_reserve(target, request),
                    deadline_at=until - target.timeouts.min_useful,
                    tenant=self.env.tenant,
                )
            except LimitWaitTooLong as exc:
                s.limited = True
                if math.isfinite(exc.wait_seconds):  # when the caller may come back (Retry-After)
                    s.held(Hold(target.name, loop.time() + exc.wait_seconds, FailureKind.RATE_LIMITED))
                return f"client-side rate limit: {exc}"
            if reservation.waited > 0:
                self.waited(target.name, asked, "rate_limit")
        start = loop.time()
        breakers = router.breakers  # shared breakers (failover.state) admit in one awaited round trip
        permits, rejected = (
            breakers.admit(target, start) if breakers.local else await breakers.admit_shared(target, start)
        )
        if rejected is not None:
            if reservation is not None:
                reservation.release(sent=False)
            held = hold_of(target, start, router.health, breakers)
            if held is not None:
                s.held(held)
            return rejected
        if router.hooks:
            router.hooks(
                AttemptStarted(
                    request_id=self.rec.request_id,
                    route=self.route.name,
                    target=target.name,
                    model=target.model,
                    phase=phase.value,
                    index=len(self.rec.attempts),
                    at=start,
                )
            )
        try:
            outcome = await self._exchange(target, phase, request, start, until, lane.hedge)
        except asyncio.CancelledError:
            router.breakers.discard(permits, loop.time())  # cancelled: says nothing about health
            self.record_cancelled(target, phase, start, until, lane.hedge)
            self.attempt_ended(target, None)
            if reservation is not None:
                reservation.settle(self.input_tokens(target), 0)  # sent: count the input as spent
            raise
        except BaseException:
            router.breakers.discard(permits, loop.time())
            if reservation is not None:
                reservation.release(sent=True)
            raise
        self.attempt_ended(target, outcome)  # _exchange appended its Attempt last, with no await since
        failure = outcome if isinstance(outcome, Failure) else None
        router.breakers.record(target, permits, failure, loop.time() - start, loop.time())
        if reservation is not None and limiter is not None:
            self.settle(limiter, reservation, target, outcome)
        return outcome

    def settle(
        self, limiter: TargetLimiter, reservation: Reservation, target: Target, outcome: Response | Failure
    ) -> None:
        """Reconcile the reservation with what the provider actually did, and follow its headers."""
        usage = outcome.usage
        if usage is not None:
            reservation.settle(usage.input_tokens, usage.output_tokens)
        elif isinstance(outcome, Failure) and outcome.kind is FailureKind.RATE_LIMITED:
            reservation.release(sent=True)
            limiter.penalize(outcome.retry_after, self.loop.time())
        elif isinstance(outcome, Failure) and outcome.kind is FailureKind.TIMEOUT:
            reservation.settle(self.input_tokens(target), 0)  # it may be generating and billing
        else:
            reservation.release(sent=True)
        limiter.observe(outcome.rate_limits, self.loop.time(), reservation=reservation)

    # -- telemetry -------------------------------------------------------------------------

    def waited(self, target: str, start: float, reason: str) -> None:
        now = self.loop.time()
        self.rec.wait(target, start, now, reason)
        if self.router.hooks:
            self.router.hooks(
                Waited(request_id=self.rec.request_id, target=target, seconds=now - start, reason=reason, at=start)
            )

    def attempt_ended(self, target: Target, outcome: Response | Failure | None) -> None:
        """Report the attempt just appended to the record (None: it was cancelled)."""
        if self.router.hooks:
            a = self.rec.attempts[-1]
            self.router.hooks(attempt_ended(self.rec.request_id, self.route.name, target, a, self.t0, outcome))

    def ended(self, record: RouteRecord | None) -> None:
        """Report the end of the request; no record: it was cancelled or raised before one existed."""
        now = self.loop.time()
        if record is None:
            exc = sys.exc_info()[1]
            outcome = "cancelled" if isinstance(exc, asyncio.CancelledError) else "error"
            record = self.rec.freeze(now, used=None, outcome=outcome, stopped=True)
        self.router.hooks(request_ended(record, now, tenant=self.env.tenant))

    def record_cancelled(self, target: Target, phase: Phase, start: float, until: float, hedge: bool) -> None:
        """A cancelled attempt (a lost hedge, a caller gone) was sent and may be billed."""
        cost = target.price.cost(self.input_tokens(target), 0)
        self.state.spent += cost
        total = min(target.attempt_cap(), max(0.0, until - start))
        self.rec.attempted(
            target,
            phase,
            start,
            self.loop.time(),
            connect=min(target.timeouts.connect, total),
            total=total,
            hedge=hedge,
            outcome="cancelled",
            cost=cost,
            estimated=True,
        )

    async def _exchange(
        self, target: Target, phase: Phase, request: Request, start: float, until: float, hedge: bool
    ) -> Response | Failure:
        router, loop = self.router, self.loop
        left = self.deadline.remaining(start)
        total = min(target.attempt_cap(), max(0.0, until - start))
        connect = min(target.timeouts.connect, total)
        asked = request
        request, stripped = readable_history(request, target.key, router.dialect(target).reasoning_source)
        streamed = self.streams(target, request)
        outcome: Response | Failure
        status: int | None = None
        first_event: float | None = None
        connected = watch_connect()  # a transport that can tell reports when it connected
        try:
            if streamed:
                status, outcome, first_event, streamed = await stream_exchange(
                    router, self.output, target, request, start, total, connect
                )
            else:
                status, outcome = await plain_exchange(router, target, request, total, connect)
        except (TimeoutError, TransportError, AuthError) as exc:
            outcome = exchange_failure(exc, total, left, target)
        contract_ok: bool | None = None
        task_ok: bool | None = None
        if isinstance(outcome, Response):
            outcome = validate(request, outcome, self.route.contract)
            contract_ok = isinstance(outcome, Response)
        elif outcome.kind in _CONTRACT_KINDS:
            contract_ok = False
        gate = router.gates.get(self.route.name)
        if isinstance(outcome, Response) and gate is not None:
            # the gate (a judge model, say) has its own budget but must not outlive ours
            async with asyncio.timeout(max(self.deadline.remaining(loop.time()), 0.0)):
                verdict = await gate(request, outcome)
            task_ok = bool(verdict.passed)
            if not task_ok:
                outcome = Failure(
                    kind=FailureKind.CONTRACT_FAILURE,
                    message=f"quality gate failed: {verdict.reason or 'no reason given'}",
                    status=200,
                    usage=outcome.usage,
                    response=outcome,
                    provider_request_id=outcome.provider_request_id,
                    provider_code="quality_gate",
                )
        end = loop.time()
        failure = outcome if isinstance(outcome, Failure) else None
        usage = outcome.usage  # a failed 200 (truncation, refusal) was paid for too
        cost, estimated = 0.0, False
        if usage is not None:
            cost = target.price.cost(usage.input_tokens, usage.output_tokens)
            if asked is self.request and usage.input_tokens > 0:  # not a repaired request
                observe_usage(target, self.local_tokens(target), usage.input_tokens)
        elif failure is not None and maybe_billed(failure):
            cost, estimated = target.price.cost(self.input_tokens(target), 0), True
        self.state.spent += cost
        attempt = self.rec.attempted(
            target,
            phase,
            start,
            end,
            connect=connect,
            total=total,
            hedge=hedge,
            failure=failure,
            status=status,
            usage=usage,
            cost=cost,
            estimated=estimated,
            provider_request_id=(
                failure.provider_request_id if failure is not None else getattr(outcome, "provider_request_id", None)
            ),
            connected=connected[0] if connected else None,
            streamed=streamed,
            first_event=first_event,
            contract_ok=contract_ok,
            task_ok=task_ok,
            stripped=stripped,
        )
        router.health.observe(target, failure, end - start, end)
        log.debug("attempt %d on %s (%s): %s in %.3fs", attempt.index, target.name, phase, attempt.outcome, end - start)
        if isinstance(outcome, Response):
            checked = checks_anything(request, self.route.contract)
            validation = Validation(transport=True, contract=True if checked else None, task=task_ok)
            self.used = attempt
            record = self.rec.freeze(end, used=attempt, outcome="ok", validation=validation)
            return replace(outcome, record=record)
        return outcome


_CONTRACT_KINDS = frozenset({FailureKind.SCHEMA_INVALID, FailureKind.TOOL_CALL_MALFORMED, FailureKind.CONTRACT_FAILURE})


def _total_msg(total: float, left: float, target: Target) -> str:
    if total >= left:
        return f"no complete response before the deadline ({total:.3f}s left)"
    if total < target.attempt_cap():
        return f"no complete response within the {total:.3f}s this replay had (the rest is kept for the next tier)"
    return f"no complete response within the {total:.3f}s attempt cap"


def _transport_failure(exc: TransportError, total: float, left: float, target: Target) -> Failure:
    if exc.phase == "connect_timeout":
        return Failure(kind=FailureKind.TIMEOUT, phase=TimeoutPhase.CONNECT, message=str(exc))
    if exc.phase == "total":
        return Failure(kind=FailureKind.TIMEOUT, phase=TimeoutPhase.TOTAL, message=_total_msg(total, left, target))
    if exc.phase == "too_large":  # an answer over the transport's limits: the upstream's fault
        return Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message=str(exc))
    return Failure(kind=FailureKind.TRANSPORT_TRANSIENT, message=str(exc))


def maybe_billed(failure: Failure) -> bool:
    """A request that reached the provider and was cut off may have been billed for input."""
    return failure.kind is FailureKind.TIMEOUT and failure.phase is not TimeoutPhase.CONNECT


async def plain_exchange(
    router: RouterParts, target: Target, request: Request, total: float, connect: float
) -> tuple[int, Response | Failure]:
    """One plain attempt's exchange, ``(status, outcome)``; a timeout, a transport error or an
    AuthError propagates (:func:`exchange_failure` classifies it)."""
    dialect = router.dialect(target)
    http = dialect.build(target, request)
    send_total, send_connect = total, connect
    if router.auth.needed(target):
        # a token refresh is part of the attempt: bounded by it, and what it took is
        # not the send's (a stream's first-event timer covers it the same way)
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(total):
            http = await router.auth.authorize(target, http)
        send_total = max(0.0, total - (loop.time() - began))
        send_connect = min(connect, send_total)
    if router.transport_enforces_total:
        resp = await router.transport.send(http, connect_timeout=send_connect, total_timeout=send_total)
    else:
        async with asyncio.timeout(send_total):
            resp = await router.transport.send(http, connect_timeout=send_connect, total_timeout=send_total)
    return resp.status, dialect.parse(target, resp)


def exchange_failure(
    exc: TimeoutError | TransportError | AuthError, total: float, left: float, target: Target
) -> Failure:
    """What an attempt's exchange raised, as its classified Failure (``left``: the deadline's
    time when the attempt started, ``total``: the attempt's own cap)."""
    if isinstance(exc, TimeoutError):
        return Failure(kind=FailureKind.TIMEOUT, phase=TimeoutPhase.TOTAL, message=_total_msg(total, left, target))
    if isinstance(exc, TransportError):
        return _transport_failure(exc, total, left, target)
    # the target's credential chain gave nothing to send with
    return Failure(kind=FailureKind.AUTHENTICATION_OR_PERMISSION, message=str(exc))


_CONTRACT_KINDS = frozenset({FailureKind.SCHEMA_INVALID, FailureKind.TOOL_CALL_MALFORMED, FailureKind.CONTRACT_FAILURE})
