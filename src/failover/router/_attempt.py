"""One attempt, once the engine said Go: everything between that decision and its outcome.

    attempt(lane, until)
      reserve    the target's client-side rate limit: wait for room, or say why it cannot start
      permit     the breakers' permits (one awaited round trip on a shared store), or why not
      exchange   on the history the target can read: plain (dialect.build -> auth.authorize ->
                 transport.send -> dialect.parse) or streamed (_stream.stream_exchange)
      check      the route's contract (validation) and its quality gate
      book       the cost, the Attempt in the record, the health board
      settle     the breakers and the reservation, with what the provider did

A string instead of an outcome says why the attempt could not start. A timeout, a transport
error or a credential chain that gives nothing becomes the attempt's classified Failure.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace

from ..auth import AuthError
from ..model import (
    Capability,
    ExclusionCode,
    Failure,
    FailureKind,
    Phase,
    Request,
    Response,
    Target,
    TimeoutPhase,
    Validation,
)
from ..model._record import watch_connect
from ..policy import LimitWaitTooLong, Reservation, TargetLimiter
from ..policy._selection import Hold, Violation, hold_of
from ..telemetry import AttemptStarted
from ..telemetry import Backoff as Waited
from ..tokens import observe_usage
from ..transport import TransportError
from ..validation import checks_anything, validate
from ._conclude import CONTRACT_KINDS
from ._engine import Lane, attempt_cost
from ._history import readable_history
from ._parts import RouterParts
from ._preflight import Preflight
from ._stream import StreamTimers, stream_exchange
from ._telemetry import attempt_ended

log = logging.getLogger("failover.router")


class Attempts(Preflight):
    """The attempts of one request (see the module docstring); the loop that asks for them is
    :class:`~._run._Run`."""

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

    async def attempt(
        self, lane: Lane, until: float, quiet: float = math.inf, start_by: float = math.inf
    ) -> Response | Failure | Violation:
        """One attempt that must end by ``until`` unless its output is committed (a stream may
        stay silent ``quiet`` seconds until then) and start by ``start_by`` (a limiter's queue
        may not hold it longer); a Violation is why it could not start (its limiter, its
        breakers)."""
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
                    deadline_at=min(until - target.timeouts.min_useful, start_by),
                    tenant=self.env.tenant,
                )
            except LimitWaitTooLong as exc:
                s.limited = True
                if math.isfinite(exc.wait_seconds):  # when the caller may come back (Retry-After)
                    s.held(Hold(target.name, loop.time() + exc.wait_seconds, FailureKind.RATE_LIMITED))
                return Violation(ExclusionCode.RATE_LIMITED, f"client-side rate limit: {exc}")
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
            return Violation(ExclusionCode.HELD, rejected)
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
            outcome = await self._exchange(target, phase, request, start, until, lane.hedge, quiet)
        except asyncio.CancelledError:
            router.breakers.discard(permits, loop.time())  # cancelled: says nothing about health
            # its output so far is unknown, and a provider may finish (and bill) an answer
            # after the connection closed: booked at the most the engine admitted it at
            cost = attempt_cost(s, lane)
            self.record_cancelled(target, phase, start, until, lane.hedge, cost, self.capped_to(request.max_tokens))
            self.attempt_ended(target, None)
            if reservation is not None:
                reservation.settle(self.input_tokens(target), 0)  # sent: count the input as spent
            raise
        except BaseException:
            router.breakers.discard(permits, loop.time())
            if reservation is not None:
                reservation.release(sent=True)
            raise
        lane.took = loop.time() - start
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

    async def _exchange(
        self, target: Target, phase: Phase, request: Request, start: float, until: float, hedge: bool, quiet: float
    ) -> Response | Failure:
        """Exchange, check and book one attempt: its Attempt is the record's last on return (an
        embedding run exchanges and books its own way, see _embed)."""
        router = self.router
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
        timers: StreamTimers | None = None
        try:
            if streamed:
                cap = target.attempt_cap()
                timers = StreamTimers(
                    start=start,
                    first_event=target.timeouts.first_event,
                    idle=target.timeouts.idle,
                    quiet=quiet,
                    uncommitted_end=start + total,
                    committed_end=min(start + cap, self.deadline.at),
                )
                self.output.committed_at = None
                status, outcome, first_event, streamed = await stream_exchange(
                    router, self.output, target, request, timers, connect
                )
            else:
                status, outcome = await plain_exchange(router, target, request, total, connect)
        except (TimeoutError, TransportError, AuthError) as exc:
            outcome = exchange_failure(exc, total, left, target)
        outcome, contract_ok, task_ok = await self.check(request, outcome, until)
        if timers is not None and isinstance(outcome, Failure) and not self.output.started:
            self.output.discard_attempt()  # held whole and refused by the contract or the gate: never shown
        end = self.loop.time()
        failure = outcome if isinstance(outcome, Failure) else None
        usage = outcome.usage  # a failed 200 (truncation, refusal) was paid for too
        cost, estimated = 0.0, False
        if usage is not None:
            cost = target.price.cost(usage.input_tokens, usage.output_tokens)
            if asked is self.request_for(target) and usage.input_tokens > 0:  # not a repaired request
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
            quiet=timers.quiet if timers is not None else math.inf,
            committed=_committed(self.output.committed_at, end, outcome) if timers is not None else None,
            contract_ok=contract_ok,
            task_ok=task_ok,
            stripped=stripped,
            dropped=(
                request.passthrough.dropped(target.dialect, takes=target.passthrough)
                if request.passthrough is not None
                else ()
            ),
            capped_to=self.capped_to(asked.max_tokens),
        )
        router.health.observe(target, failure, end - start, end)
        router.windows.learn(target, failure)  # a window the provider stated in an overflow error
        log.debug("attempt %d on %s (%s): %s in %.3fs", attempt.index, target.name, phase, attempt.outcome, end - start)
        if isinstance(outcome, Response):
            checked = checks_anything(request, self.route.contract)
            validation = Validation(transport=True, contract=True if checked else None, task=task_ok)
            self.used = attempt
            record = self.rec.freeze(end, used=attempt, outcome="ok", validation=validation)
            return replace(outcome, record=record)
        return outcome

    async def check(
        self, request: Request, outcome: Response | Failure, until: float = math.inf
    ) -> tuple[Response | Failure, bool | None, bool | None]:
        """The route's contract and quality gate on what came back: ``(outcome, contract_ok,
        task_ok)``, None where nothing was judged. A gate that gives no verdict by ``until`` (the
        deadline once the output is committed), or raises, fails: a typed contract failure of
        the gate, as a verdict that fails would be."""
        contract_ok: bool | None = None
        task_ok: bool | None = None
        if isinstance(outcome, Response):
            outcome = validate(request, outcome, self.route.contract)
            contract_ok = isinstance(outcome, Response)
        elif outcome.kind in CONTRACT_KINDS:
            contract_ok = False
        gate = self.router.gates.get(self.route.name)
        if isinstance(outcome, Response) and gate is not None:
            # The gate (a judge model, say) has its own budget, but its time is the attempt's: until
            # the output is committed it ends by ``until``, so the next candidate keeps its share.
            outcome_at = self.loop.time()
            end = self.deadline.at if self.output.started else min(until, self.deadline.at)
            why: str | None = None
            try:
                async with asyncio.timeout(max(end - self.loop.time(), 0.0)) as cut:
                    verdict = await gate(request, outcome)
            except Exception as exc:  # a judge that cannot judge fails the gate (fail closed), typed
                if isinstance(exc, TimeoutError) and cut.expired():
                    why = f"the judge gave no verdict within the {max(0.0, end - outcome_at):.3f}s this attempt had"
                else:
                    why = f"the judge raised {type(exc).__name__}: {exc}"
                why = f"quality gate could not judge the answer: {why}"
                log.warning("request %s: %s", self.rec.request_id, why)
            else:
                if not verdict.passed:
                    why = f"quality gate failed: {verdict.reason or 'no reason given'}"
            task_ok = why is None
            if why is not None:
                outcome = Failure(
                    kind=FailureKind.CONTRACT_FAILURE,
                    message=why,
                    status=200,
                    usage=outcome.usage,
                    response=outcome,
                    provider_request_id=outcome.provider_request_id,
                    provider_code="quality_gate",
                    quality_gate=True,
                )
        return outcome, contract_ok, task_ok

    # -- what an attempt reports -----------------------------------------------------------

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

    def record_cancelled(
        self,
        target: Target,
        phase: Phase,
        start: float,
        until: float,
        hedge: bool,
        cost: float,
        capped_to: int | None = None,
    ) -> None:
        """A cancelled attempt (a lost hedge, a caller gone) was sent and may be billed ``cost``."""
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
            capped_to=capped_to,
        )


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


def _committed(at: float | None, end: float, outcome: Response | Failure) -> float | None:
    """When a streamed attempt's output was committed: at the end for an answer held whole
    (shown as soon as the attempt succeeds)."""
    if at is None and isinstance(outcome, Response):
        return end
    return at


def maybe_billed(failure: Failure) -> bool:
    """A request that reached the provider and was cut off may have been billed for input."""
    return failure.kind is FailureKind.TIMEOUT and failure.phase is not TimeoutPhase.CONNECT
