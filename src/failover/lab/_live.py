"""The lab's live view: the gateway's last N finished requests, as metadata, for its admins.

The gateway hands every finished chat request's :class:`~failover.RouteRecord` to
:meth:`LiveRecords.add` (``gateway.lab_live``). Each is turned at once into a *public record*
(:func:`public_record`): an allow-list of metadata (route, targets, models, phases, timings,
outcomes and failure kinds, HTTP statuses, Retry-After, exclusions and their reasons, workflow,
usage, cost) and nothing else. Prompt and answer text never get there, nor does a provider's
own error message (it may quote the request, the answer or part of a key), nor a 200-with-a-
problem's body; every string that is kept passes the gateway's secret scrubber as well.

Memory is bounded twice:

* the buffer keeps the last ``keep`` records (a :class:`collections.deque` with ``maxlen``),
  each serialised once to JSON, with at most :data:`MAX_ITEMS` attempts, waits and exclusions;
* each viewer (a browser on the server-sent event stream) gets a queue of at most
  :data:`VIEWER_QUEUE` records. A viewer that reads slower than requests finish loses the
  queue's oldest records; the stream then sends one fresh snapshot in their place (the burst
  is coalesced, and the page is whole again). At most :data:`MAX_VIEWERS` viewers at once.

Filters (route, outcome, workflow) apply to the snapshot and to the stream alike.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import FailureKind, RouteRecord, Workflow, dumps
from ._custom import BadInput

DEFAULT_KEEP = 200
MAX_KEEP = 5000
MAX_ITEMS = 100  # attempts, waits or exclusions kept per record (max_attempts is at most 100)
VIEWER_QUEUE = 256  # records waiting for one viewer before the oldest are dropped
MAX_VIEWERS = 8
HEARTBEAT_S = 15.0  # an SSE comment when nothing happened for this long: proxies keep the stream
MAX_TEXT = 300  # characters of one kept string (a reason, a request id)

FAILED = "failed"  # the outcome filter for "anything but ok"
OUTCOMES = ("ok", FAILED, "degraded", *(k.value for k in FailureKind), "cancelled", "error")
WORKFLOWS = tuple(w.value for w in Workflow)

Scrub = Callable[[str], str]


def _text(value: str | None, scrub: Scrub) -> str | None:
    if value is None:
        return None
    value = scrub(value)
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "…"


def _num(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def public_record(
    record: RouteRecord,
    *,
    seq: int,
    status: int,
    tenant: str | None,
    stream: bool,
    finished_at: float,
    candidates: Sequence[str] = (),
    scrub: Scrub = lambda s: s,
) -> dict[str, Any]:
    """The metadata of ``record`` the live view may show, as a JSON-ready dict.

    An allow-list, field by field: what is not named here (the provider's message and raw
    detail, a failed answer's body, anything a later version adds to the record) is never shown.
    The ``degraded_reason`` keeps only its failure kind (its message is the provider's).
    ``candidates``: the route's targets in order (primary, then fallbacks) when it ended."""
    attempts = []
    for a in record.attempts[:MAX_ITEMS]:
        f = a.failure
        u = a.usage
        attempts.append(
            {
                "index": a.index,
                "target": _text(a.target, scrub),
                "model": _text(a.model, scrub),
                "phase": a.phase.value,
                "start": _num(a.start),
                "end": _num(a.end),
                "connected": _num(a.connected),
                "first_event": _num(a.first_event),
                "connect_timeout": _num(a.connect_timeout),
                "total_timeout": _num(a.total_timeout),
                "first_event_timeout": _num(a.first_event_timeout),
                "idle_timeout": _num(a.idle_timeout),
                "outcome": _text(a.outcome, scrub),
                "status": a.status,
                "failure": None
                if f is None
                else {
                    "kind": f.kind.value,
                    "phase": f.phase.value if f.phase is not None else None,
                    "status": f.status,
                    "provider_code": _text(f.provider_code, scrub),
                    "retry_after": _num(f.retry_after),
                    "should_retry": f.should_retry,
                },
                "usage": None
                if u is None
                else {
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                    "cached_input_tokens": u.cached_input_tokens,
                    "reasoning_tokens": u.reasoning_tokens,
                },
                "cost": _num(a.cost),
                "cost_estimated": a.cost_estimated,
                "provider_request_id": _text(a.provider_request_id, scrub),
                "hedge": a.hedge,
                "streamed": a.streamed,
                "contract_ok": a.contract_ok,
                "task_ok": a.task_ok,
            }
        )
    v = record.validation
    return {
        "seq": seq,
        "request_id": _text(record.request_id, scrub),
        "route": _text(record.route, scrub),
        "finished_at": round(finished_at, 3),
        "status": status,
        "stream": stream,
        "tenant": _text(tenant, scrub),
        "candidates": [_text(c, scrub) for c in candidates[:MAX_ITEMS]],
        "workflow": record.workflow.value,
        "outcome": _text(record.outcome, scrub),
        "recovered": record.recovered,
        "recovery_reason": _text(record.recovery_reason, scrub),
        "target_used": _text(record.target_used, scrub),
        "elapsed_ms": _num(record.elapsed_ms),
        "added_latency_ms": _num(record.added_latency_ms),
        "total_cost": _num(record.total_cost),
        "degraded": record.degraded,
        "degraded_reason": _text(record.degraded_reason.partition(":")[0], scrub) if record.degraded_reason else None,
        "validation": {"transport": v.transport, "contract": v.contract, "task": v.task},
        "input_tokens_estimated": record.input_tokens_estimated,
        "retry_budget_exhausted": record.retry_budget_exhausted,
        "uncertain_operation": _text(record.uncertain_operation, scrub),
        "attempts": attempts,
        "waits": [
            {"target": _text(w.target, scrub), "start": _num(w.start), "end": _num(w.end), "reason": w.reason}
            for w in record.waits[:MAX_ITEMS]
        ],
        "excluded": [
            {
                "target": _text(e.target, scrub),
                "phase": e.phase.value,
                "code": e.code.value,
                "reason": _text(e.reason, scrub),
                "temporary": e.temporary,
                "replay": e.replay,
            }
            for e in record.excluded[:MAX_ITEMS]
        ],
        "truncated": any(len(items) > MAX_ITEMS for items in (record.attempts, record.waits, record.excluded)),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveFilter:
    """Which records a viewer wants: None matches anything. ``outcome`` ``"failed"`` matches
    every outcome but ``ok``."""

    route: str | None = None
    outcome: str | None = None
    workflow: str | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> LiveFilter:
        """From query parameters; :class:`BadInput` names a bad one and lists the choices."""
        unknown = sorted(set(params) - {"route", "outcome", "workflow"})
        if unknown:
            raise BadInput(unknown[0], "unknown filter; filter by route, outcome or workflow")
        route = params.get("route") or None
        if route is not None and len(route) > MAX_TEXT:
            raise BadInput("route", f"is {len(route)} characters; a route name is shorter")
        outcome = params.get("outcome") or None
        if outcome is not None and outcome not in OUTCOMES:
            raise BadInput("outcome", f"must be one of {', '.join(OUTCOMES)}, got {outcome[:40]!r}")
        workflow = params.get("workflow") or None
        if workflow is not None and workflow not in WORKFLOWS:
            raise BadInput("workflow", f"must be one of {', '.join(WORKFLOWS)}, got {workflow[:40]!r}")
        return cls(route=route, outcome=outcome, workflow=workflow)

    def matches(self, rec: Mapping[str, Any]) -> bool:
        if self.route is not None and rec["route"] != self.route:
            return False
        if self.workflow is not None and rec["workflow"] != self.workflow:
            return False
        if self.outcome is None:
            return True
        outcome = rec["outcome"]
        return bool(outcome != "ok" if self.outcome == FAILED else outcome == self.outcome)


@dataclass(frozen=True, slots=True)
class Entry:
    """One kept record: its public dict and that dict's JSON, made once for every viewer."""

    record: dict[str, Any]
    json: bytes


@dataclass(eq=False, slots=True)
class Viewer:
    """One open stream: the records that matched its filter since it last read, at most
    ``VIEWER_QUEUE`` of them. ``behind`` is set when older ones had to be dropped."""

    filter: LiveFilter
    queue: deque[Entry] = field(default_factory=lambda: deque(maxlen=VIEWER_QUEUE))
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    behind: bool = False
    closed: bool = False

    def push(self, entry: Entry) -> None:
        if len(self.queue) == self.queue.maxlen:
            self.behind = True  # the oldest is dropped: the stream sends a snapshot instead
        self.queue.append(entry)
        self.wake.set()


class TooManyViewers(Exception):
    pass


class LiveRecords:
    """The last ``keep`` finished requests of this gateway process, and who is watching them.

    Everything runs on the gateway's event loop: :meth:`add` is called by the gateway when a
    request ends (quick: one dict and its JSON), streams read with :meth:`watch`."""

    def __init__(
        self,
        keep: int = DEFAULT_KEEP,
        *,
        scrub: Scrub | None = None,
        candidates: Callable[[str], Sequence[str]] | None = None,
    ) -> None:
        """``scrub`` removes secrets from a string; ``candidates`` names a route's targets in order."""
        if not 1 <= keep <= MAX_KEEP:
            raise ValueError(f"keep must be from 1 to {MAX_KEEP}, got {keep}")
        self.keep = keep
        self._scrub: Scrub = scrub or (lambda s: s)
        self._candidates = candidates
        self._entries: deque[Entry] = deque(maxlen=keep)
        self._viewers: set[Viewer] = set()
        self._seq = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def viewers(self) -> int:
        return len(self._viewers)

    def add(self, record: RouteRecord, *, status: int, tenant: str | None, stream: bool) -> None:
        """Keep a finished request (dropping the oldest past ``keep``) and pass it to the viewers."""
        self._seq += 1
        rec = public_record(
            record,
            seq=self._seq,
            status=status,
            tenant=tenant,
            stream=stream,
            finished_at=time.time(),
            candidates=self._candidates(record.route) if self._candidates is not None else (),
            scrub=self._scrub,
        )
        entry = Entry(rec, dumps(rec))
        self._entries.append(entry)
        for v in self._viewers:
            if v.filter.matches(rec):
                v.push(entry)

    def entries(self, flt: LiveFilter = LiveFilter()) -> list[Entry]:
        """The kept records that match, oldest first."""
        return [e for e in self._entries if flt.matches(e.record)]

    def snapshot(self, flt: LiveFilter = LiveFilter()) -> list[dict[str, Any]]:
        return [e.record for e in self.entries(flt)]

    def get(self, request_id: str) -> dict[str, Any] | None:
        """The newest kept record of ``request_id``; None once it has left the buffer."""
        return next((e.record for e in reversed(self._entries) if e.record["request_id"] == request_id), None)

    def subscribe(self, flt: LiveFilter) -> Viewer:
        if len(self._viewers) >= MAX_VIEWERS:
            raise TooManyViewers(f"{MAX_VIEWERS} live viewers are open already; close one")
        viewer = Viewer(flt)
        self._viewers.add(viewer)
        return viewer

    def unsubscribe(self, viewer: Viewer) -> None:
        self._viewers.discard(viewer)

    def close(self) -> None:
        """End every open stream (the gateway is draining); new ones may still open."""
        for v in self._viewers:
            v.closed = True
            v.wake.set()
        self._viewers.clear()

    async def watch(self, viewer: Viewer, *, heartbeat: float = HEARTBEAT_S) -> bytes | None:
        """Wait for the viewer's next batch: SSE text to send, or None when the stream must end.

        A viewer that fell behind gets one ``snapshot`` event (the buffer as it is now) in place
        of what it missed; otherwise one ``record`` event per record, oldest first. After
        ``heartbeat`` seconds with nothing, an SSE comment keeps the connection alive."""
        if not viewer.queue and not viewer.closed:
            try:
                await asyncio.wait_for(viewer.wake.wait(), heartbeat)
            except TimeoutError:
                return b": keep-alive\n\n"
        viewer.wake.clear()
        if viewer.closed:
            return None
        if viewer.behind:
            viewer.behind = False
            viewer.queue.clear()
            return snapshot_event(self.entries(viewer.filter), self.keep)
        batch = b"".join(b"event: record\ndata: " + e.json + b"\n\n" for e in viewer.queue)
        viewer.queue.clear()
        return batch


def snapshot_event(entries: list[Entry], keep: int) -> bytes:
    """One SSE ``snapshot`` event: ``{"keep": N, "records": [...]}``, oldest first."""
    return b'event: snapshot\ndata: {"keep":%d,"records":[%b]}\n\n' % (keep, b",".join(e.json for e in entries))


__all__ = [
    "DEFAULT_KEEP",
    "FAILED",
    "MAX_KEEP",
    "MAX_VIEWERS",
    "OUTCOMES",
    "VIEWER_QUEUE",
    "WORKFLOWS",
    "Entry",
    "LiveFilter",
    "LiveRecords",
    "TooManyViewers",
    "Viewer",
    "public_record",
    "snapshot_event",
]
