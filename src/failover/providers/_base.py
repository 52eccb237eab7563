"""What every dialect provides: build a request, parse or classify a response or a stream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..model import Failure, Request, Response, StreamEvent, Target
from ..transport import HttpRequest, HttpResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class SSEEvent:
    """One server-sent event, decoded by the event-stream rules."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


@dataclass(frozen=True, slots=True)
class SSEComment:
    """A comment line (``: keep-alive``): no content, but proof the connection is alive."""

    text: str = ""


class StreamFailed(Exception):
    """Raised by a StreamParser when the stream itself reports or reveals a failure
    (a mid-stream ``event: error``, an unparseable event)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class StreamParser(Protocol):
    """Turns one response's SSE events into normalized stream events, then a Response.

    ``feed`` is called once per SSE event in order and returns the events for the caller
    (possibly none: pings, role-only chunks). ``finish`` is called when the body ended and
    returns the assembled Response (or a Failure: truncation, refusal, content filter,
    malformed tool arguments, a stream that ended without its terminal event). It must be
    cheap: it runs for every event of every stream.
    """

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]: ...

    def finish(self) -> Response | Failure: ...


class StreamDecoder(Protocol):
    """Bytes of one streamed body in, events out: :class:`~._sse.SSEDecoder` for
    ``text/event-stream``, or a dialect's own framing (Bedrock's AWS event stream) decoded
    into the same :class:`SSEEvent` objects, so a :class:`StreamParser` never sees the framing.

    ``feed`` is called per chunk as it arrives (any boundary); ``flush`` once at the end of
    the body. An event larger than the decoder's limit raises ``EventTooLarge``.
    """

    def feed(self, chunk: bytes) -> list[SSEEvent | SSEComment]: ...

    def flush(self) -> list[SSEEvent | SSEComment]: ...


class DialectAdapter(Protocol):
    """One wire dialect. The ONE place where a provider's format and errors are known.

    A dialect whose streams are not ``text/event-stream`` also defines
    ``stream_decoder(limit) -> StreamDecoder`` (see :func:`~._sse.stream_decoder`); the
    others are read with :class:`~._sse.SSEDecoder`.
    """

    name: str
    # the reasoning format this dialect reads and writes (see failover.model.Reasoning):
    # history blocks of another format, from no known target, are not sent to it
    reasoning_source: str

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        """The HTTP request for ``request`` against ``target`` (model, URL, credential)."""
        ...

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        """A Response for an acceptable 200; a classified Failure for anything else.

        A 200 can be a Failure: truncation, refusal, content filter, a prompt block, or
        malformed tool-call arguments. Such a Failure keeps the Response and usage.
        """
        ...

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        """A parser for one 200 streaming response (``headers`` give the request id)."""
        ...
