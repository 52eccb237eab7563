"""The stream relay: one SSE answer fed by ``Router.stream`` (:class:`StreamReply`), written in
a dialect's format by its :class:`SseWire`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from starlette.types import Receive, Scope, Send

from ..inbound import RelayMismatch, Shape, capped_to, mismatch_message, record_headers, streamed_by, unavailable
from ..model import Completed, PartialOutput, Request, RouteRecord, Unavailable
from ..router import RouteStream, Vetted
from ._disconnect import Disconnect, Interrupted, gone_note, interruptible
from ._errors import ApiError, error_response, shutting_down
from ._exchange import Exchange
from ._gateway import Gateway
from ._logs import internal_error

log = logging.getLogger("failover.gateway")


class SseWire(Protocol):
    """What one dialect writes on an SSE answer: bytes for the start, each stream event, the
    end, a failure after the first byte (``partial`` for a cut answer, ``failure`` for anything
    else), and the client shape of its error answer before the first byte. ``start`` gets the model that answers
    (see :func:`~failover.inbound._headers.streamed_by`), which every event that names a model carries from then on."""

    headers: Mapping[str, str]  # extra response headers for the stream
    shape: Shape  # how a failure before the first byte is answered (see inbound._failures)

    def start(self, model: str) -> bytes: ...

    def render(self, event: object) -> bytes: ...

    def end(self, done: Completed) -> bytes: ...

    def failure(self, code: str, message: str) -> bytes: ...

    def partial(self, event: PartialOutput, message: str) -> bytes: ...


class StreamReply:
    """One SSE answer fed by ``Router.stream``, in the format of its :class:`SseWire`.

    Nothing is sent until the router passes its commit point (the first content event): a
    failure before it is an ordinary error response with its status. After it, a failure ends
    the stream with one error event, never a splice. A client disconnect at any moment closes
    the RouteStream, which closes the upstream stream at once.
    """

    def __init__(
        self, gw: Gateway, ex: Exchange, request: Request, wire: SseWire, live_reasoning: bool = False
    ) -> None:
        self.gw = gw
        self.ex = ex
        self.live_reasoning = live_reasoning
        self.router = ex.router
        self.route, self.envelope, self.stop = ex.admitted()
        self.request = request
        self.sent_headers = False
        self.wire = wire
        self.gone: asyncio.Future[None] | None = None  # resolves when the client is gone
        self.raw_reasoning: str | None = None  # the reasoning format the client is handed raw (see inbound._origins)
        self.vetted: Vetted | None = None  # what the gateway already checked and counted of the request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the client has every delta already: the router need not keep the text for PartialOutput
        rs = self.router.stream(
            self.route,
            self.request,
            self.envelope,
            keep_text=False,
            live_reasoning=self.live_reasoning,
            vetted=self.vetted,
        )
        await rs.__aenter__()
        gone = Disconnect(scope, receive)
        self.gone = gone.future
        # The pump runs in this task (no task of its own, no wait on three futures): a client
        # that leaves or the drain cancels it where it is awaiting.
        outcome: Interrupted | None = None
        try:
            with contextlib.suppress(OSError):  # a send to a closed socket: the client is gone
                outcome = await interruptible(self._pump(rs, scope, receive, send), scope, receive, self.stop, gone)
        finally:
            client_left = gone.future.done()  # (before closing it: a closed watch is done too)
            await rs.aclose()  # closes the upstream stream now, whatever state it is in
            await gone.aclose()
        if outcome is None:
            return
        if not self.ex.status:  # (set: the pump had ended the request itself when it was cut)
            drained = outcome.reason == "drain" or (outcome.outer is not None and self.stop.done())
            if drained and not client_left:
                await self._cut(scope, receive, send)
            else:  # the record's outcome is "cancelled": the stream was cut when the client left
                self.gw.finish(self.ex, 499, record=rs.record, note=gone_note(scope))
        if outcome.outer is not None:
            raise outcome.outer  # the server cancelled this request: it still is

    async def _cut(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The drain timed out on this stream: end it cleanly (an error event, or a 503 before any byte)."""
        gw = self.gw
        gw.finish(self.ex, 503, code="shutting_down", note="cut by shutdown drain; upstream stream closed")
        with contextlib.suppress(OSError, RuntimeError):
            if self.sent_headers:
                event = self.wire.failure(
                    "shutting_down",
                    f"the gateway shut down before the stream ended (request id {self.envelope.request_id})",
                )
                await send({"type": "http.response.body", "body": event, "more_body": False})
            else:
                response = error_response(shutting_down(), self.wire.shape, request_id=self.envelope.request_id)
                await response(scope, receive, send)

    async def _start(self, send: Send, target: str | None, capped: int | None = None) -> None:
        """The response head, sent with the first event: past the commit point, so the target
        whose answer follows is known (and the max_tokens it was sent, when ``capped``)."""
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
            **record_headers(self.envelope.request_id, None),
            "x-failover-route": self.route,
            **({"x-failover-target": target} if target else {}),
            **({"x-failover-max-tokens": str(capped)} if capped is not None else {}),
            **self.wire.headers,
        }
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        self.sent_headers = True

    async def _pump(self, rs: RouteStream, scope: Scope, receive: Receive, send: Send) -> None:
        gw = self.gw
        events: AsyncIterator[object] = aiter(rs)
        try:
            first = await anext(events)
        except StopAsyncIteration:
            first = None
        except Unavailable as exc:
            err = unavailable(exc, self.wire.shape, gw.scrub)
            response = error_response(err, self.wire.shape, request_id=exc.request_id, record=exc.record)
            self.ex.request_id = exc.request_id
            # the shape's status: Anthropic's overload is 529
            gw.finish(self.ex, response.status_code, record=exc.record, note=exc.reason.value, code=err.code)
            await response(scope, receive, send)
            return
        except Exception as exc:
            log.error("internal error on stream %s: %s", self.envelope.request_id, internal_error(exc, gw.scrub))
            err = ApiError(500, f"internal gateway error (request id {self.envelope.request_id})", type="server_error")
            gw.finish(self.ex, 500, note=f"internal error {type(exc).__name__}")
            await error_response(err, self.wire.shape, request_id=self.envelope.request_id)(scope, receive, send)
            return
        shown, capped = rs.target, rs.max_tokens_capped_to
        if isinstance(first, Completed):  # the first event ends it: its record names who answered
            done = first.response.record
            shown = done.target_used if done is not None else None
            capped = capped_to(done) if done is not None else None
        await self._start(send, shown, capped)
        wire = self.wire
        body = wire.start(streamed_by(first, rs.model, self.route))
        status_note = ""
        record: RouteRecord | None = None
        try:
            event: object = first
            while event is not None:
                if isinstance(event, Completed):
                    record = event.response.record
                    gw.origins.remember(event, self.raw_reasoning)
                    body += wire.end(event)
                    break
                if isinstance(event, PartialOutput):
                    record = event.record
                    gw.origins.remember(event, self.raw_reasoning)
                    status_note = f"partial_output after output began: {event.failure.label}"
                    body += wire.partial(
                        event,
                        f"partial_output: the stream was cut after output began ({event.failure.label}); "
                        f"nothing was spliced on (request id {self.envelope.request_id})",
                    )
                    break
                body += wire.render(event)
                if body and not rs.ready:  # events that came together leave together: one write
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    body = b""
                event = await anext(events, None)
        except Unavailable as exc:  # not expected after the commit point; still never a splice
            record = exc.record
            status_note = exc.reason.value
            body += wire.failure(exc.reason.value, gw.scrub(f"{exc.reason.value}: {exc.message}"))
        except RelayMismatch as exc:  # a dialect's answer changed under what was sent: say so, never hide it
            status_note = f"stream_mismatch: {exc}"
            log.error("stream %s: %s", self.envelope.request_id, status_note)
            body += wire.failure("stream_mismatch", mismatch_message(exc, self.envelope.request_id))
        except Exception as exc:
            status_note = f"internal error {type(exc).__name__}"
            log.error("internal error on stream %s: %s", self.envelope.request_id, internal_error(exc, gw.scrub))
            body += wire.failure("internal_error", f"internal gateway error (request id {self.envelope.request_id})")
        await send({"type": "http.response.body", "body": body, "more_body": False})
        status = 200
        gone = self.gone
        if gone is not None and gone.done():  # the sends since the client left went nowhere
            status, status_note = 499, gone_note(scope)
        gw.finish(self.ex, status, record=record, note=status_note)


__all__ = ["SseWire", "StreamReply"]
