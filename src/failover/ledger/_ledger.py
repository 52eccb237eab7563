"""The Ledger: run a tool at most once per (operation, key), across retries, fallbacks and crashes.

    ledger = Ledger("ledger.db")                     # SQLiteStore; or MemoryStore(), RedisStore(...)
    ledger.tool("create_order", reconcile=find_order, confirm=ask_a_human)

    result = await ledger.run(task_id, call.name, call.arguments, create_order)

``run`` calls ``create_order(run)`` only when this (operation, key) has not run yet; a
duplicate gets the first result back without calling it. The context-manager form gives the
same guarantees with more room, and one more rule to follow (check ``run.done``)::

    async with ledger.execute(task_id, "create_order", args) as run:
        if not run.done:
            order = await shop.create(args, idempotency_key=run.idempotency_key)
            run.succeed(order, external_ref=order["id"])
    use(run.result)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, TypeVar

from ..model import SideEffectMode
from ._decision import SideEffectDecision, TaskState, side_effect_decision
from ._errors import (
    ExecutionFailed,
    KeyConflict,
    LedgerMisuse,
    MaybeExecuted,
    NotExecuted,
    OutcomeUnknown,
    StillRunning,
)
from ._machine import conflicts
from ._record import (
    Checkpoint,
    ClaimKind,
    Execution,
    Intent,
    Json,
    Outcome,
    State,
    arguments_hash,
    canonical_json,
    default_key,
    parse_arguments,
)
from ._store import LedgerStore

log = logging.getLogger("failover.ledger")
T = TypeVar("T")


class VerdictKind(StrEnum):
    SUCCEEDED = "succeeded"  # it happened: here is its result
    FAILED = "failed"  # it happened and failed (``safe``: it did not take effect)
    NOT_DONE = "not_done"  # it never took effect: running it now is safe
    UNKNOWN = "unknown"  # still cannot tell
    RERUN = "rerun"  # (confirm gate) run it again, accepting the risk


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What a reconcile hook or a confirm gate says about an execution of unknown outcome."""

    kind: VerdictKind
    result: Json = None
    external_ref: str | None = None
    reason: str | None = None
    safe: bool = False

    @classmethod
    def succeeded(cls, result: Json = None, *, external_ref: str | None = None) -> Verdict:
        return cls(kind=VerdictKind.SUCCEEDED, result=result, external_ref=external_ref)

    @classmethod
    def failed(cls, reason: str, *, safe: bool = False) -> Verdict:
        return cls(kind=VerdictKind.FAILED, reason=reason, safe=safe)

    @classmethod
    def not_done(cls, reason: str = "the external system has no trace of it") -> Verdict:
        return cls(kind=VerdictKind.NOT_DONE, reason=reason)

    @classmethod
    def unknown(cls, reason: str = "the external system cannot tell") -> Verdict:
        return cls(kind=VerdictKind.UNKNOWN, reason=reason)

    @classmethod
    def rerun(cls, reason: str = "confirmed: run it again") -> Verdict:
        return cls(kind=VerdictKind.RERUN, reason=reason)


Reconcile = Callable[[Execution], Awaitable[Verdict]]
"""Ask the external system what became of an execution (by its key or external_ref)."""

Confirm = Callable[[Execution, str], Awaitable[Verdict]]
"""The confirmation gate: decide about a non-idempotent execution that reconcile could not
settle (the second argument says why). Return ``Verdict.unknown`` to escalate: the record
stays unknown and the caller gets OutcomeUnknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """How the ledger treats one tool.

    ``idempotent``: running it twice has the effect of running it once (it passes the
    ledger's idempotency key on, or it only reads). Its failures may be retried and an
    unknown outcome may be re-run. ``safe_errors``: exception types that mean the action did
    not take effect (like :class:`NotExecuted`).
    """

    idempotent: bool = False
    reconcile: Reconcile | None = None
    confirm: Confirm | None = None
    safe_errors: tuple[type[BaseException], ...] = ()


class Run:
    """One caller's execution of (operation, key). Use it as ``async with ledger.execute(...)``.

    After entering, either ``done`` is True (``replayed``: the result comes from an earlier
    execution, possibly settled by a reconcile hook) and the body MUST NOT act, or this caller
    owns attempt ``attempt`` and reports with :meth:`succeed` or by raising.
    """

    def __init__(self, ledger: Ledger, intent: Intent, arguments: dict[str, Any], spec: ToolSpec, wait: float | None):
        self.ledger = ledger
        self.intent = intent
        self.arguments = arguments
        self.spec = spec
        self.wait = wait
        self.attempt = 0
        self.replayed = False
        self.reconciled = False
        self.record: Execution | None = None
        self.result: Json = None
        self.external_ref: str | None = None
        self._owner = secrets.token_hex(8)
        self._reported = False
        self._running = False
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def operation_id(self) -> str:
        return self.intent.operation_id

    @property
    def key(self) -> str:
        return self.intent.key

    @property
    def tool(self) -> str:
        return self.intent.tool

    @property
    def idempotency_key(self) -> str:
        """A stable key for this action: pass it to an external API that takes one."""
        return f"{self.intent.operation_id}/{self.intent.key}"

    @property
    def done(self) -> bool:
        """True when there is a result and the body must not (or need not) act."""
        return self.replayed or self._reported

    def succeed(self, result: Json = None, *, external_ref: str | None = None) -> None:
        """Report the tool's result (JSON). Recorded as ``succeeded`` when the block exits."""
        if self.replayed:
            raise LedgerMisuse(f"{self.tool}: run.done is True (replayed); the body must not act")
        if not self._running:
            raise LedgerMisuse("run.succeed() outside `async with ledger.execute(...)`")
        canonical_json(result)  # TypeError / ValueError now, not after the block
        self.result = result
        self.external_ref = external_ref
        self._reported = True

    async def __aenter__(self) -> Run:
        await self.ledger._enter(self)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        await self.ledger._exit(self, exc)

    def __repr__(self) -> str:
        how = "replayed" if self.replayed else f"attempt {self.attempt}"
        return f"Run({self.tool!r}, operation={self.operation_id!r}, key={self.key!r}, {how})"


class Ledger:
    """Durable tool-execution records over one :class:`LedgerStore`.

    ``lease``: seconds an owner holds a started execution without renewing it; the ledger
    renews it every ``lease / 3`` while the body runs, so only a dead or stalled process
    loses it. Past it the record is ``unknown``: reconciled, never re-run blindly.
    ``clock``: wall-clock seconds (leases are compared across processes and machines).
    ``confirm``: the confirmation gate for tools that do not name their own.
    """

    def __init__(
        self,
        store: LedgerStore | str | os.PathLike[str],
        *,
        lease: float = 30.0,
        clock: Callable[[], float] = time.time,
        poll: float = 0.01,
        max_poll: float = 0.25,
        tools: Mapping[str, ToolSpec] | None = None,
        confirm: Confirm | None = None,
    ) -> None:
        if isinstance(store, str | os.PathLike):
            from ._sqlite import SQLiteStore

            store = SQLiteStore(store)
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.store: LedgerStore = store
        self.lease = lease
        self.clock = clock
        self.poll = poll
        self.max_poll = max_poll
        self.tools: dict[str, ToolSpec] = dict(tools or {})
        self.confirm = confirm

    # -- configuration ---------------------------------------------------------------

    def tool(
        self,
        name: str,
        *,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
        confirm: Confirm | None = None,
        safe_errors: tuple[type[BaseException], ...] = (),
    ) -> ToolSpec:
        """Declare how a tool is treated (see :class:`ToolSpec`)."""
        spec = ToolSpec(idempotent=idempotent, reconcile=reconcile, confirm=confirm, safe_errors=safe_errors)
        self.tools[name] = spec
        return spec

    def spec(self, tool: str) -> ToolSpec:
        return self.tools.get(tool, ToolSpec())

    # -- the API ---------------------------------------------------------------------

    def execute(
        self,
        operation_id: str,
        tool: str,
        arguments: Mapping[str, Any] | str,
        *,
        key: str | None = None,
        idempotent: bool | None = None,
        reconcile: Reconcile | None = None,
        confirm: Confirm | None = None,
        wait: float | None = None,
    ) -> Run:
        """``async with ledger.execute(...) as run: if not run.done: ...; run.succeed(result)``.

        ``key``: a business key or tool_call_id; default: the tool and its arguments hash.
        ``wait``: seconds to wait for another owner that is running the same key (None: as
        long as its lease is renewed; 0: not at all) before :class:`StillRunning`.
        """
        if not operation_id:
            raise ValueError("operation_id must be a non-empty string (derive it from the user's action)")
        args = parse_arguments(arguments)
        digest = arguments_hash(args)
        spec = self.spec(tool)
        spec = replace(
            spec,
            idempotent=spec.idempotent if idempotent is None else idempotent,
            reconcile=reconcile or spec.reconcile,
            confirm=confirm or spec.confirm or self.confirm,
        )
        intent = Intent(
            operation_id=operation_id,
            key=key if key is not None else default_key(tool, digest),
            tool=tool,
            args_hash=digest,
            idempotent=spec.idempotent,
        )
        return Run(self, intent, args, spec, wait)

    async def run(
        self,
        operation_id: str,
        tool: str,
        arguments: Mapping[str, Any] | str,
        fn: Callable[[Run], Awaitable[Json]],
        *,
        key: str | None = None,
        idempotent: bool | None = None,
        reconcile: Reconcile | None = None,
        confirm: Confirm | None = None,
        wait: float | None = None,
    ) -> Json:
        """The tool's result, calling ``fn(run)`` only if this action has not run yet.

        ``fn`` gets the :class:`Run` (``run.arguments``, ``run.idempotency_key``) and returns
        the JSON result; it may call ``run.succeed(result, external_ref=...)`` instead. A
        duplicate returns the first result; an exception records ``failed`` and is raised;
        a cancellation or timeout mid-body records ``unknown``.
        """
        bad: Exception | None = None
        async with self.execute(
            operation_id,
            tool,
            arguments,
            key=key,
            idempotent=idempotent,
            reconcile=reconcile,
            confirm=confirm,
            wait=wait,
        ) as run:
            if not run.done:
                value = await fn(run)
                if not run.done:
                    try:
                        run.succeed(value)
                    except (TypeError, ValueError) as exc:  # it happened; only the result is unusable
                        run.succeed(None)
                        bad = exc
        if bad is not None:
            raise LedgerMisuse(f"{tool} returned a result that is not JSON; recorded as null: {bad}") from bad
        return run.result

    async def plan(
        self, operation_id: str, tool: str, arguments: Mapping[str, Any] | str, *, key: str | None = None
    ) -> Execution:
        """Record that the model asked for this call, before anything runs (state ``planned``)."""
        run = self.execute(operation_id, tool, arguments, key=key)
        rec = await self.store.plan(run.intent, now=self.clock())
        if conflicts(rec, run.intent):
            raise KeyConflict(rec, run.intent.tool, run.intent.args_hash)
        return rec

    async def get(self, operation_id: str, key: str) -> Execution | None:
        return await self.store.get(operation_id, key)

    async def records(self, operation_id: str) -> list[Execution]:
        return await self.store.records(operation_id)

    async def recover(self) -> list[Execution]:
        """At start-up: every ``started`` record whose lease ran out becomes ``unknown``."""
        found = await self.store.expire(now=self.clock())
        for rec in found:
            log.warning("ledger: %s was left started (attempt %d); outcome unknown", rec.name, rec.attempts)
        return found

    async def checkpoint(self, task_id: str, state: Json, *, expected_version: int | None = None) -> Checkpoint:
        """Save an agent task's resumable state (JSON) as its next version.

        ``expected_version``: save only if the stored version is still this one (0: none
        yet), so two workers cannot both continue one task; else CheckpointConflict.
        """
        canonical_json(state)
        return await self.store.save_checkpoint(task_id, state, now=self.clock(), expected_version=expected_version)

    async def resume(self, task_id: str) -> TaskState:
        """The task's saved state and its recorded actions, marked as resumed.

        A fallback model continues from ``state.state`` with ``state.results`` (completed
        tool results) instead of starting the task over.
        """
        return await self.task_state(task_id, resumed=True)

    async def task_state(self, task_id: str, *, resumed: bool = False, resumed_from: int | None = None) -> TaskState:
        """What the ledger knows about a task (its operation id), for :func:`side_effect_decision`.

        ``resumed_from``: the checkpoint version the caller's request was built from; the
        task counts as resumed when that version exists.
        """
        records = tuple(await self.store.records(task_id))
        cp = await self.store.load_checkpoint(task_id)
        if resumed_from is not None and cp is not None and 0 < resumed_from <= cp.version:
            resumed = True
        return TaskState(task_id=task_id, records=records, checkpoint=cp, resumed=resumed)

    async def side_effects(
        self, task_id: str, mode: SideEffectMode | str, *, resumed_from: int | None = None
    ) -> SideEffectDecision:
        """Workflow 3 in one call: may a model request of this task be replayed or fall back?

        ``side_effect_decision(mode, await self.task_state(task_id, resumed_from=...))``;
        mode ``none`` reads nothing.
        """
        if SideEffectMode(mode) is SideEffectMode.NONE:
            return side_effect_decision(mode, None)
        return side_effect_decision(mode, await self.task_state(task_id, resumed_from=resumed_from))

    async def aclose(self) -> None:
        await self.store.aclose()

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the machinery ---------------------------------------------------------------

    async def _enter(self, run: Run) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        while True:
            claim = await self.store.claim(run.intent, owner=run._owner, now=self.clock(), lease=self.lease)
            rec = claim.record
            if claim.kind is ClaimKind.RUN:
                run.record, run.attempt, run._running = rec, rec.attempts, True
                run._heartbeat = asyncio.create_task(self._keep_lease(run.intent, run._owner, rec.attempts))
                return
            if claim.kind is ClaimKind.REPLAY:
                self._replayed(run, rec)
                return
            if claim.kind is ClaimKind.FAILED:
                raise ExecutionFailed(rec)
            if claim.kind is ClaimKind.CONFLICT:
                raise KeyConflict(rec, run.intent.tool, run.intent.args_hash)
            if claim.kind is ClaimKind.RESOLVE:
                settled = await self._resolve(run, rec)
                if settled is not None and settled.state is State.SUCCEEDED:
                    self._replayed(run, settled)
                    run.reconciled = True
                    return
                continue  # failed: claim again (a safe failure runs again, another raises)
            await self._wait_busy(run, rec, start)

    def _replayed(self, run: Run, rec: Execution) -> None:
        run.record, run.attempt, run.replayed = rec, rec.attempts, True
        run.result, run.external_ref = rec.result, rec.external_ref

    async def _wait_busy(self, run: Run, rec: Execution, start: float) -> None:
        loop = asyncio.get_running_loop()
        pause = self.poll
        while True:
            waited = loop.time() - start
            if run.wait is not None and waited >= run.wait:
                raise StillRunning(rec, waited)
            step = pause if run.wait is None else min(pause, run.wait - waited)
            await asyncio.sleep(step)
            pause = min(pause * 1.5, self.max_poll)
            cur = await self.store.get(run.intent.operation_id, run.intent.key)
            if cur is None or not cur.uncertain or not cur.lease_live(self.clock()):
                return
            rec = cur

    async def _keep_lease(self, intent: Intent, owner: str, attempt: int) -> None:
        """Renew the lease every lease / 3 until cancelled or lost."""
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                held = await self.store.renew(
                    intent.operation_id, intent.key, owner=owner, attempt=attempt, now=self.clock(), lease=self.lease
                )
            except Exception:
                log.warning(
                    "ledger: renewing the lease of %s/%s failed", intent.operation_id, intent.key, exc_info=True
                )
                continue
            if not held:
                log.warning("ledger: lost the lease of %s/%s (attempt %d)", intent.operation_id, intent.key, attempt)
                return

    async def _stop_heartbeat(self, run: Run) -> None:
        task, run._heartbeat = run._heartbeat, None
        if task is not None:
            await _cancel(task)

    async def _exit(self, run: Run, exc: BaseException | None) -> None:
        if not run._running:
            return  # replayed: nothing to record
        run._running = False
        await self._stop_heartbeat(run)
        misuse = False
        if run._reported:
            outcome = Outcome(state=State.SUCCEEDED, result=run.result, external_ref=run.external_ref)
        elif exc is None:
            misuse = True
            outcome = Outcome(state=State.UNKNOWN, error="the body neither called run.succeed() nor raised")
        elif isinstance(exc, NotExecuted) or (run.spec.safe_errors and isinstance(exc, run.spec.safe_errors)):
            outcome = Outcome(state=State.FAILED, error=_describe(exc), retry_safe=True)
        elif isinstance(exc, MaybeExecuted | TimeoutError) or not isinstance(exc, Exception):
            outcome = Outcome(state=State.UNKNOWN, error=_describe(exc))  # cancelled, timed out, interrupted
        else:
            outcome = Outcome(state=State.FAILED, error=_describe(exc))
        try:
            settled = await _shielded(
                self.store.finish(
                    run.intent.operation_id, run.intent.key, attempt=run.attempt, outcome=outcome, now=self.clock()
                )
            )
        except Exception:
            if exc is None:
                raise
            log.error("ledger: could not record how %r ended", run, exc_info=True)
            return
        if settled is None:
            log.warning("ledger: %r was settled by another owner after its lease ran out", run)
        else:
            run.record = settled
        if misuse:
            raise LedgerMisuse(
                f"{run.tool}: the body of `async with ledger.execute(...)` ended without run.succeed(); "
                f"recorded as unknown"
            )

    async def _resolve(self, run: Run, rec: Execution) -> Execution | None:
        """Reconcile an execution of unknown outcome; None when another owner settled it."""
        beat = asyncio.create_task(self._keep_lease(run.intent, run._owner, rec.attempts))
        try:
            verdict = await self._verdict(run, rec)
        except BaseException:
            await _cancel(beat)
            await _shielded(self._release(run, rec, "interrupted while reconciling"))
            raise
        await _cancel(beat)
        outcome = _outcome(verdict)
        settled = await _shielded(
            self.store.resolve(
                run.intent.operation_id, run.intent.key, owner=run._owner, outcome=outcome, now=self.clock()
            )
        )
        if settled is None:
            return None
        log.info("ledger: %s resolved as %s (%s)", settled.name, verdict.kind.value, verdict.reason)
        if settled.state is State.UNKNOWN:
            raise OutcomeUnknown(settled, verdict.reason or "unresolved")
        return settled

    async def _release(self, run: Run, rec: Execution, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self.store.resolve(
                rec.operation_id,
                rec.key,
                owner=run._owner,
                outcome=Outcome(state=State.UNKNOWN, error=reason),
                now=self.clock(),
            )

    async def _verdict(self, run: Run, rec: Execution) -> Verdict:
        spec = run.spec
        if spec.reconcile is None:
            verdict = Verdict.unknown(f"no reconcile hook for {rec.tool}")
        else:
            try:
                verdict = await spec.reconcile(rec)
            except Exception as exc:
                log.warning("ledger: reconcile of %s raised", rec.name, exc_info=True)
                verdict = Verdict.unknown(f"reconcile raised {_describe(exc)}")
        if verdict.kind is not VerdictKind.UNKNOWN:
            return verdict
        reason = verdict.reason or "unknown"
        if spec.idempotent or rec.idempotent:
            return Verdict.rerun(f"{reason}; {rec.tool} is idempotent, so it runs again")
        if spec.confirm is None:
            return Verdict.unknown(f"{reason}; {rec.tool} is not idempotent and has no confirm gate")
        decided = await spec.confirm(rec, reason)
        if decided.kind is VerdictKind.UNKNOWN:
            return Verdict.unknown(f"{reason}; escalated: {decided.reason or 'the confirm gate did not decide'}")
        return decided


def _outcome(verdict: Verdict) -> Outcome:
    if verdict.kind is VerdictKind.SUCCEEDED:
        return Outcome(state=State.SUCCEEDED, result=verdict.result, external_ref=verdict.external_ref)
    if verdict.kind is VerdictKind.FAILED:
        return Outcome(state=State.FAILED, error=verdict.reason, retry_safe=verdict.safe)
    if verdict.kind in (VerdictKind.NOT_DONE, VerdictKind.RERUN):
        return Outcome(state=State.FAILED, error=f"{verdict.kind.value}: {verdict.reason}", retry_safe=True)
    return Outcome(state=State.UNKNOWN, error=verdict.reason)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _shielded(aw: Awaitable[T]) -> T:
    """Await a store write that must complete even if the caller is cancelled meanwhile."""
    return await asyncio.shield(aw)
