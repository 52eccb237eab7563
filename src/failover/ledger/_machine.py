"""The ledger's state machine as pure functions: record in, record to write and answer out.

Every store runs these under its own atomicity (a lock, an SQLite ``BEGIN IMMEDIATE``
transaction, a PostgreSQL row lock); the Redis store runs the same rules as Lua scripts
(``_redis.py``), and the store tests hold both to the same behaviour. ``None`` as the record
to write means "leave the store as it is".
"""

from __future__ import annotations

from dataclasses import replace

from ._record import Claim, ClaimKind, Execution, Intent, Outcome, State


def conflicts(rec: Execution, intent: Intent) -> bool:
    return rec.tool != intent.tool or rec.args_hash != intent.args_hash


def plan(rec: Execution | None, intent: Intent, now: float) -> tuple[Execution | None, Execution]:
    """Record a planned execution unless the key already has a record."""
    if rec is not None:
        return None, rec
    new = Execution(
        operation_id=intent.operation_id,
        key=intent.key,
        tool=intent.tool,
        args_hash=intent.args_hash,
        state=State.PLANNED,
        idempotent=intent.idempotent,
        created_at=now,
        updated_at=now,
    )
    return new, new


def _start(rec: Execution, owner: str, now: float, lease: float) -> Execution:
    return replace(
        rec,
        state=State.STARTED,
        attempts=rec.attempts + 1,
        owner=owner,
        lease_until=now + lease,
        started_at=now,
        finished_at=None,
        error=None,
        retry_safe=False,
        updated_at=now,
    )


def claim(
    rec: Execution | None, intent: Intent, owner: str, now: float, lease: float
) -> tuple[Execution | None, Claim]:
    """Who does what with this key now. The one atomic decision every duplicate goes through."""
    if rec is None:
        _, planned = plan(None, intent, now)
        new = _start(planned, owner, now, lease)
        return new, Claim(kind=ClaimKind.RUN, record=new)
    if conflicts(rec, intent):
        return None, Claim(kind=ClaimKind.CONFLICT, record=rec)
    if rec.state is State.SUCCEEDED:
        return None, Claim(kind=ClaimKind.REPLAY, record=rec)
    if rec.state is State.PLANNED or (
        rec.state is State.FAILED and (rec.retry_safe or rec.idempotent or intent.idempotent)
    ):
        new = _start(rec, owner, now, lease)
        return new, Claim(kind=ClaimKind.RUN, record=new)
    if rec.state is State.FAILED:
        return None, Claim(kind=ClaimKind.FAILED, record=rec)
    # STARTED or UNKNOWN: somebody runs or reconciles it while the lease lives.
    if rec.lease_live(now):
        return None, Claim(kind=ClaimKind.BUSY, record=rec)
    new = replace(rec, state=State.UNKNOWN, owner=owner, lease_until=now + lease, updated_at=now)
    return new, Claim(kind=ClaimKind.RESOLVE, record=new)


def renew(rec: Execution | None, owner: str, attempt: int, now: float, lease: float) -> Execution | None:
    """Extend the lease of the owner that still holds it (a heartbeat)."""
    if rec is None or rec.owner != owner or rec.attempts != attempt or not rec.uncertain:
        return None
    return replace(rec, lease_until=now + lease, updated_at=now)


def _settle(rec: Execution, outcome: Outcome, now: float) -> Execution:
    terminal = outcome.state in (State.SUCCEEDED, State.FAILED)
    return replace(
        rec,
        state=outcome.state,
        result=outcome.result if outcome.state is State.SUCCEEDED else None,
        error=outcome.error,
        external_ref=outcome.external_ref if outcome.external_ref is not None else rec.external_ref,
        retry_safe=outcome.retry_safe and outcome.state is State.FAILED,
        owner=None,
        lease_until=None,
        finished_at=now if terminal else None,
        updated_at=now,
    )


def finish(rec: Execution | None, attempt: int, outcome: Outcome, now: float) -> Execution | None:
    """The body of attempt ``attempt`` ended. Accepted while that attempt is the latest and
    nobody settled it: even after its lease ran out and a reconciler took over, the body's
    own report is the truth, and the reconciler's later write then fails its check."""
    if rec is None or not rec.uncertain or rec.attempts != attempt:
        return None
    return _settle(rec, outcome, now)


def resolve(rec: Execution | None, owner: str, outcome: Outcome, now: float) -> Execution | None:
    """A reconciler's verdict on an unknown record it owns. UNKNOWN releases it unresolved."""
    if rec is None or rec.state is not State.UNKNOWN or rec.owner != owner:
        return None
    return _settle(rec, outcome, now)


def expire(rec: Execution, now: float) -> Execution | None:
    """A started record whose lease ran out (its owner crashed or hung) becomes unknown."""
    if rec.state is not State.STARTED or rec.lease_live(now):
        return None
    return replace(rec, state=State.UNKNOWN, owner=None, lease_until=None, updated_at=now)
