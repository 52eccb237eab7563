"""What a fake provider records of each request it received, and what became of it.

A :class:`ReceivedCall` is an immutable record (credentials in its headers and query read
``***``); its :class:`Outcome` says how the call ended. While a call is being answered, its
``_Slot`` keeps the record made on arrival plus what changed since (status, outcome, loop
times, stream events sent), and builds the current record only when someone reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from ._kinds import ReplyKind
from ._reply import Reply

__all__ = ["Outcome", "ReceivedCall", "redact_headers", "redact_query"]


class Outcome(StrEnum):
    """What became of one received call."""

    PENDING = "pending"  # still being answered (a delay, a hang)
    COMPLETED = "completed"  # the whole answer was delivered
    CLIENT_DISCONNECTED = "client_disconnected"  # the client went away (timeout, cancel, close) first
    RESET = "reset"  # the fake closed the connection without answering, as scripted
    CONNECT_FAILED = "connect_failed"  # a scripted connect_error: the request never arrived
    ABORTED = "aborted"  # the fake server itself shut down mid-answer


_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "x-amz-security-token"}
)
_SECRET_QUERY = re.compile(r"(?i)(^|&)(key|api[-_]?key|access_token)=[^&]*")


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names lower-cased; credential values replaced by ``***``."""
    return {k.lower(): ("***" if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()}


def redact_query(query: str) -> str:
    return _SECRET_QUERY.sub(lambda m: f"{m.group(1)}{m.group(2)}=***", query) if query else query


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedCall:
    """One request a fake provider received, and what became of it.

    ``time`` is the loop time the request arrived; ``answered_at`` the loop time the whole
    answer was delivered; ``disconnected_at`` the loop time the client went away before
    that (or the fake dropped the connection). ``kind`` is the reply it was given (None for
    a request outside the script: an unknown path or a token-count call). ``events_sent``
    counts the stream events delivered (keep-alives not included; an answer that is not a
    stream counts as one event once sent). Credentials in ``headers`` and ``query`` read ``***``.
    """

    provider: str
    index: int  # 0-based, per provider, in arrival order
    time: float
    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Mapping[str, Any] | None = None
    model: str | None = None
    stream: bool = False
    kind: ReplyKind | None = None
    reply: Reply | None = field(default=None, repr=False)
    scripted: bool = False  # True when the reply came from the script (not a validation error)
    status: int | None = None  # the HTTP status answered (None: no answer was sent)
    outcome: Outcome = Outcome.PENDING
    answered_at: float | None = None
    disconnected_at: float | None = None
    events_sent: int = 0

    @property
    def ended_at(self) -> float | None:
        """When the call ended, whichever way."""
        return self.answered_at if self.answered_at is not None else self.disconnected_at

    @property
    def duration(self) -> float | None:
        end = self.ended_at
        return None if end is None else end - self.time

    def __repr__(self) -> str:
        what = self.kind.value if self.kind is not None else "unscripted"
        end = ""
        if self.answered_at is not None:
            end = f" answered_at={self.answered_at:g}"
        elif self.disconnected_at is not None:
            end = f" disconnected_at={self.disconnected_at:g}"
        status = f" {self.status}" if self.status is not None else ""
        events = f" events={self.events_sent}" if self.stream else ""
        return (
            f"<ReceivedCall {self.provider}#{self.index} t={self.time:g} {self.method} {self.path}"
            f" {what}{status} {self.outcome.value}{end}{events}>"
        )


class _Slot:
    """The live state of one received call. Records are immutable, so the slot keeps the
    record made on arrival plus what changed since, and builds the current record only
    when someone reads it (the hot path never pays for ``dataclasses.replace``)."""

    __slots__ = ("_base", "_cached", "answered_at", "disconnected_at", "events_sent", "outcome", "status")

    def __init__(self, base: ReceivedCall) -> None:
        self._base = base
        self._cached: ReceivedCall | None = base
        self.status: int | None = None
        self.outcome = Outcome.PENDING
        self.answered_at: float | None = None
        self.disconnected_at: float | None = None
        self.events_sent = 0

    def update(
        self,
        *,
        status: int | None = None,
        outcome: Outcome | None = None,
        answered_at: float | None = None,
        disconnected_at: float | None = None,
        events_sent: int | None = None,
    ) -> None:
        if status is not None:
            self.status = status
        if outcome is not None:
            self.outcome = outcome
        if answered_at is not None:
            self.answered_at = answered_at
        if disconnected_at is not None:
            self.disconnected_at = disconnected_at
        if events_sent is not None:
            self.events_sent = events_sent
        self._cached = None

    @property
    def record(self) -> ReceivedCall:
        cached = self._cached
        if cached is None:
            cached = self._cached = replace(
                self._base,
                status=self.status,
                outcome=self.outcome,
                answered_at=self.answered_at,
                disconnected_at=self.disconnected_at,
                events_sent=self.events_sent,
            )
        return cached
