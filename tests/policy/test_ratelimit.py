"""Client-side rate limiting on virtual loop time: bucket math, waits, deadlines, fairness."""

from __future__ import annotations

import asyncio
import bisect
import heapq
import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import Dialect, Limits, RateLimitInfo, Target
from failover.policy.limits._limiter import (
    LimiterBoard,
    LimitWaitTooLong,
    Reservation,
    TargetLimiter,
    TokenBucket,
    WindowBucket,
    combined_tpm,
)

pytestmark = pytest.mark.looptime


def now() -> float:
    return asyncio.get_running_loop().time()


def max_in_window(events: Sequence[tuple[float, float]], window: float = 60.0) -> float:
    """The largest total of ``(time, amount)`` events inside any half-open window [t, t + window)."""
    events = sorted(events)
    times = [t for t, _ in events]
    prefix = [0.0]
    for _, amount in events:
        prefix.append(prefix[-1] + amount)
    best = 0.0
    for i, t in enumerate(times):
        j = bisect.bisect_left(times, t + window)
        best = max(best, prefix[j] - prefix[i])
    return best


# -- bucket math ------------------------------------------------------------------------------


def test_token_bucket_refills_continuously_up_to_capacity() -> None:
    b = TokenBucket(10, 2.0)
    assert b.reserve(10, 0.0)
    assert not b.reserve(1, 0.0)  # nothing taken when it does not fit
    assert b.level(0.0) == 0.0
    assert b.time_until(4, 0.0) == pytest.approx(2.0)
    assert b.level(1.0) == pytest.approx(2.0)
    assert b.level(100.0) == 10.0
    assert math.isinf(b.time_until(11, 100.0))


def test_token_bucket_debt_delays_later_requests_and_refunds_are_capped() -> None:
    b = TokenBucket(10, 1.0)
    assert b.reserve(5, 0.0)
    b.charge(8, 0.0)  # the request used 8 more than it reserved
    assert b.level(0.0) == pytest.approx(-3.0)
    assert b.time_until(2, 0.0) == pytest.approx(5.0)
    b.refund(100, 0.0)
    assert b.level(0.0) == 10.0


def test_token_bucket_follows_headers_downwards_only() -> None:
    b = TokenBucket(100, 10.0)
    assert not b.sync(500, None, 0.0)  # more than we think: never raised
    assert b.sync(40, None, 0.0)
    assert b.level(0.0) == pytest.approx(40.0)
    # "full again in 8 s": at our 10/s refill that leaves at most 100 - 80 now
    assert b.sync(90, 8.0, 0.0)
    assert b.level(0.0) == pytest.approx(20.0)
    assert not b.sync(0, 0.0, 0.0)  # an already-passed reset says nothing


def test_token_bucket_drain_until_blocks_then_refills_from_empty() -> None:
    b = TokenBucket(10, 1.0)
    b.drain_until(5.0, now=0.0)
    assert b.time_until(1, 0.0) == pytest.approx(6.0)
    assert b.level(5.0) == 0.0  # nothing accrued while blocked
    assert b.level(7.0) == pytest.approx(2.0)


def test_window_bucket_gives_tokens_back_one_window_later() -> None:
    b = WindowBucket(10, window=60.0)
    assert b.reserve(6, 0.0)
    assert b.reserve(4, 10.0)
    assert b.time_until(1, 20.0) == pytest.approx(40.0)  # the 6 from t=0 come back at 60
    assert b.time_until(8, 20.0) == pytest.approx(50.0)  # 8 needs the 4 from t=10 too
    assert b.level(60.0) == pytest.approx(6.0)
    assert b.level(70.0) == 10.0


def test_window_bucket_refund_debt_sync_and_drain() -> None:
    b = WindowBucket(100, window=60.0)
    assert b.reserve(80, 0.0)
    b.refund(50, 5.0, taken_at=0.0)  # settled: only 30 were used
    assert b.level(5.0) == pytest.approx(70.0)
    b.charge(90, 10.0)  # debt, given back at 70
    assert b.level(10.0) == pytest.approx(-20.0)
    assert b.time_until(10, 10.0) == pytest.approx(50.0)  # the 30 of t=0 expire at 60: level 10
    b.refund(5, 10.0, taken_at=-100.0)  # long expired: nothing to give back
    assert b.level(10.0) == pytest.approx(-20.0)

    c = WindowBucket(100, window=60.0)
    assert c.sync(25, 12.0, 0.0)  # the provider says only 25 remain until t=12
    assert c.level(0.0) == pytest.approx(25.0)
    assert c.level(12.0) == 100.0
    assert not c.sync(500, 12.0, 0.0)
    c.drain_until(3.0, 0.0)
    assert c.time_until(1, 0.0) == pytest.approx(3.0)


@settings(max_examples=30, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.floats(0, 30), st.floats(0.5, 40), st.sampled_from(["reserve", "refund", "sync"])),
        min_size=1,
        max_size=60,
    )
)
def test_window_bucket_never_exceeds_capacity_in_any_window(ops: list[tuple[float, float, str]]) -> None:
    b = WindowBucket(50, window=60.0)
    t = 0.0
    booked: list[list[float]] = []  # [time, amount] of what was taken and kept
    for dt, amount, op in ops:
        t += dt
        if op == "reserve":
            if b.reserve(amount, t):
                booked.append([t, amount])
        elif op == "refund" and booked:
            entry = booked[-1]
            back = min(amount, entry[1])
            b.refund(back, t, taken_at=entry[0])
            if entry[0] + 60.0 > t:  # refunds of expired tokens give nothing back
                entry[1] -= back
        elif op == "sync":
            b.sync(amount, 5.0, t)
    assert max_in_window([(x, a) for x, a in booked]) <= 50 + 1e-6


@settings(max_examples=30, deadline=None)
@given(gaps=st.lists(st.floats(0, 5), min_size=1, max_size=80), sizes=st.lists(st.floats(0.5, 20), min_size=80))
def test_token_bucket_never_grants_more_than_capacity_plus_refill(gaps: list[float], sizes: list[float]) -> None:
    b = TokenBucket(50, 1.0)
    t, granted = 0.0, []
    for gap, size in zip(gaps, sizes, strict=False):
        t += gap
        if b.reserve(size, t):
            granted.append((t, size))
    for i, (start, _) in enumerate(granted):
        total = sum(a for x, a in granted[i:] if x <= start + 30.0)
        assert total <= 50 + 30.0 + 1e-6


# -- waiting, deadlines, skipping --------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["window", "bucket"])
async def test_acquire_waits_exactly_the_computed_time(algorithm: str) -> None:
    lim = TargetLimiter(Limits(rpm=60), algorithm=algorithm)  # type: ignore[arg-type]
    for _ in range(54):  # 60 x 0.9
        (await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf)).settle(1, 1)
    assert now() == 0.0
    bucket = lim.bucket("rpm")
    assert bucket is not None
    expected = bucket.time_until(1, now())
    assert expected == pytest.approx(60.0 if algorithm == "window" else 60.0 / 54)
    res = await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf)
    assert now() == pytest.approx(expected)
    assert res.waited == pytest.approx(expected)


async def test_a_wait_that_does_not_fit_raises_at_once_and_reserves_nothing() -> None:
    lim = TargetLimiter(Limits(rpm=10, input_tpm=10_000))
    for _ in range(9):
        await lim.acquire(input_tokens=100, max_output_tokens=0, deadline_at=now() + 5)
    before = lim.snapshot()
    with pytest.raises(LimitWaitTooLong) as info:
        await lim.acquire(input_tokens=100, max_output_tokens=0, deadline_at=now() + 5)
    assert now() == 0.0  # no waiting at all
    err = info.value
    assert (err.dimension, err.wait_seconds, err.left, err.too_large) == ("rpm", 60.0, 5.0, False)
    assert str(err) == "rate limit rpm: wait 60.0s exceeds 5.0s left"
    after = lim.snapshot()
    assert after.buckets == before.buckets and after.queued == 0 and after.rejected == 1


async def test_a_request_larger_than_the_whole_bucket_is_refused_with_its_reason() -> None:
    lim = TargetLimiter(Limits(input_tpm=400_000))
    with pytest.raises(LimitWaitTooLong) as info:
        await lim.acquire(input_tokens=500_000, max_output_tokens=0, deadline_at=math.inf)
    assert info.value.too_large and info.value.dimension == "input_tpm"
    assert str(info.value) == (
        "rate limit input_tpm: needs 500,000 tokens, more than the whole bucket (360,000 = 400,000 x 0.9)"
    )


def reference_rpm(deadlines: Sequence[float], capacity: int, window: float = 60.0) -> list[float | None]:
    """Greedy FIFO against a sliding window of ``capacity`` requests: grant time or None."""
    free: list[float] = [0.0] * capacity  # when each of the capacity's slots is free again
    out: list[float | None] = []
    for deadline in deadlines:
        at = free[0]
        if at >= deadline:
            out.append(None)
            continue
        heapq.heapreplace(free, at + window)
        out.append(at)
    return out


async def test_a_burst_of_1000_stays_under_rpm_and_completes_what_its_deadline_allows() -> None:
    lim = TargetLimiter(Limits(rpm=600))
    rng = random.Random(11)
    deadlines = [rng.choice([30.0, 90.0, 120.0, 150.0]) for _ in range(1000)]
    granted: dict[int, float] = {}
    rejected: dict[int, float] = {}
    in_flight = peak = 0

    async def one(i: int) -> None:
        nonlocal in_flight, peak
        try:
            res = await lim.acquire(input_tokens=1_000, max_output_tokens=200, deadline_at=deadlines[i])
        except LimitWaitTooLong:
            rejected[i] = now()
            return
        granted[i] = now()
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(rng.uniform(0.5, 8.0))  # the provider's latency
        in_flight -= 1
        res.settle(1_000, 150)

    await asyncio.gather(*(one(i) for i in range(1000)))
    assert len(granted) + len(rejected) == 1000
    # the fake provider's view: at most 600 x 0.9 requests in any rolling minute
    assert max_in_window([(t, 1.0) for t in granted.values()]) <= 540
    # exactly the requests a perfect FIFO scheduler could serve in time were served, when it would
    reference = reference_rpm(deadlines, 540)
    assert sorted(granted) == [i for i, at in enumerate(reference) if at is not None]
    assert all(granted[i] == pytest.approx(at) for i, at in enumerate(reference) if at is not None)
    # the rest were told at once, without waiting
    assert rejected and set(rejected.values()) == {0.0}
    assert lim.snapshot().in_flight == 0 and peak <= 540


async def test_a_burst_with_enough_time_completes_every_request() -> None:
    lim = TargetLimiter(Limits(rpm=600))
    times: list[float] = []

    async def one() -> None:
        res = await lim.acquire(input_tokens=10, max_output_tokens=10, deadline_at=120.0)
        times.append(now())
        await asyncio.sleep(1.0)
        res.settle(10, 10)

    await asyncio.gather(*(one() for _ in range(1000)))
    assert len(times) == 1000
    assert max_in_window([(t, 1.0) for t in times]) <= 540
    assert sorted(set(times)) == [0.0, 60.0]


async def test_the_bucket_algorithm_suits_a_token_bucket_provider_only() -> None:
    lim = TargetLimiter(Limits(rpm=600), algorithm="bucket")
    times: list[float] = []

    async def one() -> None:
        res = await lim.acquire(input_tokens=10, max_output_tokens=10, deadline_at=120.0)
        times.append(now())
        res.settle(10, 10)

    await asyncio.gather(*(one() for _ in range(1000)))
    assert len(times) == 1000 and max(times) < 52.0  # smoother and sooner than the window ...
    # ... and never more than a provider's token bucket of 600 refilling at 10/s allows,
    level, last = 600.0, 0.0
    for t in sorted(times):
        level = min(600.0, level + (t - last) * 10.0) - 1.0
        last = t
        assert level >= -1e-6
    # ... but a provider counting per rolling minute would see more than 540 in one.
    assert max_in_window([(t, 1.0) for t in times]) > 540


async def test_tpm_with_varied_sizes_stays_under_both_token_limits() -> None:
    lim = TargetLimiter(Limits(rpm=10_000, input_tpm=100_000, output_tpm=20_000))
    rng = random.Random(5)
    inputs: list[tuple[float, float]] = []  # what the provider counts, and when
    outputs: list[tuple[float, float]] = []
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        await asyncio.sleep(rng.uniform(0, 30))  # arrivals spread over half a minute
        n_in, max_out = rng.randint(500, 8_000), rng.randint(100, 1_000)
        res = await lim.acquire(input_tokens=n_in, max_output_tokens=max_out, deadline_at=3_600.0)
        inputs.append((now(), n_in))  # input is counted when the request arrives
        await asyncio.sleep(rng.uniform(1, 10))
        out = rng.randint(max_out // 4, max_out)
        outputs.append((now(), out))  # output is counted as it is generated
        res.settle(n_in, out)
        done += 1

    await asyncio.gather(*(one(i) for i in range(150)))
    assert done == 150
    assert max_in_window(inputs) <= 90_000 + 1e-6
    assert max_in_window(outputs) <= 18_000 + 1e-6
    assert lim.snapshot().in_flight == 0


async def test_reconciliation_refunds_unused_max_tokens_so_more_requests_fit() -> None:
    async def run(actual_output: int) -> int:
        lim = TargetLimiter(Limits(output_tpm=10_000))
        granted = 0

        async def one(i: int) -> None:
            nonlocal granted
            await asyncio.sleep(i * 0.5)
            try:
                res = await lim.acquire(input_tokens=100, max_output_tokens=1_000, deadline_at=now() + 5)
            except LimitWaitTooLong:
                return
            granted += 1
            await asyncio.sleep(1.0)
            res.settle(100, actual_output)

        await asyncio.gather(*(one(i) for i in range(120)))  # one request every 0.5 s for a minute
        return granted

    without = await run(1_000)
    with_refunds = await run(100)
    assert without <= 18  # 9 of 1,000 fit in 9,000 tokens per rolling minute; the run spans ~65 s
    assert with_refunds >= 4 * without


async def test_debt_from_an_under_count_delays_the_next_request() -> None:
    lim = TargetLimiter(Limits(input_tpm=1_000), algorithm="bucket")  # 900 capacity, 15/s refill
    res = await lim.acquire(input_tokens=300, max_output_tokens=0, deadline_at=math.inf)
    res.settle(1_200, 0)  # the count was 900 short: level 900 - 1,200 = -300
    await lim.acquire(input_tokens=150, max_output_tokens=0, deadline_at=math.inf)
    assert now() == pytest.approx(450 / 15)


async def test_concurrency_limit_is_never_exceeded() -> None:
    lim = TargetLimiter(Limits(concurrency=5))
    in_flight = peak = 0

    async def one() -> None:
        nonlocal in_flight, peak
        res = await lim.acquire(input_tokens=10, max_output_tokens=10, deadline_at=math.inf)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(1.0)
        in_flight -= 1
        res.settle(10, 5)

    await asyncio.gather(*(one() for _ in range(50)))
    assert peak == 5
    assert now() == pytest.approx(10.0)
    assert lim.snapshot().in_flight == 0


async def test_waiting_for_a_slot_ends_at_the_deadline() -> None:
    lim = TargetLimiter(Limits(concurrency=1))
    held = await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf)
    with pytest.raises(LimitWaitTooLong) as info:
        await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=now() + 3)
    assert now() == pytest.approx(3.0)
    assert info.value.dimension == "concurrency"
    assert "no slot free before the deadline" in str(info.value)
    held.settle(1, 1)
    assert lim.snapshot().in_flight == 0 and lim.snapshot().queued == 0


# -- fairness ----------------------------------------------------------------------------------


async def test_a_tenant_sending_10x_more_does_not_take_the_others_share() -> None:
    lim = TargetLimiter(Limits(rpm=60))  # 54 per rolling minute
    lim.penalize(1.0)  # capacity is short from the start: everything queues
    grants: list[tuple[float, str]] = []

    async def one(tenant: str) -> None:
        res = await lim.acquire(input_tokens=10, max_output_tokens=10, deadline_at=math.inf, tenant=tenant)
        grants.append((now(), tenant))
        res.settle(10, 10)

    tasks = [one("a") for _ in range(500)] + [one("b") for _ in range(50)]
    random.Random(3).shuffle(tasks)
    await asyncio.gather(*tasks)
    first = [t for at, t in grants if at == 1.0]
    second = [t for at, t in grants if at == 61.0]
    assert len(first) == len(second) == 54
    assert first.count("b") == 27  # exactly half while both wait
    assert second.count("b") == 23  # everything else it asked for
    later = [t for at, t in grants if at > 61.0]
    assert later and set(later) == {"a"}  # and a is not starved once b is idle
    assert [at for at, _ in grants].count(121.0) == 54


async def test_a_late_tenant_is_served_ahead_of_a_long_queue() -> None:
    lim = TargetLimiter(Limits(rpm=60))
    grants: list[tuple[float, str]] = []

    async def one(tenant: str, delay: float = 0.0) -> None:
        await asyncio.sleep(delay)
        res = await lim.acquire(input_tokens=10, max_output_tokens=10, deadline_at=math.inf, tenant=tenant)
        grants.append((now(), tenant))
        res.settle(10, 10)

    await asyncio.gather(*[one("a") for _ in range(300)], *[one("b", 10.0) for _ in range(20)])
    b_times = [at for at, t in grants if t == "b"]
    assert b_times == [60.0] * 20  # the next window, not after a's 246 queued requests
    assert [t for at, t in grants if at == 60.0].count("a") == 34


async def test_queued_requests_that_a_new_tenant_pushes_past_their_deadline_are_told_at_once() -> None:
    lim = TargetLimiter(Limits(rpm=60))
    for _ in range(54):
        (await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf, tenant="a")).settle(1, 1)
    outcome: dict[str, list[float]] = {"a_ok": [], "a_no": [], "b_ok": []}

    async def one(tenant: str, deadline: float) -> None:
        try:
            res = await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=deadline, tenant=tenant)
        except LimitWaitTooLong:
            outcome[f"{tenant}_no"].append(now())
            return
        outcome[f"{tenant}_ok"].append(now())
        res.settle(1, 1)

    async def later() -> None:
        await asyncio.sleep(1.0)
        await asyncio.gather(*(one("b", math.inf) for _ in range(10)))

    await asyncio.gather(*(one("a", 61.0) for _ in range(54)), later())
    assert outcome["b_ok"] == [60.0] * 10  # b's turns come first
    assert outcome["a_ok"] == [60.0] * 44
    assert outcome["a_no"] == [1.0] * 10  # told when b arrived, not at their deadline


async def test_fair_share_under_sustained_overload() -> None:
    lim = TargetLimiter(Limits(rpm=60), algorithm="bucket")  # 54 burst, then 0.9 per second
    sent = {"a": 0, "b": 0}
    got = {"a": 0, "b": 0}

    async def one(tenant: str, at: float) -> None:
        await asyncio.sleep(at)
        sent[tenant] += 1
        try:
            res = await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=now() + 20, tenant=tenant)
        except LimitWaitTooLong:
            return
        if now() > 60.0:  # after the initial burst, capacity is short
            got[tenant] += 1
        res.settle(1, 1)

    a = [one("a", i * 0.5) for i in range(360)]  # 2 per second for 180 s: more than the capacity
    b = [one("b", i * 5.0) for i in range(36)]  # ten times less: under half the capacity
    await asyncio.gather(*a, *b)
    assert got["b"] >= 24  # every request b sent after the first minute
    assert got["a"] >= 0.9 * 120 - got["b"] - 2  # a takes the rest of the capacity


# -- cancellation ------------------------------------------------------------------------------


async def test_cancelling_waiters_leaves_no_leak() -> None:
    lim = TargetLimiter(Limits(rpm=60, concurrency=2))
    lim.penalize(10.0)
    tasks = [
        asyncio.create_task(lim.acquire(input_tokens=5, max_output_tokens=5, deadline_at=math.inf)) for _ in range(5)
    ]
    await asyncio.sleep(1.0)
    assert lim.snapshot().queued == 5
    tasks[0].cancel()  # the head
    tasks[2].cancel()  # one in the middle
    await asyncio.sleep(0)
    assert lim.snapshot().queued == 3
    await asyncio.sleep(9.0)
    granted = [t.result() for t in (tasks[1], tasks[3]) if t.done()]
    assert len(granted) == 2 and not tasks[4].done()  # two slots
    for res in granted:
        res.settle(5, 5)
    late = await tasks[4]
    assert now() == pytest.approx(10.0)
    late.release(sent=True)
    snap = lim.snapshot()
    assert (snap.in_flight, snap.queued) == (0, 0)
    rpm = snap.buckets[0]
    assert rpm.capacity - rpm.level == pytest.approx(3.0)  # only the three sent requests count
    res = await lim.acquire(input_tokens=5, max_output_tokens=5, deadline_at=math.inf)
    assert res.waited == 0.0
    res.release(sent=False)


async def test_a_grant_racing_a_cancellation_is_given_back() -> None:
    lim = TargetLimiter(Limits(rpm=100, concurrency=1))
    held = await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf)
    waiter = asyncio.create_task(lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf))
    await asyncio.sleep(0)
    held.settle(1, 1)  # grants the waiter's future synchronously ...
    waiter.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    snap = lim.snapshot()
    assert (snap.in_flight, snap.queued) == (0, 0)
    assert snap.buckets[0].capacity - snap.buckets[0].level == pytest.approx(1.0)


# -- reconciliation, headers, 429s -------------------------------------------------------------


async def test_settle_and_release_happen_once() -> None:
    lim = TargetLimiter(Limits(rpm=10, input_tpm=10_000, output_tpm=5_000))
    res = await lim.acquire(input_tokens=1_000, max_output_tokens=2_000, deadline_at=math.inf)
    assert res.amounts == {"rpm": 1.0, "input_tpm": 1_000.0, "output_tpm": 2_000.0}
    res.settle(900, 300)
    assert res.done
    with pytest.raises(RuntimeError, match="already settled"):
        res.settle(900, 300)
    with pytest.raises(RuntimeError, match="already settled"):
        res.release(sent=True)
    levels = {b.dimension: b.capacity - b.level for b in lim.snapshot().buckets}
    assert levels == pytest.approx({"rpm": 1.0, "input_tpm": 900.0, "output_tpm": 300.0})


async def test_release_keeps_the_request_counted_only_when_it_was_sent() -> None:
    lim = TargetLimiter(Limits(rpm=10, input_tpm=10_000))
    (await lim.acquire(input_tokens=1_000, max_output_tokens=0, deadline_at=math.inf)).release(sent=True)
    (await lim.acquire(input_tokens=1_000, max_output_tokens=0, deadline_at=math.inf)).release(sent=False)
    used = {b.dimension: b.capacity - b.level for b in lim.snapshot().buckets}
    assert used == pytest.approx({"rpm": 1.0, "input_tpm": 0.0})


async def test_combined_tpm_counts_output_in_the_input_bucket() -> None:
    openai = Target(name="o", dialect=Dialect.OPENAI, model="gpt-4o", base_url="https://x/v1")
    anthropic = Target(name="c", dialect=Dialect.ANTHROPIC, model="claude", base_url="https://y")
    assert combined_tpm(openai) and not combined_tpm(anthropic)
    responses = Target(name="r", dialect=Dialect.OPENAI_RESPONSES, model="gpt-5", base_url="https://x/v1")
    assert combined_tpm(responses)  # the same quota, whichever OpenAI API spends it
    lim = TargetLimiter(Limits(input_tpm=10_000), combined_tpm=True)
    res = await lim.acquire(input_tokens=1_000, max_output_tokens=2_000, deadline_at=math.inf)
    assert res.amounts == {"input_tpm": 3_000.0}
    res.settle(1_000, 500)
    (bucket,) = lim.snapshot().buckets
    assert bucket.capacity - bucket.level == pytest.approx(1_500.0)


async def test_headers_lower_the_buckets_and_count_what_the_provider_has_not_seen() -> None:
    lim = TargetLimiter(Limits(rpm=100, input_tpm=100_000))
    first = await lim.acquire(input_tokens=1_000, max_output_tokens=0, deadline_at=math.inf)
    for _ in range(4):  # sent after `first`: not yet in the provider's count
        await lim.acquire(input_tokens=1_000, max_output_tokens=0, deadline_at=math.inf)
    # Another client shares the key: the provider says far less remains than we think.
    info = RateLimitInfo(
        limit_requests=100,
        remaining_requests=40,
        reset_requests=30.0,
        limit_tokens=100_000,
        remaining_tokens=50_000,
        reset_tokens=30.0,
    )
    first.settle(1_000, 0)
    lim.observe(info, reservation=first)
    levels = {b.dimension: b.level for b in lim.snapshot().buckets}
    # 40 remaining - 10 headroom - 4 unseen; 50,000 - 10,000 - 4,000
    assert levels == pytest.approx({"rpm": 26.0, "input_tpm": 36_000.0})
    # the headers never raise a bucket
    lim.observe(RateLimitInfo(remaining_requests=100, reset_requests=1.0))
    assert lim.snapshot().buckets[0].level == pytest.approx(26.0)
    assert lim.snapshot().buckets[0].provider_limit == 100


async def test_a_429_blocks_the_buckets_and_rejects_waiters_that_no_longer_fit() -> None:
    lim = TargetLimiter(Limits(rpm=100))
    near = asyncio.create_task(lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf))
    lim.penalize(5.0)  # the task has not run yet: it will queue behind the block
    await asyncio.sleep(0)
    short = asyncio.create_task(lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=now() + 8))
    await asyncio.sleep(1.0)
    assert lim.snapshot().queued == 2
    lim.penalize(30.0)  # a second 429 with a longer Retry-After
    await asyncio.sleep(0)
    assert short.done() and now() == 1.0  # told at once, not at its deadline
    with pytest.raises(LimitWaitTooLong) as info:
        short.result()
    assert info.value.dimension == "retry_after" and info.value.wait_seconds == pytest.approx(30.0)
    res = await near
    assert now() == pytest.approx(31.0)
    res.settle(1, 1)


async def test_a_penalty_without_retry_after_and_without_buckets() -> None:
    lim = TargetLimiter(Limits(concurrency=3))
    lim.penalize(None)  # one second by default
    with pytest.raises(LimitWaitTooLong) as info:
        await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=0.5)
    assert info.value.dimension == "retry_after"
    res = await lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=5.0)
    assert now() == pytest.approx(1.0)
    res.settle(1, 1)


# -- the board and snapshots -------------------------------------------------------------------


async def test_board_has_one_limiter_per_quota() -> None:
    board = LimiterBoard()
    plain = Target(name="p", dialect=Dialect.ANTHROPIC, model="m", base_url="https://a")
    limited = Target(name="l", dialect=Dialect.OPENAI, model="m", base_url="https://b", limits=Limits(input_tpm=1_000))
    twin = Target(name="l2", dialect=Dialect.OPENAI, model="m", base_url="https://b", limits=Limits(input_tpm=1_000))
    assert board.limiter_for(plain) is None
    lim = board.limiter_for(limited)
    assert lim is not None and lim is board.limiter_for(twin) and lim.combined_tpm
    res = await lim.acquire(input_tokens=10, max_output_tokens=10, deadline_at=math.inf, tenant="t1")
    snaps = board.snapshot()
    assert list(snaps) == [limited.scope]
    snap = snaps[limited.scope]
    assert (snap.name, snap.in_flight, snap.granted, snap.concurrency) == ("l", 1, 1, None)
    assert snap.buckets[0].level == pytest.approx(900 - 20)
    res.settle(10, 10)


async def test_snapshot_counts_waiting_per_tenant() -> None:
    lim = TargetLimiter(Limits(rpm=10))
    lim.penalize(2.0)
    tasks = [
        asyncio.create_task(lim.acquire(input_tokens=1, max_output_tokens=1, deadline_at=math.inf, tenant=t))
        for t in ("a", "a", "b", None)
    ]
    await asyncio.sleep(0)
    snap = lim.snapshot()
    assert dict(snap.waiting) == {"a": 2, "b": 1, "": 1}
    assert snap.buckets[0].blocked_for == pytest.approx(2.0)
    reservations: list[Reservation] = await asyncio.gather(*tasks)
    for r in reservations:
        r.settle(1, 1)
    assert lim.snapshot().queued == 0


def test_limiter_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="safety"):
        TargetLimiter(Limits(rpm=10), safety=0)
    with pytest.raises(ValueError, match="algorithm"):
        TargetLimiter(Limits(rpm=10), algorithm="leaky")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rpm"):
        TargetLimiter(Limits(rpm=0))
