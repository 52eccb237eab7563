"""One attempt, once the engine said Go: everything between that decision and its outcome.

    Attempts(call, work, state).attempt(lane, until, quiet, start_by)
      reserve    the target's client-side rate limit: wait for room (until ``start_by`` at
                 most), or say why it cannot start
      permit     the breakers' permits (one awaited round trip on a shared store), or why not
      exchange   the work's (a generation's plain or streamed exchange, an embedding's batches)
      book       the cost, the Attempt in the record, the health board and the windows
      settle     the breakers and the reservation, with what the provider did

A :class:`~failover.policy.Violation` instead of an outcome says why the attempt could not
start. The same part books an attempt cancelled in flight (a lost hedge, a caller gone).
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from ..model import (
    Attempt,
    Embeddings,
    EmbedRequest,
    ExclusionCode,
    Failure,
    FailureKind,
    Phase,
    Request,
    Response,
    Target,
    Validation,
)
from ..policy import Hold, LimitWaitTooLong, Reservation, TargetLimiter, Violation, hold_of
from ..telemetry import AttemptStarted
from ..telemetry import Backoff as Waited
from ._engine import attempt_cost
from ._state import Lane, RunState
from ._telemetry import attempt_ended
from ._work import Call, Exchanged, Work

log = logging.getLogger("failover.router")

Outcome = Response | Embeddings | Failure


class Attempts:
    """The attempts of one run (see the module docstring)."""

    __slots__ = ("call", "checked", "state", "used", "work")

    def __init__(self, call: Call, work: Work[Any], state: RunState) -> None:
        self.call = call
        self.work = work
        self.state = state
        self.used: Attempt | None = None  # the attempt that answered, once one has
        self.checked: Validation | None = None  # its validation

    async def attempt(
        self, lane: Lane, until: float, quiet: float = math.inf, start_by: float = math.inf
    ) -> Outcome | Violation:
        """One attempt that must end by ``until`` unless its output is committed (a stream may
        stay silent ``quiet`` seconds until then) and start by ``start_by`` (a limiter's queue
        may not hold it longer); a Violation is why it could not start (its limiter, its
        breakers)."""
        target, phase, request = lane.target, lane.phase, lane.request
        call, s = self.call, self.state
        router, loop = call.router, call.loop
        reservation = None
        limiter = router.limiters.limiter_for(target) if router.limiters is not None else None
        if limiter is not None:
            # Wait locally rather than provoke a 429, but only as long as the deadline allows.
            asked = loop.time()
            try:
                reservation = await limiter.acquire(
                    input_tokens=self.work.input_tokens(target),
                    max_output_tokens=self.work.output_reserve(target, request),
                    deadline_at=min(until - target.timeouts.min_useful, start_by),
                    tenant=call.env.tenant,
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
        lane.sent = True  # from here on the attempt is made: cancelled, it is booked, not refunded
        router.load.started(target, start)  # in flight, for the balancer, until it ends (below)
        if router.hooks:
            router.hooks(
                AttemptStarted(
                    request_id=call.rec.request_id,
                    route=call.route.name,
                    target=target.name,
                    model=target.model,
                    phase=phase.value,
                    index=len(call.rec.attempts),
                    at=start,
                )
            )
        try:
            ex = await self.work.exchange(target, request, start, until, quiet)
        except asyncio.CancelledError:
            router.breakers.discard(permits, loop.time())  # cancelled: says nothing about health
            router.load.ended(target, start, None, loop.time())
            # its output so far is unknown, and a provider may finish (and bill) an answer
            # after the connection closed: booked at the most the engine admitted it at
            cost = attempt_cost(s, lane)
            self.record_cancelled(target, phase, start, until, lane.hedge, cost, self.capped(request))
            self.attempt_ended(target, None)
            if reservation is not None:
                reservation.settle(self.work.input_tokens(target), 0)  # sent: count the input as spent
            raise
        except BaseException:
            router.breakers.discard(permits, loop.time())
            router.load.ended(target, start, None, loop.time())
            if reservation is not None:
                reservation.release(sent=True)
            raise
        outcome = ex.outcome
        end = loop.time()
        lane.took = end - start
        self.book(target, phase, start, end, lane.hedge, ex)
        self.attempt_ended(target, outcome)
        failure = outcome if isinstance(outcome, Failure) else None
        # the provider's time: a stream held back for a slow caller was waiting on the caller
        # (a failure that is not the target's doing, Failure.not_target, no breaker counts)
        took = max(0.0, end - start - ex.paused)
        router.breakers.record(target, permits, failure, took, end)
        router.load.ended(target, start, took if failure is None else None, end)
        router.load.observe(target, outcome.rate_limits, end)
        if reservation is not None and limiter is not None:
            self.settle(limiter, reservation, target, outcome)
        return outcome

    def book(self, target: Target, phase: Phase, start: float, end: float, hedge: bool, ex: Exchanged) -> None:
        """The attempt in the record with its cost, and what it tells the health board and the
        window board; an answer's attempt becomes the one used."""
        router = self.call.router
        outcome = ex.outcome
        failure = outcome if isinstance(outcome, Failure) else None
        self.state.spent += ex.cost
        attempt = self.call.rec.attempted(
            target,
            phase,
            start,
            end,
            connect=ex.connect,
            total=ex.total,
            hedge=hedge,
            failure=failure,
            status=ex.status,
            usage=ex.usage,
            cost=ex.cost,
            estimated=ex.estimated,
            provider_request_id=outcome.provider_request_id,
            connected=ex.connected,
            streamed=ex.streamed,
            first_event=ex.first_event,
            quiet=ex.quiet,
            committed=ex.committed,
            contract_ok=ex.contract_ok,
            task_ok=ex.task_ok,
            stripped=ex.stripped,
            dropped=ex.dropped,
            capped_to=ex.capped_to,
        )
        router.health.observe(target, failure, max(0.0, end - start - ex.paused), end)
        router.windows.learn(target, failure)  # a window the provider stated in an overflow error
        log.debug("attempt %d on %s (%s): %s in %.3fs", attempt.index, target.name, phase, attempt.outcome, end - start)
        if failure is None:
            self.used, self.checked = attempt, ex.checked

    def capped(self, request: Request | EmbedRequest) -> int | None:
        return self.work.capped_to(request.max_tokens) if isinstance(request, Request) else None

    def settle(self, limiter: TargetLimiter, reservation: Reservation, target: Target, outcome: Outcome) -> None:
        """Reconcile the reservation with what the provider actually did, and follow its headers."""
        usage = outcome.usage
        if usage is not None:
            reservation.settle(usage.input_tokens, usage.output_tokens)
        elif isinstance(outcome, Failure) and outcome.kind is FailureKind.RATE_LIMITED:
            reservation.release(sent=True)
            limiter.penalize(outcome.retry_after, self.call.loop.time())
        elif isinstance(outcome, Failure) and outcome.kind is FailureKind.TIMEOUT:
            reservation.settle(self.work.input_tokens(target), 0)  # it may be generating and billing
        else:
            reservation.release(sent=True)
        limiter.observe(outcome.rate_limits, self.call.loop.time(), reservation=reservation)

    # -- what an attempt reports -----------------------------------------------------------

    def waited(self, target: str, start: float, reason: str) -> None:
        call = self.call
        now = call.loop.time()
        call.rec.wait(target, start, now, reason)
        if call.router.hooks:
            call.router.hooks(
                Waited(request_id=call.rec.request_id, target=target, seconds=now - start, reason=reason, at=start)
            )

    def attempt_ended(self, target: Target, outcome: Outcome | None) -> None:
        """Report the attempt just appended to the record (None: it was cancelled)."""
        call = self.call
        if call.router.hooks:
            a = call.rec.attempts[-1]
            call.router.hooks(attempt_ended(call.rec.request_id, call.route.name, target, a, call.t0, outcome))

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
        self.call.rec.attempted(
            target,
            phase,
            start,
            self.call.loop.time(),
            connect=min(target.timeouts.connect, total),
            total=total,
            hedge=hedge,
            outcome="cancelled",
            cost=cost,
            estimated=True,
            capped_to=capped_to,
        )


__all__ = ["Attempts", "Outcome"]
