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


def _totals(b: State, p: BreakerParams, now: float) -> tuple[int, int, int]:
    if p.window_kind == "count":
        w: str = b["w"] if isinstance(b["w"], str) else ""
        return len(w), sum(c in "13" for c in w), sum(c in "23" for c in w)
    horizon = math.floor(now) - p.window_seconds
    buckets = [x for x in (b["w"] if isinstance(b["w"], list) else []) if x[0] > horizon]
    b["w"] = buckets
    return sum(x[1] for x in buckets), sum(x[2] for x in buckets), sum(x[3] for x in buckets)


def _record_window(b: State, p: BreakerParams, now: float, failed: bool, slow: bool) -> None:
    if p.window_kind == "count":
        w = b["w"] if isinstance(b["w"], str) else ""
        w += str(int(failed) + 2 * int(slow))
        b["w"] = w[-p.window_size :]
        return
    _totals(b, p, now)  # expire old buckets
    second = math.floor(now)
    buckets: list[list[int]] = b["w"]
    if buckets and buckets[-1][0] >= second:
        last = buckets[-1]
    else:
        last = [second, 0, 0, 0]
        buckets.append(last)
    last[1] += 1
    last[2] += int(failed)
    last[3] += int(slow)


def _move(b: State, p: BreakerParams, scope: str, new: str, now: float, reason: str, out: list[Transition]) -> None:
    calls, failures, slow = _totals(b, p, now)
    out.append(
        Transition(
            scope=scope,
            old=b["st"],
            new=new,  # type: ignore[arg-type]
            reason=reason,
            calls=calls,
            failures=failures,
            slow=slow,
            open_for=b["of"] if new == "open" else None,
        )
    )
    b["st"] = new
    b["ep"] += 1
    b["w"] = "" if p.window_kind == "count" else []
    b["pr"] = {}
    b["ps"] = 0
    if new == "closed":
        b["sk"] = 0
        b["fk"] = ""


def _open(
    b: State,
    p: BreakerParams,
    scope: str,
    now: float,
    why: str,
    out: list[Transition],
    kind: str = "",
    probe_duration: float = 0.0,
) -> None:
    b["fk"] = kind  # the failure kind that tripped it: what a request it turns away is told
    b["sk"] += 1
    b["oc"] += 1
    b["oa"] = now
    grown = min(p.max_open_duration, p.open_duration * p.open_duration_growth ** max(0, b["sk"] - 1))
    # after a failed probe, the period counts from the probe's start (at least open_duration)
    b["of"] = max(p.open_duration, grown - probe_duration) if probe_duration > 0 else grown
    b["why"] = why
    _move(b, p, scope, "open", now, why, out)


def breaker_advance(b: State, p: BreakerParams, scope: str, now: float, out: list[Transition]) -> None:
    """Open -> half-open once the period elapsed; drop probe leases whose holder never came back."""
    if b["st"] == "open" and now >= b["oa"] + b["of"]:
        _move(b, p, scope, "half_open", now, f"open period of {b['of']:g}s elapsed", out)
    if b["pr"]:
        b["pr"] = {k: v for k, v in b["pr"].items() if v > now}


def breaker_view(b: State, scope: str, now: float) -> BreakerView:
    is_open = b["st"] == "open"
    return BreakerView(
        scope=scope,
        state=b["st"],
        retry_in=max(0.0, b["oa"] + b["of"] - now) if is_open else None,
        why=b["why"] if is_open else "",
        probes=len(b["pr"]),
        open_for=b["of"] if is_open else None,
        open_count=b["oc"],
        kind="" if b["st"] == "closed" else str(b.get("fk", "")),
    )


def breaker_try(b: State, p: BreakerParams, permit_id: str, now: float) -> bool | None:
    """A permit: False (a closed call), True (a probe), or None (rejected). Call after advance."""
    if b["st"] == "closed":
        return False
    if b["st"] == "half_open" and len(b["pr"]) < p.half_open_probes:
        b["pr"][permit_id] = now + p.probe_lease
        return True
    return None


def breaker_record(
    b: State,
    p: BreakerParams,
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
    if epoch != b["ep"]:
        return  # granted in an earlier state: its result says nothing about this one
    failed = outcome == "failure"
    slow = duration > p.slow_call_duration
    slow_rule = p.slow_call_rate < 1.0
    if b["st"] == "half_open":
        b["pr"].pop(permit_id, None)
        if outcome == "ignored":
            return
        _record_window(b, p, now, failed, slow)
        if failed:
            _open(b, p, scope, now, "probe failed", out, kind, duration)
        elif slow and slow_rule:
            _open(b, p, scope, now, f"probe slower than {p.slow_call_duration:g}s", out, "", duration)
        else:
            b["ps"] += 1
            if b["ps"] >= p.successes_to_close:
                n = b["ps"]
                _move(b, p, scope, "closed", now, f"{n}/{n} probes succeeded", out)
        return
    if b["st"] != "closed" or outcome == "ignored":
        return
    _record_window(b, p, now, failed, slow)
    calls, failures, slows = _totals(b, p, now)
    if calls < p.min_calls:
        return
    if failures / calls >= p.failure_rate:
        _open(b, p, scope, now, f"{failures}/{calls} failed", out, kind)
    elif slow_rule and slows / calls >= p.slow_call_rate:
        _open(b, p, scope, now, f"{slows}/{calls} slower than {p.slow_call_duration:g}s", out)


# -- window buckets ------------------------------------------------------------------------------


def bucket_new() -> State:
    return {"u": {}, "blk": 0.0, "sl": {}}


def _prune(k: State, now: float) -> None:
    for dim, entries in k["u"].items():
        k["u"][dim] = {e: a for e, a in entries.items() if int(e) > now and a > 0}
    if k["sl"]:
        k["sl"] = {r: t for r, t in k["sl"].items() if t > now}


def _used(k: State, dim: str) -> float:
    return float(sum(k["u"].get(dim, {}).values()))


def _add(k: State, dim: str, expires: float, amount: float) -> None:
    if amount <= 0:
        return
    entries = k["u"].setdefault(dim, {})
    key = str(math.ceil(expires))
    entries[key] = entries.get(key, 0.0) + amount


def _time_until(k: State, dim: str, amount: float, capacity: float, now: float) -> float:
    if amount > capacity + _tol(capacity):
        return math.inf
    allowed = capacity - amount + _tol(capacity)
    used = _used(k, dim)
    if used <= allowed:
        return 0.0
    for expires in sorted(k["u"].get(dim, {}), key=int):
        used -= k["u"][dim][expires]
        if used <= allowed:
            return int(expires) - now
    return 0.0  # pragma: no cover - everything expires eventually


def bucket_reserve(
    k: State,
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
    _prune(k, now)
    wait, dim = max(0.0, k["blk"] - now), "retry_after"
    for d, amount in amounts.items():
        w = _time_until(k, d, amount, capacities[d], now)
        if w > wait:
            wait, dim = w, d
    if wait > 0:
        return False, wait, dim
    if slots is not None and len(k["sl"]) >= slots:
        return False, math.inf, "concurrency"
    for d, amount in amounts.items():
        _add(k, d, now + window, amount)
    if slots is not None:
        k["sl"][reservation_id] = now + lease
    return True, 0.0, ""


def bucket_settle(
    k: State,
    reservation_id: str,
    *,
    granted_at: float,
    window: float,
    refund: dict[str, float],
    charge: dict[str, float],
    free_slot: bool,
    now: float,
) -> None:
    _prune(k, now)
    key = str(math.ceil(granted_at + window))
    for d, amount in refund.items():
        entries = k["u"].get(d, {})
        if key in entries and amount > 0:
            entries[key] = max(0.0, entries[key] - amount)
    for d, amount in charge.items():
        _add(k, d, now + window, amount)
    if free_slot:
        k["sl"].pop(reservation_id, None)


def bucket_sync(
    k: State,
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
    _prune(k, now)
    unseen = 0.0
    if since is not None:  # granted after the request the headers answer: the provider had not seen it
        after = math.ceil(since + window)
        unseen = sum(a for e, a in k["u"].get(dim, {}).items() if int(e) > after)
    excess = (capacity - _used(k, dim)) - (remaining - unseen)
    if excess <= _tol(capacity):
        return False
    _add(k, dim, now + (reset_in if reset_in is not None else window), excess)
    return True


def bucket_view(k: State, capacities: dict[str, float], now: float) -> tuple[dict[str, float], float, int]:
    """(level per dimension, seconds blocked, slots leased) of a bucket, without changing it."""
    _prune(k, now)
    levels = {d: cap - _used(k, d) for d, cap in capacities.items()}
    return levels, max(0.0, k["blk"] - now), len(k["sl"])


def bucket_block(k: State, seconds: float, now: float) -> None:
    _prune(k, now)
    k["blk"] = max(k["blk"], now + seconds)


# -- retry budget ----------------------------------------------------------------------------------


def budget_new() -> State:
    return {"q": {}, "r": {}}


def _budget_trim(s: State, window: float, now: float) -> None:
    horizon = now - window
    for part in ("q", "r"):
        s[part] = {sec: n for sec, n in s[part].items() if int(sec) + 1 > horizon}


def budget_available(s: State, *, ratio: float, floor: int, window: float, now: float) -> int:
    _budget_trim(s, window, now)
    allowed = floor + math.floor(ratio * sum(s["q"].values()))
    left: int = max(0, allowed - int(sum(s["r"].values())))
    return left


def budget_request(s: State, *, ratio: float, floor: int, window: float, now: float) -> int:
    sec = str(math.floor(now))
    s["q"][sec] = s["q"].get(sec, 0) + 1
    return budget_available(s, ratio=ratio, floor=floor, window=window, now=now)


def budget_spend(
    s: State, *, ratio: float, floor: int, window: float, now: float, force: bool = False
) -> tuple[bool, int]:
    """Take one extra attempt if any is left; ``force``: count it anyway (it was already made)."""
    left = budget_available(s, ratio=ratio, floor=floor, window=window, now=now)
    if left <= 0 and not force:
        return False, 0
    sec = str(math.floor(now))
    s["r"][sec] = s["r"].get(sec, 0) + 1
    return left > 0, max(0, left - 1)


# -- fleet load (the balancer's requests in flight and quota headers) ------------------------------


def load_new() -> State:
    return {"m": {}, "s": {}}


def load_sync(
    k: State,
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
    members = {m: e for m, e in k["m"].items() if e[0] > now and m != member}
    live = {d: int(n) for d, n in counts.items() if n > 0}
    if live:
        members[member] = [now + lease, live]
    k["m"] = members
    held = {d: s for d, s in k["s"].items() if s[1] > now}
    for d, (share, ttl) in shares.items():
        held[d] = [share, now + ttl, now]
    k["s"] = held
    others: dict[str, int] = {}
    for m, (_, c) in members.items():
        if m != member:
            for d, n in c.items():
                others[d] = others.get(d, 0) + int(n)
    return others, {d: (s[0], s[1] - now, now - s[2]) for d, s in held.items()}


def load_ttl(k: State, now: float) -> float:
    last: float = max([now, *(e[0] for e in k["m"].values()), *(s[1] for s in k["s"].values())])
    return last - now + 1.0


# -- time to live ----------------------------------------------------------------------------------


def breaker_ttl(p: BreakerParams) -> float:
    """Idle breaker state is dropped after this long (a closed breaker with an old window)."""
    return max(3600.0, 2 * p.max_open_duration, 2 * p.window_seconds, p.probe_lease)


def bucket_ttl(k: State, window: float, now: float) -> float:
    last: float = max(now + window, k["blk"], max(k["sl"].values(), default=now))
    for entries in k["u"].values():
        if entries:
            last = max(last, max(map(int, entries)))
    return last - now + 60.0
