"""The errors failover raises.

FailoverError
 +-- Unavailable        no acceptable result within the envelope; carries the RouteRecord
 +-- ConfigError        a bad routes/targets file or object; names the field and the fix
 +-- UnknownRoute       complete() was called with a route name that is not configured
 +-- InvalidRequest     a Request no provider can be sent (text that is not valid Unicode)
"""

from __future__ import annotations

from ._failure import FailureKind
from ._record import RouteRecord


class FailoverError(Exception):
    """Base of every error failover raises on purpose."""


class Unavailable(FailoverError):
    """No acceptable result within the request's deadline, attempts, cost and contract.

    ``retryable`` says whether asking again later may succeed; ``retry_after_ms`` is the
    soonest that is worth it when a provider said so. No text is ever returned with it.
    """

    def __init__(
        self,
        reason: FailureKind,
        message: str,
        *,
        retryable: bool,
        request_id: str,
        record: RouteRecord,
        retry_after_ms: int | None = None,
    ) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.retryable = retryable
        self.retry_after_ms = retry_after_ms
        self.request_id = request_id
        self.record = record

    def __repr__(self) -> str:
        return (
            f"Unavailable(reason={self.reason.value!r}, retryable={self.retryable}, "
            f"retry_after_ms={self.retry_after_ms}, request_id={self.request_id!r})"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "status": "unavailable",
            "reason": self.reason.value,
            "message": self.message,
            "retryable": self.retryable,
            "retry_after_ms": self.retry_after_ms,
            "request_id": self.request_id,
        }


class ConfigError(FailoverError, ValueError):
    """A configuration problem. ``field`` is a dotted path such as ``routes.triage.primary``."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        super().__init__(f"{field}: {problem}. Fix: {fix}")
        self.field = field
        self.problem = problem
        self.fix = fix


class InvalidRequest(FailoverError, ValueError):
    """A Request that cannot be sent to any provider. ``field`` is its path, such as
    ``messages[0].content[0].text``; nothing was sent and nothing was charged."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        super().__init__(f"{field}: {problem}. Fix: {fix}")
        self.field = field
        self.problem = problem
        self.fix = fix


class UnknownRoute(FailoverError, KeyError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown route {name!r}; configured routes: {', '.join(sorted(known)) or '(none)'}")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])
