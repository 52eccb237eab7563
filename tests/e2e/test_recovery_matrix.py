"""The invariants a user relies on, across the whole matrix of faults, route shapes, envelopes,
loads and clients: not one mechanism at a time, but their composition.

Cells: a fault on A (503, 529, 500, 429 with Retry-After in seconds, milliseconds or as a date,
a hang, a connection dropped before the first byte, a JSON body answered to a stream request)
x a route shape (A alone, A -> B, A -> B -> C, A with an equivalent A2) x an envelope (the 5 s
budget alone, or with max_attempts 2) x a load (10 callers one after another, 500 at once) x
a client (the library, or the gateway through the official openai SDK at its DEFAULT
max_retries). Everything runs over real loopback HTTP on virtual loop time, with the router's
default policies.

Per cell:
1. if an eligible candidate can answer within the time left, every caller gets its answer;
2. a failing upstream receives at most 1.1 x callers + the retry budget's floor requests;
3. every caller's request ends within the budget + 50 ms of loop time;
4. no wait is slept before a refusal (a wait is followed by the attempt it waited for, or was
   cut the moment a breaker opened);
5. the record's workflow names the tier that answered (and the gateway's headers say the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from failover import Envelope, Router, Unavailable, Workflow
from failover.testing import Script

from ._recovery import (
    BUDGET,
    FAULTS,
    RECOVERED_BY_A,
    SHAPES,
    Records,
    call,
    dialect_of,
    gateway,
    make_router,
    upstreams,
)

pytestmark = [pytest.mark.looptime(noop_cycles=200), pytest.mark.e2e]

ENVELOPES = {"budget": Envelope(budget=BUDGET), "max_attempts=2": Envelope(budget=BUDGET, max_attempts=2)}
FLOOR = 10  # RetryBudget()'s floor
TIER = {"a": {Workflow.DIRECT, Workflow.RETRY_FAILOVER}, "a2": {Workflow.RETRY_FAILOVER}, "b": {Workflow.FALLBACK}}
TIER["c"] = TIER["b"]


@dataclass
class Answer:
    target: str | None  # who answered (None: the caller got a failure)
    elapsed: float  # loop seconds, as the caller saw it
    headers: dict[str, str]


async def library_call(router: Router, env: Envelope, stream: bool) -> Answer:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    outcome = await call(router, env, stream=stream)
    target = None if isinstance(outcome, Unavailable) else outcome.target_used
    return Answer(target, loop.time() - t0, {})


def sdk_caller(client: openai.AsyncOpenAI, env: Envelope) -> Callable[[bool], Awaitable[Answer]]:
    headers = {"x-failover-max-attempts": str(env.max_attempts)}

    async def one(stream: bool) -> Answer:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        messages: Any = [{"role": "user", "content": "hi"}]
        try:
            if stream:
                chunks = await client.chat.completions.create(
                    model="r", messages=messages, stream=True, extra_headers=headers
                )
                text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
                assert text
                return Answer("?", loop.time() - t0, dict(chunks.response.headers))
            raw = await client.chat.completions.with_raw_response.create(
                model="r", messages=messages, extra_headers=headers
            )
            raw.parse()
            return Answer(raw.headers["x-failover-target"], loop.time() - t0, dict(raw.headers))
        except openai.APIStatusError as exc:
            return Answer(None, loop.time() - t0, dict(exc.response.headers))

    return one


def alternative(shape: str, fault: str) -> bool:
    """Can some candidate answer in this cell? A itself for an odd but valid answer, else another."""
    return fault in RECOVERED_BY_A or shape != "solo"


CELLS = [
    pytest.param(f, s, e, load, client, id=f"{client}|{load}|{e}|{s}|{f}")
    for client, load, e, s, f in itertools.product(
        ("library", "gateway"), ("sequential", "concurrent"), ENVELOPES, SHAPES, FAULTS
    )
    # 500 SDK callers at once cost seconds of real time per cell: through the gateway that load
    # runs on the two shapes that decide whether an error reaches the client, on one envelope
    if not (client == "gateway" and load == "concurrent" and (s not in ("solo", "a->b") or e != "budget"))
]


@pytest.mark.parametrize(("fault", "shape", "envelope", "load", "client"), CELLS)
async def test_recovery_invariants(fault: str, shape: str, envelope: str, load: str, client: str) -> None:
    env = ENVELOPES[envelope]
    callers = 10 if load == "sequential" else 500
    stream = fault == "json to a stream"
    records = Records()
    async with upstreams(Script.always(FAULTS[fault]), dialect=dialect_of(fault)) as up:
        router = make_router(up.route(shape), stats=records)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with caller(router, client) as one:
            if load == "sequential":
                answers = [await one(env, stream) for _ in range(callers)]
            else:
                answers = list(await asyncio.gather(*(one(env, stream) for _ in range(callers))))
        total = loop.time() - t0
        await router.aclose()

        # 1. an eligible candidate that can answer within the time left answers every caller
        if alternative(shape, fault):
            assert all(a.target is not None for a in answers), [a for a in answers if a.target is None][:3]
        else:
            assert all(a.target is None for a in answers)
        # 2. no upstream receives more than its share: first attempts plus the retry budget
        if fault not in RECOVERED_BY_A:
            assert up.request_calls("a") <= 1.1 * callers + FLOOR, up.request_calls("a")
        # 3. within the budget, as the caller measured it (no retries nested on top: an SDK retry
        # would be a whole second deadline). Through real sockets the client's reading gets a
        # margin: on virtual time a busy machine can let the clock step to the next timer while
        # bytes are in flight. The router's own record of each request is held to 50 ms below.
        margin = 0.05 if client == "library" else 0.5
        assert max(a.elapsed for a in answers) <= BUDGET + margin
        if load == "concurrent":
            assert total <= BUDGET + margin
        # 4 and 5, from the records the router kept
        assert len(records.records) == callers
        for rec in records.records:
            assert rec.elapsed_ms <= (BUDGET + 0.05) * 1000
            for w in rec.waits:
                attempted = any(a.target == w.target and a.start >= w.end - 1e-6 for a in rec.attempts)
                assert attempted or w.end - w.start < 0.01, (w, rec.attempts)
            if rec.target_used is not None:
                assert rec.workflow in TIER[rec.target_used], (rec.target_used, rec.workflow)
                if rec.target_used != "a":  # A failed or was held away: a recovery, and the record says so
                    assert rec.recovered and rec.recovery_reason
                elif len(rec.attempts) == 1:
                    assert rec.workflow is Workflow.DIRECT and not rec.recovered
        for a in answers:  # the client is told the same story as the record, and never to retry
            if a.target is None and client == "gateway":
                assert a.headers["x-should-retry"] == "false"
            # who answered, in a plain answer's summary (a stream's head names the target only)
            if a.headers.get("x-failover-target") and a.headers.get("x-failover-workflow"):
                assert a.headers["x-failover-workflow"] in {w.value for w in TIER[a.headers["x-failover-target"]]}


@contextlib.asynccontextmanager
async def caller(router: Router, client: str) -> AsyncIterator[Callable[[Envelope, bool], Awaitable[Answer]]]:
    """One call's function for either client: the library, or the openai SDK through the gateway."""
    if client == "library":
        yield lambda env, stream: library_call(router, env, stream)
        return
    async with gateway(router) as gw:
        sdk = gw.openai()  # DEFAULT max_retries (2): the gateway must keep it from retrying
        try:
            yield lambda env, stream: sdk_caller(sdk, env)(stream)
        finally:
            await sdk.close()
