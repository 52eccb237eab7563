"""What the stream parsers share: their base, reading one event's JSON and the stream-level Failures.

Everything a provider's answer MEANS (usage, stop reasons, refusals, tool arguments, error
classification) stays in the dialect modules and is shared with their non-streaming parse;
this module only knows about streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ..model import Failure, FailureKind, NonFiniteNumber, Response, StreamEvent, Target, loads_strict
from ..transport import HttpResponse
from ._base import StreamFailed
from ._common import DETAIL_LIMIT, outcome_failure, redact
from ._headers import HeaderMeta

__all__ = [
    "EMPTY",
    "INCOMPLETE",
    "ParserBase",
    "event_response",
    "incomplete",
    "load_event",
    "malformed",
    "with_partial",
]

EMPTY: Final[tuple[StreamEvent, ...]] = ()  # what ``feed`` returns for pings and role-only chunks
INCOMPLETE: Final = "stream ended before completion"
_EXCERPT = 120


class ParserBase:
    """What every dialect's stream parser is made with: the target it reads for, the answer's
    headers, and what they said (request id, rate limits)."""

    __slots__ = ("_headers", "_meta", "_target")

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        self._target = target
        self._headers = headers
        self._meta = meta


def load_event(data: str, provider: str, target: Target, meta: HeaderMeta) -> dict[str, Any]:
    """The JSON object in one event's data; StreamFailed (provider_server_error) if it is not
    one, also for NaN or Infinity in it (strict JSON: never forwarded)."""
    try:
        value = loads_strict(data)
    except NonFiniteNumber as exc:
        raise malformed(data, provider, target, meta, f"{exc.token} is not a JSON number") from None
    except (ValueError, RecursionError) as exc:
        raise malformed(data, provider, target, meta, str(exc)) from None
    if not isinstance(value, dict):
        raise malformed(data, provider, target, meta, f"expected a JSON object, got {type(value).__name__}")
    return value


def malformed(data: str, provider: str, target: Target, meta: HeaderMeta, why: str) -> StreamFailed:
    text = redact(data, target)
    excerpt = " ".join(text.split())
    if len(excerpt) > _EXCERPT:
        excerpt = excerpt[:_EXCERPT] + "…"
    failure = Failure(
        kind=FailureKind.PROVIDER_SERVER_ERROR,
        message=f"{provider} 200: malformed stream event ({why}): {excerpt}",
        status=200,
        retry_after=meta.retry_after,
        should_retry=meta.should_retry,
        provider_request_id=meta.request_id,
        rate_limits=meta.rate_limits,
        detail=text if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT] + "…",
    )
    return StreamFailed(failure)


def event_response(data: str, headers: Mapping[str, str], status: int = 200) -> HttpResponse:
    """An error event seen as an HTTP response, so the dialect's error classifier reads it as is."""
    return HttpResponse(status=status, headers=headers, body=data.encode("utf-8"))


def incomplete(provider: str, partial: Response, meta: HeaderMeta) -> Failure:
    """The body ended before the dialect's terminal event: the request may be replayed."""
    return outcome_failure(
        provider=provider,
        kind=FailureKind.TRANSPORT_TRANSIENT,
        why=INCOMPLETE,
        result=partial,
        status=200,
        meta=meta,
        code=None,
    )


def with_partial(failure: Failure, partial: Response) -> Failure:
    """A mid-stream error Failure that also keeps what had arrived before it (for the trace)."""
    return replace(failure, response=partial)
