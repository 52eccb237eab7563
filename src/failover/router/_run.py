"""The loop of one request: what the engine decides, carried out.

    _Run.execute()
      preflight    the schema version, the ledger, the plan (see _preflight)
      loop         per candidate (hedged: the first two raced), ask _engine.decide and do it:
                     Go     -> pay, then one attempt (_attempt: reserve, permit, exchange,
                               check, book, settle)
                     Sleep  -> pay, then wait (backoff or Retry-After), cut short when a
                               breaker opens and the wait would end in a refusal
                     Repair -> build the one corrective request
                     Next   -> leave the candidate (why goes into the record)
                     Stop   -> Unavailable now
      end          a Response with its RouteRecord, Unavailable, or (a stream cut after its
                   commit point) PartialOutput

The decisions are the engine's, pure; this loop pays for attempts (the retry budget),
sleeps, asks the tool ledger before a replay (workflow 3), and records.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from dataclasses import replace

from ..ledger import tenant_task_id
from ..model import (
    Failure,
    FailureKind,
    PartialOutput,
    Phase,
    Response,
    RouteRecord,
    SideEffectMode,
    Unavailable,
    disposition,
)
from ..policy import Candidate
from ..telemetry import RequestStarted
from ..validation import repair_request
from ._attempt import Attempts
from ._engine import Decision, Go, Lane, Next, Repair, Sleep, Stop, conclude, decide
from ._stream import _Partial
from ._telemetry import request_ended

log = logging.getLogger("failover.router")


def retry_ms(wait: float, *, probe: bool) -> int:
    """The caller's wait in ms. A provider's or a cool-down's is rounded up (never cut short); a
    breaker's next probe is rounded down, to whole seconds from one second on, so neither
    ``retry_after_ms`` nor a Retry-After header in whole seconds is ever later than the probe
    (1e-6 absorbs float noise)."""
    if not probe:
        return math.ceil(wait * 1000)
    if wait >= 1.0 - 1e-6:
        return 1000 * math.floor(wait + 1e-6)
    return max(1, math.floor(wait * 1000 + 1e-6))


class _Run(Attempts):
    """One request on its way through its candidates: the I/O that the engine's decisions ask for.

    What to do next is :func:`failover.router._engine.decide`'s answer, a pure function of
    ``self.state`` (a :class:`RunState`) and the lane of the candidate being tried; this
    class only carries it out: it pays for attempts, sleeps, sends, and records. The
    request's state is :class:`~._preflight.Preflight`'s, one attempt :class:`~._attempt.Attempts`'.
    """

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
        p = await self.prepare()
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
        request = self.request_for(target)  # its max_tokens capped to the target's max output
        lane = Lane(target=target, phase=phase, request=request, after=after, pool=pool, hedge=hedge, fresh=fresh)
        try:
            while True:
                now = loop.time()
                d = decide(s, lane, self.policies, now, self.router.rng)
                if not isinstance(d, Go):
                    if await self.carry_out(lane, d, now):
                        continue  # slept, or built the repair: ask again
                    return None  # left (Next, or no hedge)
                s.flying.append(lane)  # the engine counts its estimate until the attempt is booked
                try:
                    if s.launched:  # workflow 3: an attempt after the first needs the ledger's leave
                        await self.side_effects_allow(f"{lane.phase.value} attempt on {target.name}")
                    if not lane.paid:
                        self.pay(lane, d.retry, now)
                    outcome = await self.attempt(lane, d.until, d.quiet)
                finally:
                    s.flying.remove(lane)
                if isinstance(outcome, str):  # turned away by its limiter or breaker
                    self.refund(lane)
                    why = outcome if not lane.tries else f"no replay: {outcome}"
                    self.rec.exclude(target.name, lane.phase, why, temporary=True)
                    return None
                s.attempted(lane, outcome if isinstance(outcome, Failure) else None, loop.time())
                if isinstance(outcome, Response):
                    return outcome
                self.draw_canaries(lane)
                if self.output.started:  # the commit point: output reached the caller
                    if not self.restart_ok:
                        raise self.partial(outcome)
                    self.output.restart(outcome)
        finally:
            if lane.paid:  # paid for an attempt that was never made (a refusal after a wait)
                self.refund(lane)

    def draw_canaries(self, lane: Lane) -> None:
        """After a failed attempt a fallback may be needed: draw the canary shares of the
        fallbacks after ``lane`` now (once per request), so the engine keeps no attempt and no
        time for one its draw refuses."""
        s = self.state
        if not self.route.canary:
            return
        for cand in s.candidates[lane.after :]:
            name = cand.target.name
            if cand.phase is Phase.FALLBACK and name not in s.refused:
                why = self.canary.why_not(name)
                if why is not None:
                    s.refused[name] = why

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
        # An open breaker admits only its few probes when it ends, not a replay of every waiter:
        # a wait on a target whose breaker is open now is not slept (the engine then leaves it).
        opened = self.router.breakers.hold(target, now) is not None
        while not opened and (left := end - loop.time()) > 0 and await self.router.wait_unless_opened(left):
            held = self.policies.hold(target, loop.time())
            if held is not None and (held.until > end or self.router.breakers.hold(target, loop.time())):
                # its breaker opened meanwhile: the wait would end in a refusal, or (a short open
                # period) in a race of every waiter for the few half-open probe slots
                break
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

    # -- how the request ends ------------------------------------------------------------

    def unavailable(self, stop: Stop) -> Unavailable:
        now = self.loop.time()
        s = self.state
        probes: set[str] = set()  # targets whose return is their breaker's next probe
        for t in self.route.targets:  # a breaker that opened since a target failed outlasts its hint
            if t.name in s.back or t.name in s.anytime:
                held = self.policies.hold(t, now)
                if held is not None:
                    s.held(held)
                    # ...and no longer hint is told: the breaker lets a probe through at its end
                    s.back[t.name] = held.until
                    bh = self.router.breakers.hold(t, now)
                    if bh is not None and abs(now + bh.wait - held.until) < 1e-9:
                        probes.add(t.name)
        self.rec.retry_budget_exhausted = s.budget_spent
        record = self.rec.freeze(now, used=None, outcome=stop.kind.value, stopped=stop.stopped)
        until = s.retry_after(now)
        retry_after_ms = None
        if until is not None:
            retry_after_ms = retry_ms(until - now, probe=min(s.back, key=s.back.__getitem__) in probes)
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

    def ended(self, record: RouteRecord | None) -> None:
        """Report the end of the request; no record: it was cancelled or raised before one existed."""
        now = self.loop.time()
        if record is None:
            exc = sys.exc_info()[1]
            outcome = "cancelled" if isinstance(exc, asyncio.CancelledError) else "error"
            record = self.rec.freeze(now, used=None, outcome=outcome, stopped=True)
        self.router.hooks(request_ended(record, now, tenant=self.env.tenant))
