"""One run: a request on its way through its candidates, what the engine decides carried out.

    Run(call, work, state)      composed, not inherited (see _work):
      call       the route, envelope, clock, deadline, record and the caller's Output
      work       what is asked and how one attempt sends it: Generation (plain or streamed)
                 or Embedding; the run never knows which
      attempts   one attempt once the engine said Go (_attempt: reserve, permit, exchange,
                 book, settle)
    Run.execute()
      preflight  the schema version, the ledger, the plan (and one compaction when nothing fits)
      loop       per candidate (hedged: the first two raced), ask _engine.decide and do it:
                   Go     -> pay, then one attempt
                   Sleep  -> pay, then wait (backoff or Retry-After), cut short when a
                             breaker opens and the wait would end in a refusal
                   Repair -> build the one corrective request
                   Next   -> leave the candidate (why goes into the record)
                   Stop   -> end the request
      end        one place: answered (the Response or Embeddings with its RouteRecord),
                 unavailable (Unavailable), partial (a stream cut after its commit point)

The decisions are the engine's, pure; this loop pays for attempts (the retry budget, with the
decision, before anything is awaited), sleeps, asks the tool ledger before a replay
(workflow 3), and records.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Generic

from ..ledger import tenant_task_id
from ..model import (
    Capability,
    Embeddings,
    EmbedRequest,
    Envelope,
    ExclusionCode,
    Failure,
    FailureKind,
    PartialOutput,
    Phase,
    Request,
    Response,
    Route,
    RouteRecord,
    SideEffectMode,
    Unavailable,
    disposition,
)
from ..policy import CanaryGate, Candidate, Violation
from ..telemetry import RequestStarted
from ..validation import repair_request
from ._attempt import Attempts
from ._conclude import conclude
from ._embed import Embedding
from ._engine import budget_spent, decide
from ._generate import Generation
from ._parts import RouterParts
from ._state import Decision, Go, Lane, Next, Repair, RunState, Sleep, Stop, output_limit
from ._stream import _Partial
from ._telemetry import request_ended
from ._work import Answer, Call, Work

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


class Run(Generic[Answer]):
    """One request on its way through its candidates: the I/O that the engine's decisions ask for.

    What to do next is :func:`failover.router._engine.decide`'s answer, a pure function of
    ``self.state`` (a :class:`RunState`) and the lane of the candidate being tried; this
    class only carries it out: it pays for attempts, sleeps, sends, and records. What is
    asked and sent is its ``work``'s; one attempt is its ``attempts``'.
    """

    def __init__(self, call: Call, work: Work[Answer], *, restart_on_partial: bool = False) -> None:
        self.call = call
        self.work: Work[Answer] = work
        router = call.router
        self.router: RouterParts = router
        self.route, self.env, self.loop, self.t0 = call.route, call.env, call.loop, call.t0
        self.rec, self.output, self.deadline = call.rec, call.output, call.deadline
        self.state = RunState(
            envelope=call.env,
            t0=call.t0,
            deadline_at=call.deadline.at,
            input_tokens=work.input_tokens,
            max_tokens=output_limit(work.request),
            fallback_reserve=call.route.fallback_reserve,
            replay_timeouts=call.route.replay_timeouts,
        )
        self.attempts = Attempts(call, work, self.state)
        self.policies = router.policies
        self.canary = CanaryGate(call.route, router.canary_rng)  # draws only once an attempt failed
        self.restart_ok = restart_on_partial and call.env.allow_after_partial

    @classmethod
    def generation(
        cls,
        router: RouterParts,
        route: Route,
        request: Request,
        envelope: Envelope,
        *,
        stream: bool = False,
        restart_on_partial: bool = False,
        tokens: Mapping[str, int] | None = None,
    ) -> Run[Response]:
        """The run of :meth:`Router.complete` (``stream``: of :meth:`Router.stream`; ``tokens``:
        the request's input tokens already counted, by counter name)."""
        if stream:
            envelope = replace(envelope, required=envelope.required | {Capability.STREAMING})
        call = Call(router, route, envelope)
        return Run(call, Generation(call, request, tokens), restart_on_partial=restart_on_partial)

    @classmethod
    def embedding(cls, router: RouterParts, route: Route, request: EmbedRequest, envelope: Envelope) -> Run[Embeddings]:
        """The run of :meth:`Router.embed`."""
        call = Call(router, route, envelope)
        return Run(call, Embedding(call, request))

    @property
    def request(self) -> Request | EmbedRequest:
        """The request as it stands (shorter after a compaction)."""
        return self.work.request

    def capped_to(self, sent: int | None) -> int | None:
        return self.work.capped_to(sent)

    async def execute(self) -> Answer:
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
        work = self.work
        p = await work.plan()
        if not p.candidates and work.compactable and await work.compact(work.overflows(p.required)):
            s.max_tokens = output_limit(work.request)
            p = await work.plan()  # the shorter request, planned again
        self.rec.excluded.extend(p.excluded)
        if p.placement is not None:
            self.rec.placement = str(p.placement)
        if route.primary:
            self.rec.input_tokens = work.input_tokens(route.primary[0])
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
            over = work.overflows(p.required)
            if over and len(over) == len(p.excluded):
                kind = FailureKind.CONTEXT_OVERFLOW
            raise self.unavailable(Stop(kind, f"no candidate can serve this request ({why})"))

        cands = p.candidates
        start = 0
        if route.hedge_after is not None and self.output.sink is None and len(cands) > 1:
            resp = await self.hedged(cands[0], cands[1], route.hedge_after)
            if resp is not None:
                return self.answered(resp)
            start = 2
        for i in range(start, len(cands)):
            resp = await self.try_candidate(cands[i], after=i + 1, fresh=i == 0)
            if resp is not None:
                return self.answered(resp)
        raise self.unavailable(conclude(s, self.rec.attempts, self.rec.excluded, self.loop.time(), env.budget))

    async def hedged(self, first: Candidate, second: Candidate, delay: float) -> Answer | None:
        """Hedging: if ``first`` has no answer after ``delay``, race ``second`` against it.

        Until the hedge starts, the lead's next tier is ``second`` (a replay keeps its reserve and
        the envelope's last attempt for it, as without hedging); once it starts, both lanes keep
        them for the candidates after the two. The engine decides each lane's attempts: the
        hedge is an extra attempt (the attempt limit, its pool's retry budget when that is the
        lead's pool, the cost of the lane in flight), and while one lane is under way a spent
        envelope only ends the other lane (:func:`~._engine.decide`), never the request. The
        first acceptable result wins and the other lane is cancelled (its connection closed);
        every attempt stays in the record with its cost, whichever way the request ends.
        """
        front = self.lane_for(first, after=1, fresh=True)
        lead = asyncio.ensure_future(self.run_lane(front))
        started, _ = await asyncio.wait({lead}, timeout=delay)
        if started:
            resp = lead.result()
            return resp if resp is not None else await self.try_candidate(second, after=2)
        front.after = 2  # the lead's next tier is now what comes after the hedge
        hedge = asyncio.ensure_future(self.run_lane(self.lane_for(second, after=2, hedge=True)))
        pending: set[asyncio.Future[Answer | None]] = {lead, hedge}
        winner: Answer | None = None
        try:
            while pending and winner is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    winner = winner or task.result()
        except Unavailable as exc:  # a stop of the whole request (workflow 3): the other lane goes too
            await _cancelled(pending)
            pending = set()
            attempts = tuple(self.rec.attempts)
            exc.record = replace(exc.record, attempts=attempts, total_cost=sum(a.cost for a in attempts))
            raise
        finally:
            await _cancelled(pending)  # the loser's cancelled attempt is booked before the answer's record
        return winner

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

    async def try_candidate(self, cand: Candidate, *, after: int, fresh: bool = False) -> Answer | None:
        """Carry out the engine's decisions for one candidate until it answers or is left."""
        return await self.run_lane(self.lane_for(cand, after=after, fresh=fresh))

    def lane_for(self, cand: Candidate, *, after: int, hedge: bool = False, fresh: bool = False) -> Lane:
        target = cand.target
        pool = self.router.retry_budget.pool_of(target)
        request = self.work.request_for(target)  # its max_tokens capped to the target's max output
        return Lane(target=target, phase=cand.phase, request=request, after=after, pool=pool, hedge=hedge, fresh=fresh)

    async def run_lane(self, lane: Lane) -> Answer | None:
        """Carry out the engine's decisions for one lane until it answers or is left."""
        target = lane.target
        if lane.phase is Phase.FALLBACK:  # reached only when a fallback is needed: canary shares apply here
            why = self.canary.why_not(target.name)
            if why is not None:
                self.rec.exclude(target.name, lane.phase, ExclusionCode.CANARY, why)
                return None
        s, loop = self.state, self.loop
        s.running.append(lane)
        try:
            while True:
                now = loop.time()
                d = decide(s, lane, self.policies, now, self.router.rng)
                if not isinstance(d, Go):
                    if await self.carry_out(lane, d, now):
                        continue  # slept, or built the repair: ask again
                    return None  # left (Next)
                # The slot and the budget's token are taken with the decision, before anything is
                # awaited: concurrent requests cannot all spend the one token the engine saw.
                if not lane.paid and not self.pay(lane, d.retry, now):
                    self.budget_refused(lane)
                    return None
                s.flying.append(lane)  # the engine counts its estimate until the attempt is booked
                try:
                    if s.launched > 1:  # workflow 3: an attempt after the first needs the ledger's leave
                        await self.side_effects_allow(f"{lane.phase.value} attempt on {target.name}")
                    outcome = await self.attempts.attempt(lane, d.until, d.quiet, d.start_by)
                finally:
                    s.flying.remove(lane)
                if isinstance(outcome, Violation):  # turned away by its limiter or breaker
                    self.refund(lane)
                    why = outcome.reason if not lane.tries else f"no replay: {outcome.reason}"
                    self.rec.exclude(target.name, lane.phase, outcome.code, why, temporary=True, replay=lane.tries > 0)
                    return None
                s.attempted(lane, outcome if isinstance(outcome, Failure) else None, loop.time())
                if not isinstance(outcome, Failure):
                    return self.work.answer(outcome)
                self.draw_canaries(lane)
                if self.output.started:  # the commit point: output reached the caller
                    if not self.restart_ok:
                        raise self.partial(outcome)
                    self.output.restart(outcome)
        finally:
            s.running.remove(lane)
            if lane.paid and not lane.sent:  # paid for an attempt never made (a refusal after a wait)
                self.refund(lane)

    def budget_refused(self, lane: Lane) -> None:
        """The pool's budget refused the token the engine saw (another process of the fleet took
        it first): the lane is left as the engine would have left it."""
        d = budget_spent(lane.target, lane.pool, "no replay: " if lane.tries else "")
        self.state.leave(lane, d)
        assert d.code is not None and d.reason is not None
        self.rec.exclude(lane.target.name, lane.phase, d.code, d.reason, temporary=True, replay=lane.tries > 0)

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

    async def carry_out(self, lane: Lane, decision: Decision, now: float) -> bool:
        """Every decision but Go: False when the lane is left, True to ask the engine again."""
        s, target = self.state, lane.target
        if isinstance(decision, Next):
            s.leave(lane, decision)
            if decision.code is not None and decision.reason is not None:
                self.rec.exclude(
                    target.name,
                    lane.phase,
                    decision.code,
                    decision.reason,
                    temporary=decision.temporary,
                    replay=lane.tries > 0,
                )
            return False
        if isinstance(decision, Stop):
            if lane.tries:
                s.note_end(target.name, lane.failure, lane.failed_at)
            raise self.unavailable(decision)
        if isinstance(decision, Repair):
            assert lane.failure is not None
            assert isinstance(lane.request, Request)  # only a generation is repaired
            s.repair(lane, repair_request(lane.request, lane.failure, target, self.work.input_tokens(target)))
            return True
        assert isinstance(decision, Sleep)
        # the slot and the budget's token are taken with the decision, before the ledger's
        # answer and the wait are awaited
        if not lane.paid and not self.pay(lane, decision.retry, now):
            self.budget_refused(lane)
            return False
        if s.launched > 1:  # the ledger is asked before a wait too: a refusal then costs no sleep
            await self.side_effects_allow(f"{lane.phase.value} attempt on {target.name}")
        loop = self.loop
        end = now + decision.seconds
        # An open breaker admits only its few probes when it ends, not a replay of every waiter:
        # a wait on a target whose breaker is open now is not slept (the engine then leaves it).
        opened = self.router.breakers.hold(target, now) is not None
        while not opened and (left := end - loop.time()) > 0 and await self.router.wait_unless_opened(left):
            held = self.policies.hold(target, loop.time())
            if held is not None and (held.until > end or self.router.breakers.hold(target, loop.time())):
                # its breaker opened meanwhile: the wait would end in a refusal, or (a short open
                # period) in a race of every waiter for the few half-open probe slots
                break
        self.attempts.waited(target.name, now, decision.source)
        lane.waited = True
        return True

    def pay(self, lane: Lane, retry: bool, now: float) -> bool:
        """Take the attempt's slot and its share of the pool's retry budget; False when the
        budget refuses the token (nothing is taken then)."""
        budget = self.router.retry_budget
        if retry:
            if not budget.try_withdraw(now, lane.pool):
                return False
        else:
            budget.record_request(now, lane.pool)
        self.state.pay(lane, lane.pool, retry)
        return True

    def refund(self, lane: Lane) -> None:
        if lane.paid_retry:
            self.router.retry_budget.refund(self.loop.time(), lane.pool)
        self.state.refund(lane)

    # -- how the request ends: one place for its record ----------------------------------------

    def answered(self, answer: Answer) -> Answer:
        """The answer with the request's record: every attempt made, a hedge's cancelled loser too."""
        used = self.attempts.used
        assert used is not None  # an answer's attempt was booked as the one used
        record = self.rec.freeze(self.loop.time(), used=used, outcome="ok", validation=self.attempts.checked)
        return replace(answer, record=record)

    def unavailable(self, stop: Stop) -> Unavailable:
        now = self.loop.time()
        s = self.state
        listed = {e.target for e in self.rec.excluded} | {a.target for a in self.rec.attempts}
        for name, why in s.refused.items():  # a fallback its canary draw refused, never reached
            if name not in listed:
                phase = next((c.phase for c in s.candidates if c.target.name == name), Phase.FALLBACK)
                self.rec.exclude(name, phase, ExclusionCode.CANARY, why)
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

    def left(self, outcome: str = "cancelled") -> RouteRecord:
        """The record of a request that ended with no answer and no Unavailable: the caller left
        (``cancelled``), or something raised (``error``)."""
        return self.rec.freeze(self.loop.time(), used=None, outcome=outcome, stopped=True)

    def ended(self, record: RouteRecord | None) -> None:
        """Report the end of the request; no record: it was cancelled or raised before one existed."""
        if record is None:
            exc = sys.exc_info()[1]
            record = self.left("cancelled" if isinstance(exc, asyncio.CancelledError) else "error")
        self.router.hooks(request_ended(record, self.loop.time(), tenant=self.env.tenant))


async def _cancelled(tasks: set[asyncio.Future[Any]]) -> None:
    """Cancel a hedge's other lanes and wait until they have booked their cancelled attempts."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
