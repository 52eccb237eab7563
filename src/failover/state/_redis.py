"""RedisStore: the state of a fleet, every operation one atomic Lua script on the server clock.

Each breaker, bucket and budget is one key holding JSON (``<prefix>br:<scope>``,
``<prefix>rl:<scope>``, ``<prefix>rb:<name>``), written back with a TTL by every script. A
bucket's state is bounded (one number per second of its window, see ``_logic.py``), so a
script's work does not grow with the request rate.

Round trips: scripts are sent with ``EVALSHA`` (loaded once, again after a ``NOSCRIPT``), and
the operations issued in the same event-loop turn are merged into one pipeline, so the
writes that follow an attempt (breaker outcome, bucket settle, headers) cost one round trip
together. ``round_trips`` counts them.

Needs ``redis>=5`` (``pip install failover[redis]``). One Redis server or primary; keys of one
script are a breaker pair or one bucket, so Redis Cluster would need hash tags (not done).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError

from . import _lua
from ._types import (
    Admission,
    BreakerOutcome,
    BreakerParams,
    BreakerView,
    BucketView,
    BudgetAnswer,
    FleetLoad,
    Recorded,
    Reserved,
    Transition,
)

_SCRIPTS = {
    "admit": _lua.BREAKER_ADMIT,
    "record": _lua.BREAKER_RECORD,
    "views": _lua.BREAKER_VIEWS,
    "reserve": _lua.RESERVE,
    "settle": _lua.SETTLE,
    "sync": _lua.SYNC,
    "block": _lua.BLOCK,
    "budget": _lua.BUDGET,
    "counter": _lua.COUNTER,
    "bucket_view": _lua.BUCKET_VIEW,
    "load_sync": _lua.LOAD_SYNC,
}
_DECISIONS = frozenset({"admit", "reserve"})
_SHA = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in _SCRIPTS.items()}

_Pending = tuple[str, Sequence[str], Sequence[str], "asyncio.Future[Any]"]


def _s(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _f(raw: Any) -> float | None:
    s = _s(raw)
    if s == "":
        return None
    return math.inf if s == "inf" else float(s)


def _view(raw: Sequence[Any]) -> BreakerView:
    return BreakerView(
        scope=_s(raw[0]),
        state=_s(raw[1]),  # type: ignore[arg-type]
        retry_in=_f(raw[2]),
        why=_s(raw[3]),
        probes=int(raw[4]),
        open_for=_f(raw[5]),
        open_count=int(raw[6]),
        kind=_s(raw[7]) if len(raw) > 7 else "",
    )


def _transitions(raw: Sequence[Any]) -> tuple[Transition, ...]:
    return tuple(
        Transition(
            scope=_s(t[0]),
            old=_s(t[1]),  # type: ignore[arg-type]
            new=_s(t[2]),  # type: ignore[arg-type]
            reason=_s(t[3]),
            calls=int(t[4]),
            failures=int(t[5]),
            slow=int(t[6]),
            open_for=_f(t[7]),
        )
        for t in raw
    )


def _num(value: float) -> str:
    return repr(float(value))


class RedisStore:
    """Shared state on one Redis server (``redis://``, ``rediss://`` or ``unix://`` URL, or a client).

    ``timeout`` (seconds) bounds every round trip; a slower answer raises ``TimeoutError``,
    which :class:`~failover.state.GuardedStore` turns into local fallback.

    A connection error is retried once, at once, on a fresh connection (redis-py's ``Retry``):
    after a Redis restart every pooled connection is stale, and without the retry each one
    failed once, switching the process to local state and back several times. The price: an
    operation whose reply was lost on a broken connection may be applied twice (a bucket
    charged twice, which only returns tokens late; an outcome counted twice). Timeouts are not
    retried: the guard's timeout is the bound.
    """

    name = "redis"
    errors: tuple[type[BaseException], ...] = (RedisError,)

    def __init__(self, client: str | aioredis.Redis, *, prefix: str = "failover:", timeout: float = 0.25) -> None:
        if isinstance(client, str):
            client = aioredis.Redis.from_url(
                client,
                decode_responses=True,
                socket_connect_timeout=max(timeout, 0.05),
                retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
                health_check_interval=0,
            )
        self.client: aioredis.Redis = client
        self.prefix = prefix
        self.timeout = timeout
        self.round_trips = 0  # pipelines and single commands sent, for tests and benchmarks
        self._pending: list[_Pending] = []
        self._params: dict[BreakerParams, list[str]] = {}  # script arguments of each config, made once
        self._tasks: set[asyncio.Task[None]] = set()

    def key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    # -- the pipe ----------------------------------------------------------------------------

    async def _eval(self, script: str, keys: Sequence[str], args: Sequence[str]) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending.append((script, keys, args, fut))
        if len(self._pending) == 1:
            loop.call_soon(self._start_flush)  # everything issued in this turn goes in one pipeline
        return await fut

    def _start_flush(self) -> None:
        batch, self._pending = self._pending, []
        if len(batch) > 1:
            # Releases and outcomes first, then the decisions of this turn: a slot or a probe freed
            # by a request that ended must be free for the next one (stable sort keeps the rest).
            batch.sort(key=lambda item: item[0] in _DECISIONS)
        if batch:
            task = asyncio.get_running_loop().create_task(self._flush(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _flush(self, batch: list[_Pending]) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                results = await self._send(batch)
                missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
                if missing:  # a restarted or flushed server: load the scripts and send those again
                    await self._load()
                    again = await self._send([batch[i] for i in missing])
                    for i, r in zip(missing, again, strict=True):
                        results[i] = r
        except BaseException as exc:
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else RedisError("cancelled"))
            if not isinstance(exc, Exception):
                raise
            return
        for (*_, fut), r in zip(batch, results, strict=True):
            if fut.done():
                continue
            if isinstance(r, BaseException):
                fut.set_exception(r)
            else:
                fut.set_result(r)

    async def _send(self, batch: Sequence[_Pending]) -> list[Any]:
        self.round_trips += 1
        if len(batch) == 1:
            script, keys, args, _ = batch[0]
            try:
                return [await self.client.execute_command("EVALSHA", _SHA[script], len(keys), *keys, *args)]  # type: ignore[no-untyped-call]
            except NoScriptError as exc:
                return [exc]
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args, _ in batch:
            pipe.execute_command("EVALSHA", _SHA[script], len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))

    async def _load(self) -> None:
        self.round_trips += 1
        pipe = self.client.pipeline(transaction=False)
        for src in _SCRIPTS.values():
            pipe.script_load(src)
        await pipe.execute()

    # -- breakers ----------------------------------------------------------------------------

    def _args(self, params: BreakerParams) -> list[str]:
        args = self._params.get(params)
        if args is None:
            args = self._params[params] = params.args()
        return args

    async def breaker_admit(self, scopes: list[tuple[str, BreakerParams]], permit_id: str) -> Admission:
        args = [permit_id, str(len(scopes))]
        for scope, p in scopes:
            args += [scope, *self._args(p)]
        raw = await self._eval("admit", [self.key("br", s) for s, _ in scopes], args)
        granted = int(raw[0]) == 1
        return Admission(
            granted=granted,
            epochs=tuple(int(e) for e in raw[2]),
            probes=tuple(int(p) == 1 for p in raw[3]),
            rejected=None if granted else int(raw[1]) - 1,
            views=tuple(_view(v) for v in raw[4]),
            transitions=_transitions(raw[5]),
        )

    async def breaker_record(self, outcomes: list[BreakerOutcome], permit_id: str, duration: float) -> Recorded:
        args = [permit_id, _num(duration), str(len(outcomes))]
        for o in outcomes:
            args += [o.scope, str(o.epoch), o.outcome, o.kind, *self._args(o.params)]
        raw = await self._eval("record", [self.key("br", o.scope) for o in outcomes], args)
        return Recorded(views=tuple(_view(v) for v in raw[0]), transitions=_transitions(raw[1]))

    async def breaker_views(self, scopes: list[tuple[str, BreakerParams]]) -> tuple[BreakerView, ...]:
        args = [str(len(scopes))]
        for scope, p in scopes:
            args += [scope, *self._args(p)]
        raw = await self._eval("views", [self.key("br", s) for s, _ in scopes], args)
        return tuple(_view(v) for v in raw)

    # -- buckets and slots -----------------------------------------------------------------------

    async def reserve(
        self,
        scope: str,
        amounts: dict[str, float],
        capacities: dict[str, float],
        *,
        window: float,
        reservation_id: str,
        slots: int | None = None,
        lease: float = 300.0,
    ) -> Reserved:
        args = [_num(window), reservation_id, "" if slots is None else str(slots), _num(lease), str(len(amounts))]
        for d, a in amounts.items():
            args += [d, _num(a), _num(capacities[d])]
        raw = await self._eval("reserve", [self.key("rl", scope)], args)
        return Reserved(granted=int(raw[0]) == 1, wait=_f(raw[1]) or 0.0, dimension=_s(raw[2]), at=float(_s(raw[3])))

    async def settle(
        self,
        scope: str,
        reservation_id: str,
        *,
        granted_at: float,
        window: float,
        refund: dict[str, float],
        charge: dict[str, float],
        free_slot: bool = True,
    ) -> None:
        args = [reservation_id, _num(granted_at), _num(window), "1" if free_slot else "0", str(len(refund))]
        for d, a in refund.items():
            args += [d, _num(a)]
        args.append(str(len(charge)))
        for d, a in charge.items():
            args += [d, _num(a)]
        await self._eval("settle", [self.key("rl", scope)], args)

    async def sync(
        self,
        scope: str,
        dimension: str,
        *,
        remaining: float,
        reset_in: float | None,
        capacity: float,
        window: float,
        since: float | None = None,
    ) -> bool:
        args = [
            dimension,
            _num(remaining),
            "" if reset_in is None else _num(reset_in),
            _num(capacity),
            _num(window),
            "" if since is None else _num(since),
        ]
        return int(await self._eval("sync", [self.key("rl", scope)], args)) == 1

    async def block(self, scope: str, seconds: float, *, window: float) -> None:
        await self._eval("block", [self.key("rl", scope)], [_num(seconds), _num(window)])

    async def bucket_view(self, scope: str, capacities: dict[str, float]) -> BucketView:
        args = [str(len(capacities))]
        for d, cap in capacities.items():
            args += [d, _num(cap)]
        raw = await self._eval("bucket_view", [self.key("rl", scope)], args)
        levels = {d: float(_s(v)) for d, v in zip(capacities, raw[0], strict=True)}
        return BucketView(levels=levels, blocked_for=float(_s(raw[1])), slots=int(raw[2]))

    # -- retry budget ----------------------------------------------------------------------------

    async def budget_request(self, name: str, *, ratio: float, floor: int, window: float) -> int:
        raw = await self._eval("budget", [self.key("rb", name)], [_num(ratio), str(floor), _num(window), "request"])
        return int(raw[1])

    async def budget_spend(
        self, name: str, *, ratio: float, floor: int, window: float, force: bool = False
    ) -> BudgetAnswer:
        args = [_num(ratio), str(floor), _num(window), "spend", "1" if force else "0"]
        raw = await self._eval("budget", [self.key("rb", name)], args)
        return BudgetAnswer(allowed=int(raw[0]) == 1, available=int(raw[1]))

    # -- counters ------------------------------------------------------------------------------

    async def counter(self, name: str, amount: float, *, ttl: float) -> float:
        return float(_s(await self._eval("counter", [self.key("ct", name)], [_num(amount), _num(ttl)])))

    # -- fleet load ------------------------------------------------------------------------------

    async def load_sync(
        self,
        name: str,
        member: str,
        counts: dict[str, int],
        shares: dict[str, tuple[float, float]],
        *,
        lease: float,
    ) -> FleetLoad:
        args = [member, _num(lease), str(len(counts))]
        for d, c in counts.items():
            args += [d, str(int(c))]
        args.append(str(len(shares)))
        for d, (share, ttl) in shares.items():
            args += [d, _num(share), _num(ttl)]
        raw = await self._eval("load_sync", [self.key("lb", name)], args)
        others, held = raw[0], raw[1]
        in_flight = {_s(others[i]): int(_s(others[i + 1])) for i in range(0, len(others), 2)}
        said = {
            _s(held[i]): (float(_s(held[i + 1])), float(_s(held[i + 2])), float(_s(held[i + 3])))
            for i in range(0, len(held), 4)
        }
        return FleetLoad(in_flight=in_flight, shares=said)

    async def aclose(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await self.client.aclose()
