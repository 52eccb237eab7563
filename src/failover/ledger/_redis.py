"""RedisStore: the ledger shared by a fleet, every transition one atomic Lua script.

Each record is a hash (``<prefix>:x:<len(op)>:<op>:<key>``) with a TTL, indexed per operation
(a set) and, while ``started``, in a sorted set by lease end (for :meth:`expire`). The Lua
scripts apply the same rules as ``_machine.py``; the store tests run the same behaviour
against both. Leases are compared with the callers' clocks: keep the fleet's clocks in sync
(NTP) and the lease far longer than any skew.

Needs ``redis>=5`` (``pip install failover[redis]``). One Redis server (or a primary with
replicas); the scripts touch keys of one record plus the shared started index, so a Redis
Cluster is not supported.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis

from ._errors import CheckpointConflict
from ._record import Checkpoint, Claim, ClaimKind, Execution, Intent, Json, Outcome, State, canonical_json

T = TypeVar("T")


async def _answer(aw: Awaitable[T]) -> T:
    """Await one Redis round trip without losing a cancellation.

    redis-py (seen with 8.1) sometimes swallows a ``CancelledError`` that lands while a command
    is in flight: the command returns its reply as if nothing had been asked. A ledger's lease
    heartbeat cancelled that way renews forever, and the run that cancelled it waits forever
    (a real Redis lost 15 % of cancellations in a loop of short commands). A cancellation asked
    for during the call is raised here once the reply is in: the command did happen, exactly
    as if the cancellation had arrived just after it.
    """
    task = asyncio.current_task()
    asked = task.cancelling() if task is not None else 0
    result = await aw
    if task is not None and task.cancelling() > asked:
        raise asyncio.CancelledError
    return result


_PRELUDE = """
local ttl = tonumber(ARGV[1])
local now_s = ARGV[2]
local now = tonumber(now_s)

local function load(k)
  local flat = redis.call('HGETALL', k)
  if #flat == 0 then return nil end
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  return r
end

local function flatten(r)
  local out = {}
  for f, v in pairs(r) do out[#out + 1] = f; out[#out + 1] = v end
  return out
end

local function save(r)
  local k = KEYS[1]
  redis.call('DEL', k)
  redis.call('HSET', k, unpack(flatten(r)))
  redis.call('PEXPIRE', k, ttl)
  redis.call('SADD', KEYS[2], r['key'])
  redis.call('PEXPIRE', KEYS[2], ttl)
  if r['state'] == 'started' and r['lease_until'] then
    redis.call('ZADD', KEYS[3], tonumber(r['lease_until']), k)
  else
    redis.call('ZREM', KEYS[3], k)
  end
end

local function uncertain(r)
  return r['state'] == 'started' or r['state'] == 'unknown'
end

local function live(r)
  return r['owner'] ~= nil and r['lease_until'] ~= nil and tonumber(r['lease_until']) > now
end

local function opt(v)
  if v == '' then return nil end
  return string.sub(v, 2)
end

-- ARGV[i .. i+4]: state, result, error, external_ref, retry_safe (see _outcome_args)
local function settle(r, i)
  local st = ARGV[i]
  r['state'] = st
  if st == 'succeeded' then r['result'] = opt(ARGV[i + 1]) else r['result'] = nil end
  r['error'] = opt(ARGV[i + 2])
  local ext = opt(ARGV[i + 3])
  if ext ~= nil then r['external_ref'] = ext end
  if st == 'failed' and ARGV[i + 4] == '1' then r['retry_safe'] = '1' else r['retry_safe'] = '0' end
  r['owner'] = nil
  r['lease_until'] = nil
  if st == 'succeeded' or st == 'failed' then r['finished_at'] = now_s else r['finished_at'] = nil end
  r['updated_at'] = now_s
end
"""

# ARGV: ttl, now, op, key, tool, args_hash, idempotent
_NEW = """
local function new_record()
  return {operation_id = ARGV[3], key = ARGV[4], tool = ARGV[5], args_hash = ARGV[6], state = 'planned',
          idempotent = ARGV[7], retry_safe = '0', attempts = '0', created_at = now_s, updated_at = now_s}
end
"""

_PLAN = (
    _PRELUDE
    + _NEW
    + """
local r = load(KEYS[1])
if r then return flatten(r) end
r = new_record()
save(r)
return flatten(r)
"""
)

# ARGV: ttl, now, op, key, tool, args_hash, idempotent, owner, lease_until
_CLAIM = (
    _PRELUDE
    + _NEW
    + """
local function start(r)
  r['state'] = 'started'
  r['attempts'] = tostring(tonumber(r['attempts'] or '0') + 1)
  r['owner'] = ARGV[8]
  r['lease_until'] = ARGV[9]
  r['started_at'] = now_s
  r['finished_at'] = nil
  r['error'] = nil
  r['retry_safe'] = '0'
  r['updated_at'] = now_s
end

local r = load(KEYS[1])
if not r then
  r = new_record()
  start(r)
  save(r)
  return {'run', flatten(r)}
end
if r['tool'] ~= ARGV[5] or r['args_hash'] ~= ARGV[6] then return {'conflict', flatten(r)} end
local st = r['state']
if st == 'succeeded' then return {'replay', flatten(r)} end
if st == 'planned' or (st == 'failed' and (r['retry_safe'] == '1' or r['idempotent'] == '1' or ARGV[7] == '1')) then
  start(r)
  save(r)
  return {'run', flatten(r)}
end
if st == 'failed' then return {'failed', flatten(r)} end
if live(r) then return {'busy', flatten(r)} end
r['state'] = 'unknown'
r['owner'] = ARGV[8]
r['lease_until'] = ARGV[9]
r['updated_at'] = now_s
save(r)
return {'resolve', flatten(r)}
"""
)

# ARGV: ttl, now, owner, attempt, lease_until
_RENEW = (
    _PRELUDE
    + """
local r = load(KEYS[1])
if not r or r['owner'] ~= ARGV[3] or r['attempts'] ~= ARGV[4] or not uncertain(r) then return 0 end
r['lease_until'] = ARGV[5]
r['updated_at'] = now_s
save(r)
return 1
"""
)

# ARGV: ttl, now, attempt, outcome (5)
_FINISH = (
    _PRELUDE
    + """
local r = load(KEYS[1])
if not r or not uncertain(r) or r['attempts'] ~= ARGV[3] then return false end
settle(r, 4)
save(r)
return flatten(r)
"""
)

# ARGV: ttl, now, owner, outcome (5)
_RESOLVE = (
    _PRELUDE
    + """
local r = load(KEYS[1])
if not r or r['state'] ~= 'unknown' or r['owner'] ~= ARGV[3] then return false end
settle(r, 4)
save(r)
return flatten(r)
"""
)

# KEYS: started index. ARGV: ttl, now
_EXPIRE = (
    _PRELUDE
    + """
local out = {}
for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_s)) do
  local r = load(k)
  if r and r['state'] == 'started' and not live(r) then
    redis.call('HSET', k, 'state', 'unknown', 'updated_at', now_s)
    redis.call('HDEL', k, 'owner', 'lease_until')
    r['state'] = 'unknown'
    r['updated_at'] = now_s
    r['owner'] = nil
    r['lease_until'] = nil
    out[#out + 1] = flatten(r)
  end
  redis.call('ZREM', KEYS[1], k)
end
return out
"""
)

# KEYS: checkpoint. ARGV: ttl, now, state, expected ('' for any)
_CHECKPOINT = """
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= v then return {'conflict', tostring(v)} end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'version', tostring(v + 1), 'saved_at', ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return {'ok', tostring(v + 1)}
"""


def _s(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _fields(flat: Sequence[bytes | str] | Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    if isinstance(flat, Mapping):
        return {_s(k): _s(v) for k, v in flat.items()}
    items = [_s(v) for v in flat]
    return dict(zip(items[0::2], items[1::2], strict=True))


def _opt_float(text: str | None) -> float | None:
    return None if text is None else float(text)


def _execution(flat: Sequence[bytes | str] | Mapping[bytes | str, bytes | str]) -> Execution:
    d = _fields(flat)
    return Execution(
        operation_id=d["operation_id"],
        key=d["key"],
        tool=d["tool"],
        args_hash=d["args_hash"],
        state=State(d["state"]),
        idempotent=d.get("idempotent") == "1",
        result=json.loads(d["result"]) if "result" in d else None,
        error=d.get("error"),
        external_ref=d.get("external_ref"),
        retry_safe=d.get("retry_safe") == "1",
        attempts=int(d.get("attempts", "0")),
        owner=d.get("owner"),
        lease_until=_opt_float(d.get("lease_until")),
        created_at=float(d["created_at"]),
        started_at=_opt_float(d.get("started_at")),
        finished_at=_opt_float(d.get("finished_at")),
        updated_at=float(d["updated_at"]),
    )


def _opt(text: str | None) -> str:
    return "" if text is None else "=" + text


def _outcome_args(outcome: Outcome) -> list[str]:
    result = None if outcome.result is None else canonical_json(outcome.result)
    return [
        outcome.state.value,
        _opt(result),
        _opt(outcome.error),
        _opt(outcome.external_ref),
        "1" if outcome.retry_safe else "0",
    ]


class RedisStore:
    """The ledger in Redis. ``ttl``: how long records and checkpoints are kept after their
    last change (default 7 days): a duplicate arriving later than that runs again.

    >>> store = RedisStore("redis://localhost:6379/0")            # or RedisStore(client)
    """

    def __init__(
        self,
        client: aioredis.Redis | str,
        *,
        prefix: str = "failover:ledger",
        ttl: float = 7 * 24 * 3600.0,
    ) -> None:
        self._owns = isinstance(client, str)
        self.client: aioredis.Redis = aioredis.Redis.from_url(client) if isinstance(client, str) else client
        self.prefix = prefix
        self.ttl_ms = int(ttl * 1000)
        reg = self.client.register_script
        self._plan, self._claim, self._renew = reg(_PLAN), reg(_CLAIM), reg(_RENEW)
        self._finish, self._resolve, self._expire = reg(_FINISH), reg(_RESOLVE), reg(_EXPIRE)
        self._checkpoint = reg(_CHECKPOINT)

    # -- keys ------------------------------------------------------------------------

    def record_key(self, operation_id: str, key: str) -> str:
        return f"{self.prefix}:x:{len(operation_id)}:{operation_id}:{key}"

    def _keys(self, operation_id: str, key: str) -> list[str]:
        return [self.record_key(operation_id, key), f"{self.prefix}:o:{operation_id}", f"{self.prefix}:started"]

    def _head(self, now: float) -> list[str]:
        return [str(self.ttl_ms), repr(now)]

    # -- LedgerStore -----------------------------------------------------------------

    async def plan(self, intent: Intent, *, now: float) -> Execution:
        out = await _answer(
            self._plan(keys=self._keys(intent.operation_id, intent.key), args=[*self._head(now), *_intent_args(intent)])
        )
        return _execution(out)

    async def claim(self, intent: Intent, *, owner: str, now: float, lease: float) -> Claim:
        kind, flat = await _answer(
            self._claim(
                keys=self._keys(intent.operation_id, intent.key),
                args=[*self._head(now), *_intent_args(intent), owner, repr(now + lease)],
            )
        )
        return Claim(kind=ClaimKind(_s(kind)), record=_execution(flat))

    async def renew(self, operation_id: str, key: str, *, owner: str, attempt: int, now: float, lease: float) -> bool:
        out = await _answer(
            self._renew(
                keys=self._keys(operation_id, key), args=[*self._head(now), owner, str(attempt), repr(now + lease)]
            )
        )
        return bool(out)

    async def finish(
        self, operation_id: str, key: str, *, attempt: int, outcome: Outcome, now: float
    ) -> Execution | None:
        out = await _answer(
            self._finish(
                keys=self._keys(operation_id, key), args=[*self._head(now), str(attempt), *_outcome_args(outcome)]
            )
        )
        return None if out is None else _execution(out)

    async def resolve(
        self, operation_id: str, key: str, *, owner: str, outcome: Outcome, now: float
    ) -> Execution | None:
        out = await _answer(
            self._resolve(keys=self._keys(operation_id, key), args=[*self._head(now), owner, *_outcome_args(outcome)])
        )
        return None if out is None else _execution(out)

    async def expire(self, *, now: float) -> list[Execution]:
        out = await _answer(self._expire(keys=[f"{self.prefix}:started"], args=self._head(now)))
        return [_execution(flat) for flat in out]

    async def get(self, operation_id: str, key: str) -> Execution | None:
        flat = await _answer(self.client.hgetall(self.record_key(operation_id, key)))
        return _execution(flat) if flat else None

    async def records(self, operation_id: str) -> list[Execution]:
        keys = sorted(_s(k) for k in await _answer(self.client.smembers(f"{self.prefix}:o:{operation_id}")))
        if not keys:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for k in keys:
                pipe.hgetall(self.record_key(operation_id, k))
            rows: list[Any] = await _answer(pipe.execute())
        found = [_execution(r) for r in rows if r]
        return sorted(found, key=lambda r: (r.created_at, r.key))

    async def save_checkpoint(
        self, task_id: str, state: Json, *, now: float, expected_version: int | None = None
    ) -> Checkpoint:
        expected = "" if expected_version is None else str(expected_version)
        status, version = await _answer(
            self._checkpoint(
                keys=[f"{self.prefix}:c:{task_id}"], args=[*self._head(now), canonical_json(state), expected]
            )
        )
        if _s(status) == "conflict":
            raise CheckpointConflict(task_id, expected_version or 0, int(_s(version)))
        return Checkpoint(task_id=task_id, state=state, version=int(_s(version)), saved_at=now)

    async def load_checkpoint(self, task_id: str) -> Checkpoint | None:
        flat = await _answer(self.client.hgetall(f"{self.prefix}:c:{task_id}"))
        if not flat:
            return None
        d = _fields(flat)
        return Checkpoint(
            task_id=task_id, state=json.loads(d["state"]), version=int(d["version"]), saved_at=float(d["saved_at"])
        )

    async def aclose(self) -> None:
        if self._owns:
            await self.client.aclose()


def _intent_args(intent: Intent) -> list[str]:
    return [intent.operation_id, intent.key, intent.tool, intent.args_hash, "1" if intent.idempotent else "0"]
