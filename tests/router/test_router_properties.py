"""The whole router over random fault schedules on virtual time (hypothesis): every rule that
bounds a request holds when all of them act at once.

One route, three targets: two keys of one model (k1, k2: one upstream, so one retry-budget
pool) and a cross-model fallback (fb). A random schedule composes

* hedging on or off (``Route.hedge_after``),
* a fault per call on each key (503, 500, 429 with and without Retry-After, a hang, a reset, a
  quick or a slow answer), and on the fallback either the same or a quick answer every time,
* a slow tool ledger (every read takes LEDGER_DELAY; no tool ever ran, so replays are allowed),
* a canary share on the fallback, drawn from a seeded ``canary_rng``,
* a cost cap (``Envelope.max_cost``) over priced targets, tight or ample,
* a flaky quality gate (passes, fails, raises, answers late, never answers),
* a client-side limiter queue on k1 (``Limits(concurrency=1)``),
* a retry budget whose floor may bind, the default breakers, and a few concurrent callers.

Checked for every request (``violations`` says which rule broke, numbered as here):

1. attempts: the fake providers received at most ``Envelope.max_attempts`` calls for it (hedges
   and cancelled losers included); every call after its first arrived within
   ``max_added_latency`` of the request's start (plus one ledger read and a tick: the engine
   decides, reads the ledger, then sends). Over the run, each retry-budget pool received at
   most ``deposits + floor + floor(ratio * deposits)`` calls, where ``deposits`` are the
   first attempts the budget was told of: every call is paid for by a deposit or by a
   withdrawal, and with a window longer than the run the budget grants at most
   ``floor + floor(ratio * deposits)`` withdrawals.
2. the record: the calls the providers received for it (matched on the request's own prompt)
   are, per target, exactly the attempts of its RouteRecord (a cancelled hedge included, with
   outcome "cancelled"); every attempt costs >= 0 and the record's total is their sum.
3. an answer when one was possible (fallback_can_answer): the fallback answers every call
   within FB_LATENCY and its answers pass the gate at once, the cost cap is ample (or none),
   there is no ``max_added_latency``, ``budget >= 3`` and every key's cap <= 2 s (so the first
   attempts keep fb's reserve, min_useful + UNKNOWN_LATENCY), and the envelope leaves fb an
   attempt:

   * without hedging, ``max_attempts >= attempts + 2``: k1's replays keep the last attempt for
     k2 only (its next candidate), and k2's first attempt may take it; a replay of k2 keeps it
     for fb. And k2 answers quickly (no hang, no slow answer) and no judge is stuck: k2's first
     attempt, started after k1 kept fb's reserve to its end (and the ledger read ate into it),
     may by design run to the deadline (``_time_for``: "the whole deadline when that would
     leave it less than the need") - see the report on this branch;
   * with hedging, ``max_attempts >= 3``: the lead runs with fb as its next candidate and keeps
     the last attempt for it, and the hedge "draws on the attempt limit like a retry"
     (``_Run.hedged``), so k1's first attempt, one extra (a replay or the hedge) and fb fit.

   And fb is on no canary: a draw that refuses it is kept in the request's state and reaches
   the record only if the loop gets to fb, so a record cannot tell a refused draw apart.
   Then the request gets an answer.
4. every failure is an ``Unavailable`` or a ``PartialOutput``: never a TimeoutError, the judge's
   own exception, or anything else.
5. the request ends by its deadline (loop clock), give or take one scheduling tick (TICK).

The tests at the end switch one rule of the router off each and show the checker notices.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import looptime
from hypothesis import example, given, settings
from hypothesis import strategies as st

from failover import (
    Envelope,
    Limits,
    Price,
    Request,
    Response,
    Route,
    Router,
    SideEffectMode,
    Target,
    Timeouts,
    Unavailable,
)
from failover.ledger import Ledger, MemoryStore, SideEffectDecision
from failover.model import PartialOutput, RouteRecord, Secret
from failover.policy import Backoff, BreakerBoard, RetryBudget
from failover.router import _attempt, _engine, _generate, _run
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.transport import HttpRequest, HttpResponse
from failover.validation import GateVerdict

UPSTREAM = "up.fake"
LEDGER_DELAY = 0.02  # every read of the tool ledger takes this long
TICK = 1e-3  # one scheduling tick of the loop clock
FB_LATENCY = 0.05
RATIO = 0.1
MAX_TOKENS = 100
# $1 per 1,000 output tokens on a key, $2 on the fallback, input free: an attempt is estimated
# at its max_tokens (a key $0.10, the fallback $0.20) and an answer costs its 50 tokens
KEY_PRICE = Price(input_per_mtok=0.0, output_per_mtok=1_000.0)
FB_PRICE = Price(input_per_mtok=0.0, output_per_mtok=2_000.0)
COSTS = {"none": None, "tight": 0.25, "ample": 100.0}
USAGE = (10, 50)


def fault(kind: str, name: str) -> Reply:
    return {
        "503": Reply.overloaded(latency=0.02),
        "500": Reply.server_error(latency=0.02),
        "429": Reply.rate_limit(latency=0.02),
        "429 ra": Reply.rate_limit(retry_after=0.5, latency=0.02),
        "hang": Reply.hang(),
        "reset": Reply.reset(latency=0.01),
        "ok": Reply.ok(f"answer from {name}", latency=0.1, usage=USAGE),
        "ok slow": Reply.ok(f"answer from {name}", latency=1.5, usage=USAGE),
    }[kind]


FAULTS = ("503", "500", "429", "429 ra", "hang", "reset", "ok", "ok slow")
VERDICTS = ("pass", "fail", "raise", "slow", "stuck")
QUICK = frozenset({"503", "500", "429", "429 ra", "reset", "ok"})  # replies within 0.1 s


@dataclass(frozen=True, slots=True)
class Case:
    k1: tuple[str, ...]  # the fault of each call on k1 (the last one repeats)
    k2: tuple[str, ...]
    fb: tuple[str, ...] | None  # None: the fallback answers every call within FB_LATENCY
    judge: tuple[str, ...]  # the gate's verdict on each answer it judges, in order (then "pass")
    fb_judged: bool  # the fallback's answers are judged by that schedule too (else passed at once)
    hedge_after: float | None
    canary: float | None  # the fallback's canary share (None: fully enabled)
    cap: float  # the keys' attempt cap (total timeout)
    attempts: int  # the keys' max_attempts
    limiter: bool  # k1 admits one call at a time (a queue under concurrent callers)
    budget: float
    max_attempts: int
    max_added_latency: float | None
    max_cost: str  # a key of COSTS
    floor: int  # the retry budget's floor
    callers: int
    stagger: float  # caller i starts at i * stagger


class KeyedNetwork(FakeNetwork):
    """One upstream host whose keys are answered by fake providers of their own: a request with
    key ``sk-<name>`` reaches provider ``<name>`` (as in test_budget_keys; plain calls only)."""

    def _to(self, request: HttpRequest) -> HttpRequest:
        name = request.headers.get("authorization", "").removeprefix("Bearer sk-")
        return dataclasses.replace(request, url=request.url.replace(f"//{UPSTREAM}/", f"//{name}.fake/"))

    async def send(self, request: HttpRequest, **kw: Any) -> HttpResponse:
        return await super().send(self._to(request), **kw)


class SlowLedger(Ledger):
    """A tool ledger on a slow store: every read answers after LEDGER_DELAY."""

    async def side_effects(
        self, task_id: str, mode: SideEffectMode | str, *, resumed_from: int | None = None
    ) -> SideEffectDecision:
        await asyncio.sleep(LEDGER_DELAY)
        return await super().side_effects(task_id, mode, resumed_from=resumed_from)


class CountingBudget(RetryBudget):
    """A RetryBudget that counts the deposits it was told of, per pool."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.deposits: Counter[str] = Counter()

    def record_request(self, now: float, pool: str = "default") -> None:
        self.deposits[pool] += 1
        super().record_request(now, pool)


class JudgeCrashed(Exception):
    """The judge's own exception: it must never reach the caller."""


class Judge:
    """A flaky quality gate: each answer it judges gets the next verdict of its schedule."""

    def __init__(self, schedule: tuple[str, ...], fb_judged: bool) -> None:
        self.schedule = iter(schedule)
        self.fb_judged = fb_judged

    async def __call__(self, request: Request, response: Response, /) -> GateVerdict:
        if "from fb" in response.text and not self.fb_judged:
            return GateVerdict(passed=True)
        verdict = next(self.schedule, "pass")
        if verdict == "raise":
            raise JudgeCrashed("judge crashed")
        if verdict == "slow":
            await asyncio.sleep(0.4)
        elif verdict == "stuck":
            await asyncio.sleep(1_000)
        return GateVerdict(passed=verdict != "fail", reason="the judge did not like it")


def script(kinds: tuple[str, ...], name: str) -> Script:
    replies = [fault(k, name) for k in kinds]
    return Script.of(*replies, default=replies[-1])


def key(p: FakeProvider, c: Case, limits: Limits | None = None) -> Target:
    return p.target(
        name=p.name,
        base_url=f"http://{UPSTREAM}/v1",
        api_key=Secret(f"sk-{p.name}"),
        credential=f"KEY_{p.name.upper()}",
        equivalence_key="m-a",
        timeouts=Timeouts(connect=c.cap, total=c.cap, min_useful=0.05),
        max_attempts=c.attempts,
        price=KEY_PRICE,
        limits=limits or Limits(),
        tokenizer="estimate",
    )


def prompt(i: int) -> str:
    return f"<caller {i}> what is the answer?"


@dataclass(slots=True)
class Ended:
    i: int
    env: Envelope
    t0: float
    t1: float
    out: object  # a Response, or what the call raised


def run(c: Case) -> list[str]:
    """Run the case on a fresh looptime loop: the rules it broke (empty: none)."""
    loop = looptime.new_event_loop(start=0.0, noop_cycles=0)
    try:
        return loop.run_until_complete(_scenario(c))
    finally:
        loop.close()


async def _scenario(c: Case) -> list[str]:
    k1 = FakeProvider("k1", "openai", script(c.k1, "k1"))
    k2 = FakeProvider("k2", "openai", script(c.k2, "k2"))
    fb_script = Script.always(Reply.ok("answer from fb", latency=FB_LATENCY, usage=USAGE))
    fb = FakeProvider("fb", "anthropic", script(c.fb, "fb") if c.fb is not None else fb_script)
    t_fb = fb.target(
        timeouts=Timeouts(connect=2.0, total=2.0, min_useful=0.05), max_attempts=2, price=FB_PRICE, tokenizer="estimate"
    )
    route = Route(
        name="r",
        primary=(key(k1, c, Limits(concurrency=1) if c.limiter else Limits()), key(k2, c)),
        fallbacks=(t_fb,),
        hedge_after=c.hedge_after,
        canary=(("fb", c.canary),) if c.canary is not None else (),
    )
    budget = CountingBudget(ratio=RATIO, floor=c.floor, window=1_000.0)  # no deposit leaves the window
    router = Router(
        [route],
        transport=KeyedNetwork(k1, k2, fb),
        retry_budget=budget,
        backoff=Backoff(base=0.1, cap=0.5),
        rng=random.Random(7),
        canary_rng=random.Random(11),
        breakers=BreakerBoard(),
        gates={"r": Judge(c.judge, c.fb_judged)},
        ledger=SlowLedger(MemoryStore()),
    )
    loop = asyncio.get_running_loop()

    async def one(i: int) -> Ended:
        await asyncio.sleep(i * c.stagger)
        env = Envelope(
            budget=c.budget,
            max_attempts=c.max_attempts,
            max_added_latency=c.max_added_latency,
            max_cost=COSTS[c.max_cost],
            task_id=f"task-{i}",
            side_effects=SideEffectMode.WRITE_POSSIBLE,
        )
        t0 = loop.time()
        out: object
        try:
            out = await router.complete("r", Request.simple(prompt(i), max_tokens=MAX_TOKENS), env)
        except Exception as exc:  # what the caller sees, whatever it is (rule 4 judges it)
            out = exc
        return Ended(i, env, t0, loop.time(), out)

    ended = await asyncio.gather(*(one(i) for i in range(c.callers)))
    await router.aclose()
    providers = {"k1": k1, "k2": k2, "fb": fb}
    return check(c, ended, providers, budget, pools={"up": (k1, k2), "fb": (fb,)}, route=route)


def _calls_of(p: FakeProvider, i: int) -> list[float]:
    """When ``p`` received the calls of caller ``i`` (matched on its prompt)."""
    mark = f"<caller {i}>"
    return [x.time for x in p.calls if x.json is not None and mark in json.dumps(x.json)]


def fallback_can_answer(c: Case) -> bool:
    """Rule 3's condition on the case."""
    return (
        c.fb is None
        and c.canary is None
        and not c.fb_judged
        and c.max_cost != "tight"
        and c.max_attempts >= c.attempts + 2  # k1's attempts, k2's first, fb's: hedged or not
        and c.max_added_latency is None
        and c.budget >= 3.0
        and c.cap <= 2.0
        # Unhedged, k2 (another key) goes after k1 with the whole time left when the reserve
        # leaves it too little, unless k1 timed out (its upstream is then expected to hang):
        # after a stuck judge on k1's answer, a hanging k2 (or a judge stuck on its answer too)
        # leaves fb nothing, by design.
        and (c.hedge_after is not None or (set(c.k2) <= QUICK and "stuck" not in c.judge))
    )


def check(
    c: Case,
    ended: list[Ended],
    providers: dict[str, FakeProvider],
    budget: CountingBudget,
    *,
    pools: dict[str, tuple[FakeProvider, ...]],
    route: Route,
) -> list[str]:
    bad: list[str] = []
    for e in ended:
        who = f"caller {e.i}"
        calls = {name: _calls_of(p, e.i) for name, p in providers.items()}
        times = sorted(t for ts in calls.values() for t in ts)
        n = len(times)
        # 4. every failure is an Unavailable or a PartialOutput
        rec: RouteRecord | None
        if isinstance(e.out, Response | Unavailable | PartialOutput):
            rec = e.out.record
        else:
            bad.append(f"[4] {who}: raised {type(e.out).__name__}: {e.out!r}")
            rec = None
        # 1. attempts within the envelope, counted at the providers
        if n > e.env.max_attempts:
            bad.append(f"[1] {who}: {n} calls reached the providers, max_attempts {e.env.max_attempts}: {calls}")
        mal = e.env.max_added_latency
        if mal is not None:
            late = [t - e.t0 for t in times[1:] if t - e.t0 > mal + LEDGER_DELAY + TICK]
            if late:
                story = (
                    [(a.target, a.outcome, round(a.start, 3), round(a.end, 3)) for a in rec.attempts] if rec else None
                )
                waits = [(w.target, w.reason, round(w.start, 3), round(w.end, 3)) for w in rec.waits] if rec else None
                bad.append(
                    f"[1] {who}: a call after the first started {late[0]:.3f}s in, max_added_latency {mal}: "
                    f"{story}; waits {waits}"
                )
        # 2. every call is in the record, with its cost
        if rec is None:
            if isinstance(e.out, Response):
                bad.append(f"[2] {who}: an answer without a record")
        else:
            attempts = Counter(a.target for a in rec.attempts)
            seen = Counter({name: len(ts) for name, ts in calls.items() if ts})
            if attempts != seen:
                story = [(a.target, a.outcome, round(a.start, 3), round(a.end, 3)) for a in rec.attempts]
                bad.append(f"[2] {who}: providers received {dict(seen)}, the record lists {dict(attempts)}: {story}")
            if any(a.cost < 0 for a in rec.attempts):
                bad.append(f"[2] {who}: a negative attempt cost: {[a.cost for a in rec.attempts]}")
            if not math.isclose(rec.total_cost, sum(a.cost for a in rec.attempts), rel_tol=1e-9, abs_tol=1e-12):
                bad.append(f"[2] {who}: total_cost {rec.total_cost} is not the sum of its attempts' costs")
        # 3. an answer when the fallback could give one
        if fallback_can_answer(c) and not isinstance(e.out, Response):
            story = (
                [(a.target, a.outcome, round(a.start, 3), round(a.end, 3)) for a in rec.attempts]
                if rec is not None
                else None
            )
            excluded = [(x.target, x.reason) for x in rec.excluded] if rec is not None else None
            bad.append(f"[3] {who}: no answer although fb could answer: {e.out!r}; {story}; {excluded}")
        # 5. the deadline
        if e.t1 - e.t0 > e.env.budget + TICK:
            bad.append(f"[5] {who}: ended {e.t1 - e.t0:.4f}s after it began, budget {e.env.budget}")
    # 1. the retry budget, per pool, over the whole run
    for name, ps in pools.items():
        pool = budget.pool_of(next(t for t in route.targets if t.name == ps[0].name))
        made = sum(len(p.calls) for p in ps)
        deposits = budget.deposits[pool]
        allowed = deposits + budget.floor + math.floor(budget.ratio * deposits)
        if made > allowed:
            bad.append(
                f"[1] pool {name}: {made} calls, more than its {deposits} first attempts + floor {budget.floor} + "
                f"{budget.ratio} x {deposits} allow"
            )
    return bad


# -- the property -------------------------------------------------------------------------------

faults = st.lists(st.sampled_from(FAULTS), min_size=1, max_size=5).map(tuple)
anything = {
    "k1": faults,
    "k2": faults,
    "fb": st.none() | faults,
    "judge": st.lists(st.sampled_from(VERDICTS), max_size=5).map(tuple),
    "fb_judged": st.booleans(),
    "hedge_after": st.sampled_from([None, 0.3]),
    "canary": st.sampled_from([None, 0.5]),
    "cap": st.sampled_from([0.5, 1.0, 2.0]),
    "attempts": st.integers(1, 3),
    "limiter": st.booleans(),
    "budget": st.sampled_from([1.5, 3.0, 6.0]),
    "max_attempts": st.integers(1, 5),
    "max_added_latency": st.sampled_from([None, 0.5, 2.0]),
    "max_cost": st.sampled_from(sorted(COSTS)),
    "floor": st.sampled_from([0, 2, 10]),
    "callers": st.integers(1, 4),
    "stagger": st.sampled_from([0.0, 0.05, 0.5]),
}
# half the cases meet rule 3's condition on the envelope and the fallback (see fallback_can_answer)
rescuable = {
    **anything,
    "fb": st.none(),
    "fb_judged": st.just(False),
    "budget": st.sampled_from([3.0, 6.0]),
    "max_attempts": st.integers(3, 6),
    "max_added_latency": st.none(),
    "max_cost": st.sampled_from(["none", "ample"]),
    "canary": st.none(),
}
cases = st.builds(Case, **anything) | st.builds(Case, **rescuable)

CALM = Case(
    k1=("ok",),
    k2=("ok",),
    fb=None,
    judge=(),
    fb_judged=False,
    hedge_after=None,
    canary=None,
    cap=2.0,
    attempts=2,
    limiter=False,
    budget=6.0,
    max_attempts=5,
    max_added_latency=None,
    max_cost="none",
    floor=10,
    callers=1,
    stagger=0.0,
)


def case(**kw: Any) -> Case:
    return dataclasses.replace(CALM, **kw)


# known corners (the ones that fail on ca397ef name the rule they broke there, see the report)
HANGING_KEYS = case(k1=("hang",), k2=("hang",), budget=3.0)  # both keys silent
HEDGE_WINS = case(k1=("ok slow",), k2=("ok",), hedge_after=0.3)  # the lead is cancelled: still recorded
JUDGE_CRASHES = case(judge=("raise", "stuck"), fb_judged=True, fb=("ok",), budget=3.0)
TIGHT = case(k1=("hang",), budget=1.5, cap=1.0, max_cost="tight", canary=0.5, callers=3)
# rule 2: caller 1's lead times out, its canary draw refuses fb, so the lead stops (max_attempts
# spent) and cancels the hedge still running: the record leaves the hedge's call out
LEAD_STOP_DROPS_HEDGE = case(
    k1=("ok slow",),
    k2=("ok slow",),
    hedge_after=0.3,
    canary=0.5,
    cap=0.5,
    attempts=2,
    budget=3.0,
    max_attempts=2,
    max_cost="ample",
    floor=2,
    callers=2,
)
# rule 2: the hedge's stop (max_attempts spent) ends the request, the lead's call left out
HEDGE_STOP_DROPS_LEAD = case(
    k1=("hang",), k2=("503",), hedge_after=0.3, cap=0.5, attempts=2, budget=1.5, max_attempts=2, max_cost="ample"
)
# rule 3: with hedging, the lead's replays leave one attempt for fb, which k2 then spends
HEDGED_LEAD_SPENDS_FBS_ATTEMPT = case(
    k1=("503",), k2=("503",), hedge_after=0.3, cap=0.5, attempts=2, budget=3.0, max_attempts=3, floor=2
)
# rule 3: the lead's replay, paid before its 0.5 s Retry-After wait, and the hedge take the
# envelope's attempts: the hedge's 500 then ends the request after two calls, fb never tried
HEDGE_AND_WAITING_LEAD_SPEND_FBS_ATTEMPT = case(
    k1=("429 ra",), k2=("500",), hedge_after=0.3, cap=0.5, attempts=2, budget=3.0, max_attempts=3
)
# rule 1: concurrent failovers behind the slow ledger withdraw more than the pool's floor
OVERDRAW = case(
    k1=("503",), k2=("503",), cap=0.5, attempts=1, budget=1.5, max_attempts=2, max_cost="ample", floor=2, callers=3
)
# rule 1: each lost hedge (cancelled after its call was sent) gets its retry-budget withdrawal
# refunded, as if it had never been made: the pool's budget lets more hedges through
LOST_HEDGE_REFUNDED = case(k1=("ok slow",), k2=("hang",), hedge_after=0.3, floor=2, callers=4, stagger=0.5)
# rule 1: a replay queued by k1's limiter (its 429 block) starts after max_added_latency
QUEUED_REPLAY = case(
    k1=("429",),
    k2=("503",),
    cap=0.5,
    attempts=2,
    limiter=True,
    budget=3.0,
    max_attempts=3,
    max_added_latency=0.5,
    max_cost="ample",
    floor=2,
)


@settings(max_examples=int(os.environ.get("FAILOVER_PROPERTY_EXAMPLES", "300")), deadline=None)
@example(c=HANGING_KEYS)
@example(c=HEDGE_WINS)
@example(c=JUDGE_CRASHES)
@example(c=TIGHT)
@example(c=LEAD_STOP_DROPS_HEDGE)
@example(c=HEDGE_STOP_DROPS_LEAD)
@example(c=HEDGED_LEAD_SPENDS_FBS_ATTEMPT)
@example(c=HEDGE_AND_WAITING_LEAD_SPEND_FBS_ATTEMPT)
@example(c=OVERDRAW)
@example(c=LOST_HEDGE_REFUNDED)
@example(c=QUEUED_REPLAY)
@given(c=cases)
def test_random_fault_schedules_keep_every_rule_of_the_whole_router(c: Case) -> None:
    broken = run(c)
    assert not broken, "\n".join(broken)


# -- each rule broken on purpose: the checker notices -------------------------------------------


@contextmanager
def patched(obj: object, name: str, value: object) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def rules(broken: list[str]) -> set[str]:
    return {b[1] for b in broken}


def test_the_checker_passes_a_calm_case() -> None:
    assert run(CALM) == []
    assert run(HANGING_KEYS) == []


def test_an_engine_that_ignores_max_attempts_breaks_rule_1() -> None:
    real = _engine.decide

    def decide(
        s: _engine.RunState, lane: _engine.Lane, p: _engine.Policies, now: float, rng: random.Random
    ) -> _engine.Decision:
        env = s.envelope
        s.envelope = dataclasses.replace(env, max_attempts=100)
        try:
            return real(s, lane, p, now, rng)
        finally:
            s.envelope = env

    c = case(k1=("503",), k2=("503",), fb=("503",), attempts=3, max_attempts=2)
    assert run(c) == []
    with patched(_run, "decide", decide):
        assert "1" in rules(run(c))


def test_an_engine_that_ignores_the_retry_budget_breaks_rule_1() -> None:
    from failover.router._router import _Policies

    c = case(k1=("503",), k2=("503",), fb=("503",), attempts=3, floor=0, callers=3)
    assert run(c) == []
    # the engine sees room, and the loop's withdrawal (checked since the token is taken with
    # the decision) is always granted: nothing bounds the extra attempts any more
    with (
        patched(_Policies, "budget_left", lambda self, pool, now: 1 << 30),
        patched(RetryBudget, "try_withdraw", lambda self, now, pool="": True),
    ):
        assert "1" in rules(run(c))


def test_a_loop_that_drops_a_cancelled_hedge_breaks_rule_2() -> None:
    assert run(HEDGE_WINS) == []
    with patched(_attempt.Attempts, "record_cancelled", lambda self, *a, **kw: None):
        assert "2" in rules(run(HEDGE_WINS))


def test_a_router_that_keeps_nothing_for_the_fallback_breaks_rule_3() -> None:
    # the engine forgets the next tier: k2's replays take the attempt kept for fb
    c = case(k1=("503",), k2=("503",), attempts=3, max_attempts=5)
    assert run(c) == []
    with patched(_engine, "next_eligible", lambda *a: None):
        assert "3" in rules(run(c))


def test_a_gate_whose_exception_leaks_breaks_rule_4() -> None:
    async def check(
        self: _generate.Generation, request: Request, outcome: Response | Any, until: float = math.inf
    ) -> tuple[Any, bool | None, bool | None]:
        gate = self.call.router.gates[self.call.route.name]
        if isinstance(outcome, Response):
            await gate(request, outcome)  # no except: the judge's exception goes up
        return outcome, None, None

    c = case(judge=("raise",))
    assert run(c) == []
    with patched(_generate.Generation, "check", check):
        broken = run(c)
    assert "4" in rules(broken) and any("JudgeCrashed" in b for b in broken)


def test_an_attempt_the_deadline_does_not_cut_breaks_rule_5() -> None:
    real: Callable[..., Any] = _generate.plain_exchange

    async def uncut(router: Any, target: Target, request: Request, total: float, connect: float) -> Any:
        return await real(router, target, request, 3_600.0, 3_600.0)

    c = case(k1=("ok slow",), budget=1.5)  # answers 1.5 s after the ledger's first read
    assert run(c) == []
    with patched(_generate, "plain_exchange", uncut):
        assert "5" in rules(run(c))
