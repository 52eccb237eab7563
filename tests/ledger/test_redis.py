"""RedisStore: its Lua scripts follow the same state machine as every other store, and keys expire."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import Any

import redis.asyncio as aioredis

from failover.ledger import Claim, Execution, Intent, LedgerStore, MemoryStore, Outcome, RedisStore, State

LEASE = 10.0
INTENTS = [
    Intent(operation_id="op:1", key="k", tool="create_order", args_hash="a" * 64),
    Intent(operation_id="op:1", key="k", tool="create_order", args_hash="b" * 64),  # conflicts with the first
    Intent(operation_id="op:1", key="k2", tool="send_mail", args_hash="c" * 64, idempotent=True),
    Intent(operation_id="op", key="1:k", tool="create_order", args_hash="a" * 64),  # must not collide with op:1/k
]
STATES = [State.SUCCEEDED, State.FAILED, State.UNKNOWN]
RESULTS: list[Any] = [None, 0, "ord_1", {"id": "ord_1", "qty": 2}, [1, "x"]]


def random_step(rnd: random.Random) -> tuple[Any, ...]:
    """One store call; most are aimed at the record's current owner and latest attempt."""
    outcome = Outcome(
        state=rnd.choice(STATES),
        result=rnd.choice(RESULTS),
        error=rnd.choice([None, "", "boom"]),
        external_ref=rnd.choice([None, "ref-1"]),
        retry_safe=rnd.random() < 0.5,
    )
    return (
        rnd.choice(["plan", "claim", "claim", "claim", "renew", "finish", "finish", "resolve", "resolve", "expire"]),
        rnd.choice([0, 0, 0, 1, 2, 3]),
        rnd.choice(["current", "current", "current", "o1", "o2"]),
        rnd.choice([0, 0, 0, -1, 1]),
        outcome,
        rnd.choice([0.0, 0.0, 0.5, 4.0, 11.0]),
    )


async def apply(store: LedgerStore, step: tuple[Any, ...], now: float, model: LedgerStore) -> Any:
    what, i, who, delta, outcome, _ = step
    intent = INTENTS[i]
    op, key = intent.operation_id, intent.key
    cur = await model.get(op, key)
    owner = cur.owner if who == "current" and cur is not None and cur.owner else who
    attempt = (cur.attempts if cur is not None else 0) + delta
    if what == "plan":
        return await store.plan(intent, now=now)
    if what == "claim":
        return await store.claim(intent, owner=owner, now=now, lease=LEASE)
    if what == "renew":
        return await store.renew(op, key, owner=owner, attempt=attempt, now=now, lease=LEASE)
    if what == "finish":
        return await store.finish(op, key, attempt=attempt, outcome=outcome, now=now)
    if what == "resolve":
        return await store.resolve(op, key, owner=owner, outcome=outcome, now=now)
    return sorted(await store.expire(now=now), key=lambda r: (r.operation_id, r.key))


async def test_lua_scripts_match_the_state_machine(redis_url: str) -> None:
    """Random walks of store calls give the same answers and records from Redis as from the
    pure state machine (MemoryStore), transition by transition."""
    redis = RedisStore(redis_url, prefix=f"failover-test:{uuid.uuid4().hex}")
    seen: Counter[str] = Counter()
    try:
        for walk in range(120):
            rnd = random.Random(walk)
            redis.prefix = f"failover-test:{uuid.uuid4().hex}"
            model = MemoryStore()
            now = 1_000_000.0 + rnd.random()
            for n in range(25):
                step = random_step(rnd)
                now += step[5]
                got, want = await apply(redis, step, now, model), await apply(model, step, now, model)
                assert got == want, (walk, n, step)
                seen[f"{step[0]}:{_label(want)}"] += 1
            for op in {i.operation_id for i in INTENTS}:
                assert await redis.records(op) == await model.records(op)
    finally:
        await redis.aclose()
    # the walks reached every transition, not only the refusals
    for label in ("claim:run", "claim:replay", "claim:busy", "claim:resolve", "claim:failed", "claim:conflict"):
        assert seen[label] > 0, label
    for label in ("finish:succeeded", "finish:failed", "finish:unknown", "resolve:succeeded", "resolve:unknown"):
        assert seen[label] > 0, label
    assert seen["renew:True"] > 0 and seen["expire:1"] > 0


def _label(out: Any) -> str:
    if isinstance(out, Claim):
        return out.kind.value
    if isinstance(out, Execution):
        return out.state.value
    if isinstance(out, list):
        return str(len(out))
    return str(out)


async def test_records_and_checkpoints_carry_a_ttl(redis_url: str) -> None:
    prefix = f"failover-test:{uuid.uuid4().hex}"
    store = RedisStore(redis_url, prefix=prefix, ttl=60)
    client = aioredis.Redis.from_url(redis_url)
    try:
        claim = await store.claim(INTENTS[0], owner="o1", now=1.0, lease=LEASE)
        assert claim.kind == "run"
        await store.save_checkpoint("task", {"step": 1}, now=1.0)
        for key in (store.record_key("op:1", "k"), f"{prefix}:o:op:1", f"{prefix}:c:task"):
            ttl = await client.pttl(key)
            assert 0 < ttl <= 60_000, key
        assert await client.zscore(f"{prefix}:started", store.record_key("op:1", "k")) == 11.0
        await store.finish("op:1", "k", attempt=1, outcome=Outcome(state=State.SUCCEEDED, result=[1]), now=2.0)
        assert await client.zscore(f"{prefix}:started", store.record_key("op:1", "k")) is None
    finally:
        await store.aclose()
        await client.aclose()
