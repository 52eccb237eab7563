"""The state machines of the shared backends, as pure functions over JSON-able dicts.

:class:`MemoryStore` and :class:`SQLiteStore` run these directly (SQLite inside one
``BEGIN IMMEDIATE`` transaction); ``_lua.py`` is the same logic for Redis, and the contract
tests in tests/state run every backend against the same expectations. The rules are those of
``policy/breakers/_circuit.py`` (CircuitBreaker) and ``policy/limits/_buckets.py`` (WindowBucket), with two
changes that a fleet needs:

* half-open probe slots are leases (``probe_lease`` seconds), so a process that crashed while
  holding one does not keep the breaker half-open forever;
* a window bucket's entries are kept per whole second of expiry (rounded up), so the state of
  a 60 s window is at most ~61 numbers per dimension, whatever the request rate. Rounding up
  only returns tokens later than exact, never earlier: no rolling window exceeds capacity.
"""

from __future__ import annotations

import math
from typing import Any

from ._types import BreakerParams, BreakerView, Transition

State = dict[str, Any]
_EPS = 1e-9


def _tol(capacity: float) -> float:
    return _EPS * max(1.0, capacity)


# -- breakers ----------------------------------------------------------------------------------


def breaker_new() -> State:
    return {
        "st": "closed",
        "ep": 0,
        "oa": 0.0,
        "of": 0.0,
        "why": "",
        "sk": 0,
        "oc": 0,
        "pr": {},
        "ps": 0,
        "w": "",
        "fk": "",
    }


def _totals(breaker: State, params: BreakerParams, now: float) -> tuple[int, int, int]:
    if params.window_kind == "count":
        w: str = breaker["w"] if isinstance(breaker["w"], str) else ""
        return len(w), sum(c in "13" for c in w), sum(c in "23" for c in w)
    horizon = math.floor(now) - params.window_seconds
    buckets = [x for x in (breaker["w"] if isinstance(breaker["w"], list) else []) if x[0] > horizon]
    breaker["w"] = buckets
    return sum(x[1] for x in buckets), sum(x[2] for x in buckets), sum(x[3] for x in buckets)


def _record_window(breaker: State, params: BreakerParams, now: float, failed: bool, slow: bool) -> None:
    if params.window_kind == "count":
        w = breaker["w"] if isinstance(breaker["w"], str) else ""
        w += str(int(failed) + 2 * int(slow))
        breaker["w"] = w[-params.window_size :]
        return
    _totals(breaker, params, now)  # expire old buckets
    second = math.floor(now)
    buckets: list[list[int]] = breaker["w"]
    if buckets and buckets[-1][0] >= second:
        last = buckets[-1]
    else:
        last = [second, 0, 0, 0]
        buckets.append(last)
    last[1] += 1
    last[2] += int(failed)
    last[3] += int(slow)


def _move(
    breaker: State, params: BreakerParams, scope: str, new: str, now: float, reason: str, out: list[Transition]
) -> None:
    calls, failures, slow = _totals(breaker, params, now)
    out.append(
        Transition(
            scope=scope,
            old=breaker["st"],
            new=new,  # type: ignore[arg-type]
            reason=reason,
            calls=calls,
            failures=failures,
            slow=slow,
            open_for=breaker["of"] if new == "open" else None,
        )
    )
    breaker["st"] = new
    breaker["ep"] += 1
    breaker["w"] = "" if params.window_kind == "count" else []
    breaker["pr"] = {}
    breaker["ps"] = 0
    if new == "closed":
        breaker["sk"] = 0
        breaker["fk"] = ""


def _open(
    breaker: State,
    params: BreakerParams,
    scope: str,
    now: float,
    why: str,
    out: list[Transition],
    kind: str = "",
    probe_duration: float = 0.0,
) -> None:
    breaker["fk"] = kind  # the failure kind that tripped it: what a request it turns away is told
    breaker["sk"] += 1
    breaker["oc"] += 1
    breaker["oa"] = now
    grown = min(
        params.max_open_duration, params.open_duration * params.open_duration_growth ** max(0, breaker["sk"] - 1)
    )
    # after a failed probe, the period counts from the probe's start (at least open_duration)
    breaker["of"] = max(params.open_duration, grown - probe_duration) if probe_duration > 0 else grown
    breaker["why"] = why
    _move(breaker, params, scope, "open", now, why, out)


def breaker_advance(breaker: State, params: BreakerParams, scope: str, now: float, out: list[Transition]) -> None:
    """Open -> half-open once the period elapsed; drop probe leases whose holder never came back."""
    if breaker["st"] == "open" and now >= breaker["oa"] + breaker["of"]:
        _move(breaker, params, scope, "half_open", now, f"open period of {breaker['of']:g}s elapsed", out)
    if breaker["pr"]:
        breaker["pr"] = {k: v for k, v in breaker["pr"].items() if v > now}


def breaker_view(breaker: State, scope: str, now: float) -> BreakerView:
    is_open = breaker["st"] == "open"
    return BreakerView(
        scope=scope,
        state=breaker["st"],
        retry_in=max(0.0, breaker["oa"] + breaker["of"] - now) if is_open else None,
        why=breaker["why"] if is_open else "",
        probes=len(breaker["pr"]),
        open_for=breaker["of"] if is_open else None,
        open_count=breaker["oc"],
        kind="" if breaker["st"] == "closed" else str(breaker.get("fk", "")),
    )


def breaker_try(breaker: State, params: BreakerParams, permit_id: str, now: float) -> bool | None:
    """A permit: False (a closed call), True (a probe), or None (rejected). Call after advance."""
    if breaker["st"] == "closed":
        return False
    if breaker["st"] == "half_open" and len(breaker["pr"]) < params.half_open_probes:
        breaker["pr"][permit_id] = now + params.probe_lease
        return True
    return None


def breaker_record(
    breaker: State,
    params: BreakerParams,
    scope: str,
    *,
    epoch: int,
    permit_id: str,
    outcome: str,
    duration: float,
    now: float,
    out: list[Transition],
    kind: str = "",
) -> None:
    """The rules of ``CircuitBreaker.release`` on the shared state (``kind``: the failure's kind)."""
    if epoch != breaker["ep"]:
        return  # granted in an earlier state: its result says nothing about this one
    failed = outcome == "failure"
    slow = duration > params.slow_call_duration
    slow_rule = params.slow_call_rate < 1.0
    if breaker["st"] == "half_open":
        breaker["pr"].pop(permit_id, None)
        if outcome == "ignored":
            return
        _record_window(breaker, params, now, failed, slow)
        if failed:
            _open(breaker, params, scope, now, "probe failed", out, kind, duration)
        elif slow and slow_rule:
            _open(breaker, params, scope, now, f"probe slower than {params.slow_call_duration:g}s", out, "", duration)
        else:
            breaker["ps"] += 1
            if breaker["ps"] >= params.successes_to_close:
                n = breaker["ps"]
                _move(breaker, params, scope, "closed", now, f"{n}/{n} probes succeeded", out)
        return
    if breaker["st"] != "closed" or outcome == "ignored":
        return
    _record_window(breaker, params, now, failed, slow)
    calls, failures, slows = _totals(breaker, params, now)
    if calls < params.min_calls:
        return
    if failures / calls >= params.failure_rate:
        _open(breaker, params, scope, now, f"{failures}/{calls} failed", out, kind)
    elif slow_rule and slows / calls >= params.slow_call_rate:
        _open(breaker, params, scope, now, f"{slows}/{calls} slower than {params.slow_call_duration:g}s", out)


# -- window buckets ------------------------------------------------------------------------------


def bucket_new() -> State:
    return {"u": {}, "blk": 0.0, "sl": {}}


def _prune(bucket: State, now: float) -> None:
    for dim, entries in bucket["u"].items():
        bucket["u"][dim] = {e: a for e, a in entries.items() if int(e) > now and a > 0}
    if bucket["sl"]:
        bucket["sl"] = {r: t for r, t in bucket["sl"].items() if t > now}


def _used(bucket: State, dim: str) -> float:
    return float(sum(bucket["u"].get(dim, {}).values()))


def _add(bucket: State, dim: str, expires: float, amount: float) -> None:
    if amount <= 0:
        return
    entries = bucket["u"].setdefault(dim, {})
    key = str(math.ceil(expires))
    entries[key] = entries.get(key, 0.0) + amount


def _time_until(bucket: State, dim: str, amount: float, capacity: float, now: float) -> float:
    if amount > capacity + _tol(capacity):
        return math.inf
    allowed = capacity - amount + _tol(capacity)
    used = _used(bucket, dim)
    if used <= allowed:
        return 0.0
    for expires in sorted(bucket["u"].get(dim, {}), key=int):
        used -= bucket["u"][dim][expires]
        if used <= allowed:
            return int(expires) - now
    return 0.0  # pragma: no cover - everything expires eventually


def bucket_reserve(
    bucket: State,
    amounts: dict[str, float],
    capacities: dict[str, float],
    *,
    window: float,
    reservation_id: str,
    slots: int | None,
    lease: float,
    now: float,
) -> tuple[bool, float, str]:
    """(granted, wait, binding dimension); on a grant the amounts are taken and a slot leased."""
    _prune(bucket, now)
    wait, dim = max(0.0, bucket["blk"] - now), "retry_after"
    for d, amount in amounts.items():
        w = _time_until(bucket, d, amount, capacities[d], now)
        if w > wait:
            wait, dim = w, d
    if wait > 0:
        return False, wait, dim
    if slots is not None and len(bucket["sl"]) >= slots:
        return False, math.inf, "concurrency"
    for d, amount in amounts.items():
        _add(bucket, d, now + window, amount)
    if slots is not None:
        bucket["sl"][reservation_id] = now + lease
    return True, 0.0, ""


def bucket_settle(
    bucket: State,
    reservation_id: str,
    *,
    granted_at: float,
    window: float,
    refund: dict[str, float],
    charge: dict[str, float],
    free_slot: bool,
    now: float,
) -> None:
    _prune(bucket, now)
    key = str(math.ceil(granted_at + window))
    for d, amount in refund.items():
        entries = bucket["u"].get(d, {})
        if key in entries and amount > 0:
            entries[key] = max(0.0, entries[key] - amount)
    for d, amount in charge.items():
        _add(bucket, d, now + window, amount)
    if free_slot:
        bucket["sl"].pop(reservation_id, None)


def bucket_sync(
    bucket: State,
    dim: str,
    *,
    remaining: float,
    reset_in: float | None,
    capacity: float,
    window: float,
    since: float | None,
    now: float,
) -> bool:
    if reset_in is not None and reset_in <= 0:
        return False  # already reset: the count is stale
    _prune(bucket, now)
    unseen = 0.0
    if since is not None:  # granted after the request the headers answer: the provider had not seen it
        after = math.ceil(since + window)
        unseen = sum(a for e, a in bucket["u"].get(dim, {}).items() if int(e) > after)
    excess = (capacity - _used(bucket, dim)) - (remaining - unseen)
    if excess <= _tol(capacity):
        return False
    _add(bucket, dim, now + (reset_in if reset_in is not None else window), excess)
    return True


def bucket_view(bucket: State, capacities: dict[str, float], now: float) -> tuple[dict[str, float], float, int]:
    """(level per dimension, seconds blocked, slots leased) of a bucket, without changing it."""
    _prune(bucket, now)
    levels = {d: cap - _used(bucket, d) for d, cap in capacities.items()}
    return levels, max(0.0, bucket["blk"] - now), len(bucket["sl"])


def bucket_block(bucket: State, seconds: float, now: float) -> None:
    _prune(bucket, now)
    bucket["blk"] = max(bucket["blk"], now + seconds)


# -- retry budget ----------------------------------------------------------------------------------


def budget_new() -> State:
    return {"q": {}, "r": {}}


def _budget_trim(budget: State, window: float, now: float) -> None:
    horizon = now - window
    for part in ("q", "r"):
        budget[part] = {sec: n for sec, n in budget[part].items() if int(sec) + 1 > horizon}


def budget_available(budget: State, *, ratio: float, floor: int, window: float, now: float) -> int:
    _budget_trim(budget, window, now)
    allowed = floor + math.floor(ratio * sum(budget["q"].values()))
    left: int = max(0, allowed - int(sum(budget["r"].values())))
    return left


def budget_request(budget: State, *, ratio: float, floor: int, window: float, now: float) -> int:
    sec = str(math.floor(now))
    budget["q"][sec] = budget["q"].get(sec, 0) + 1
    return budget_available(budget, ratio=ratio, floor=floor, window=window, now=now)


def budget_spend(
    budget: State, *, ratio: float, floor: int, window: float, now: float, force: bool = False
) -> tuple[bool, int]:
    """Take one extra attempt if any is left; ``force``: count it anyway (it was already made)."""
    left = budget_available(budget, ratio=ratio, floor=floor, window=window, now=now)
    if left <= 0 and not force:
        return False, 0
    sec = str(math.floor(now))
    budget["r"][sec] = budget["r"].get(sec, 0) + 1
    return left > 0, max(0, left - 1)


# -- fleet load (the balancer's requests in flight and quota headers) ------------------------------


def load_new() -> State:
    return {"m": {}, "s": {}}


def load_sync(
    load: State,
    member: str,
    counts: dict[str, int],
    shares: dict[str, tuple[float, float]],
    *,
    lease: float,
    now: float,
) -> tuple[dict[str, int], dict[str, tuple[float, float, float]]]:
    """One process's requests in flight per deployment (``counts``, replacing what it said
    before; its lease ends ``lease`` s from now) and the quota shares its headers said
    (deployment -> (share, seconds it holds)). Returns the other live members' counts summed
    per deployment, and every share still current: (share, seconds left, seconds since said)."""
    members = {m: e for m, e in load["m"].items() if e[0] > now and m != member}
    live = {d: int(n) for d, n in counts.items() if n > 0}
    if live:
        members[member] = [now + lease, live]
    load["m"] = members
    held = {d: s for d, s in load["s"].items() if s[1] > now}
    for d, (share, ttl) in shares.items():
        held[d] = [share, now + ttl, now]
    load["s"] = held
    others: dict[str, int] = {}
    for m, (_, c) in members.items():
        if m != member:
            for d, n in c.items():
                others[d] = others.get(d, 0) + int(n)
    return others, {d: (s[0], s[1] - now, now - s[2]) for d, s in held.items()}


def load_ttl(load: State, now: float) -> float:
    last: float = max([now, *(e[0] for e in load["m"].values()), *(s[1] for s in load["s"].values())])
    return last - now + 1.0


# -- time to live ----------------------------------------------------------------------------------


def breaker_ttl(params: BreakerParams) -> float:
    """Idle breaker state is dropped after this long (a closed breaker with an old window)."""
    return max(3600.0, 2 * params.max_open_duration, 2 * params.window_seconds, params.probe_lease)


def bucket_ttl(bucket: State, window: float, now: float) -> float:
    last: float = max(now + window, bucket["blk"], max(bucket["sl"].values(), default=now))
    for entries in bucket["u"].values():
        if entries:
            last = max(last, max(map(int, entries)))
    return last - now + 60.0
