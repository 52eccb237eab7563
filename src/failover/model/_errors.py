"""The errors failover raises.

FailoverError
 +-- Unavailable        no acceptable result within the envelope; carries the RouteRecord
 +-- ConfigError        a bad config file or object: every problem (ConfigProblem), each naming
 |                      the field, where it is in the file, and the fix
 +-- UnknownRoute       complete() was called with a route name that is not configured
 +-- InvalidRequest     a Request no provider can be sent (text that is not valid Unicode)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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


Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigProblem:
    """One finding about a config file: its dotted ``field`` (``routes.triage.primary[1]``),
    what is wrong, the fix, and, when it came from a file, the line and column (1-based).

    ``str()`` is one line, ``file:line:column: [warning: ]field: problem. Fix: fix``, the form
    compilers use, so editors and CI logs can jump to it."""

    field: str
    problem: str
    fix: str
    severity: Severity = "error"
    source: str | None = None  # the file it is in
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.line is not None:
            where = f"{self.source or '<config>'}:{self.line}:{self.column or 1}: "
        elif self.source is not None:
            where = f"{self.source}: "
        level = "warning: " if self.severity == "warning" else ""
        return f"{where}{level}{self.field}: {self.problem}. Fix: {self.fix}"


class ConfigError(FailoverError, ValueError):
    """A configuration problem. ``field`` is a dotted path such as ``routes.triage.primary``.

    A file with several problems raises one ConfigError listing all of them, one per line
    (``problems``); ``field``, ``problem`` and ``fix`` are then the first one's."""

    def __init__(self, field: str, problem: str, fix: str, *, problems: Sequence[ConfigProblem] = ()) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        self.problems: tuple[ConfigProblem, ...] = tuple(problems) or (
            ConfigProblem(field=field, problem=problem, fix=fix),
        )
        if len(self.problems) == 1:
            super().__init__(str(self.problems[0]))
        else:
            lines = "\n".join(str(p) for p in self.problems)
            super().__init__(f"{len(self.problems)} problems:\n{lines}")

    @classmethod
    def of(cls, problems: Sequence[ConfigProblem]) -> ConfigError:
        """One error for every problem in ``problems`` (errors only; at least one)."""
        first = problems[0]
        return cls(first.field, first.problem, first.fix, problems=problems)


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
