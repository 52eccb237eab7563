"""One SDK request in, one answer out, the same for the sync and the async client: the wire
dialect and the body, the route and the envelope, then ``Router.complete`` or ``Router.stream``;
errors as the status that makes the SDK raise its own exception class, secrets scrubbed."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..inbound import (
    Origins,
    RelayMismatch,
    Scrubber,
    WireError,
    answered_by,
    capped_to,
    envelope_with_headers,
    failures,
    live_reasoning,
    mismatch_message,
    record_headers,
    streamed_by,
    with_affinity,
)
from ..model import (
    Completed,
    Envelope,
    InvalidRequest,
    PartialOutput,
    RouteRecord,
    SideEffectMode,
    Unavailable,
    UnknownRoute,
    new_id,
)
from ..model import dumps as _dumps
from ..router import Router, RouteStream
from ._sdk_wire import SUPPORTED, WIRES, Call, Wire, WireDialect, dialect_of, error_dialect

log = logging.getLogger("failover.integrations")

RecordHook = Callable[[RouteRecord], None]

LAST_RECORD: contextvars.ContextVar[RouteRecord | None] = contextvars.ContextVar("failover_last_record", default=None)


def last_record() -> RouteRecord | None:
    """The RouteRecord of the last call made through a failover httpx client in this context.

    Set when a plain call returns or raises, and when a stream ends (its last event is read
    or it is closed); ``None`` before the first call. Async code sees the record of its own
    task's last call; with the sync client, the calling thread's.
    """
    return LAST_RECORD.get()


# -- answers ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plain:
    status: int
    headers: dict[str, str]
    body: bytes


class Streamed:
    """An SSE answer: the router stream, its first event already read, rendered chunk by chunk."""

    def __init__(self, headers: dict[str, str], chunks: AsyncIterator[bytes], stream: RouteStream) -> None:
        self.headers = headers
        self.chunks = chunks
        self.stream = stream

    async def aclose(self) -> None:
        """Close the router stream (and the upstream exchange), then the renderer."""
        try:
            await self.stream.aclose()
        finally:
            with contextlib.suppress(Exception):
                await cast(Any, self.chunks).aclose()


Answer = Plain | Streamed


# -- Unavailable -> status ------------------------------------------------------------------------


def status_for(exc: Unavailable, dialect: WireDialect) -> int:
    """The HTTP status an Unavailable is answered with (the SDK picks its exception class by it):
    the in-process column of :data:`failover.inbound._failures.TABLE`, which says why it differs
    from the gateway's."""
    return failures.status_for(exc, WIRES[dialect].shape)


# -- the envelope of one call -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    route: str | None
    envelope: Envelope
    max_deadline_ms: int
    max_attempts_limit: int
    on_record: RecordHook | None


def envelope_template(
    envelope: Envelope | None,
    *,
    deadline: float | None,
    max_attempts: int | None,
    max_cost: float | None,
    allow_failover: bool | None,
    allow_fallback: bool | None,
    side_effects: SideEffectMode | str | None,
    tenant: str | None,
) -> Envelope:
    """The envelope every call starts from: ``envelope`` (or the defaults) with the keywords applied."""
    env = envelope if envelope is not None else Envelope()
    changes: dict[str, Any] = {}
    if deadline is not None:
        if not (isinstance(deadline, int | float) and math.isfinite(deadline) and deadline > 0):
            raise ValueError(f"deadline: {deadline!r} is not a positive number of seconds; pass e.g. deadline=30")
        changes["budget"] = float(deadline)
    if max_attempts is not None:
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts: {max_attempts!r} is not a whole number >= 1; pass e.g. max_attempts=4")
        changes["max_attempts"] = max_attempts
    if max_cost is not None:
        if not (math.isfinite(max_cost) and max_cost > 0):
            raise ValueError(f"max_cost: {max_cost!r} is not a positive number of USD; pass e.g. max_cost=0.05")
        changes["max_cost"] = max_cost
    if allow_failover is not None:
        changes["allow_failover"] = allow_failover
    if allow_fallback is not None:
        changes["allow_fallback"] = allow_fallback
    if side_effects is not None:
        try:
            changes["side_effects"] = SideEffectMode(side_effects)
        except ValueError:
            choices = ", ".join(m.value for m in SideEffectMode)
            raise ValueError(f"side_effects: {side_effects!r} is not one of {choices}") from None
    if tenant is not None:
        changes["tenant"] = tenant
    return dataclasses.replace(env, **changes) if changes else env


# -- the core: one SDK request in, one answer out (the same for sync and async) ---------------------


@dataclass(frozen=True, slots=True)
class _Prepared:
    wire: Wire
    call: Call
    route: str
    envelope: Envelope
    live_reasoning: bool = False  # x-failover-live-reasoning: a stream's reasoning as it comes


class Core:
    def __init__(self, router: Router, options: Options) -> None:
        self.router = router
        self.options = options
        self.scrub = Scrubber.of(router.routes.values())
        self._warned_retries = False
        self.origins = Origins()  # who wrote the reasoning handed out raw: kept from another model

    def _error(
        self,
        wire: Wire,
        status: int,
        message: str,
        *,
        code: str | None,
        param: str | None = None,
    ) -> Plain:
        """An error answer, rendered for the wire's SDK (see :mod:`failover.inbound._failures`)."""
        return self._plain(failures.problem(status, message, wire.shape, code=code, param=param), wire)

    def _plain(
        self, err: WireError, wire: Wire, request_id: str | None = None, record: RouteRecord | None = None
    ) -> Plain:
        out = failures.render(err, wire.shape, request_id=request_id, record=record)
        return Plain(out.status, {"content-type": "application/json", **out.headers}, _dumps(out.body))

    def _unavailable(self, wire: Wire, exc: Unavailable) -> Plain:
        err = failures.unavailable(exc, wire.shape, self.scrub)
        return self._plain(err, wire, exc.request_id, exc.record)

    def _done(self, record: RouteRecord | None) -> None:
        if record is None:
            return
        LAST_RECORD.set(record)
        hook = self.options.on_record
        if hook is not None:
            try:
                hook(record)
            except Exception:  # a broken hook must not break the answer
                log.exception("on_record hook failed for request %s", record.request_id)

    def _check_retry(self, headers: Mapping[str, str]) -> None:
        retries = headers.get("x-stainless-retry-count", "0")
        if retries not in {"", "0"} and not self._warned_retries:
            self._warned_retries = True
            log.warning(
                "the SDK is retrying a call that failover already retried (x-stainless-retry-count=%s); "
                "create the SDK client with max_retries=0 so retries do not nest",
                retries,
            )

    def prepare(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Plain | _Prepared:
        """Everything before the router: the dialect, the body, the route, the envelope; or an error answer."""
        wire_name = dialect_of(path)
        if wire_name is None:
            wire = WIRES[error_dialect(path, headers)]
            return self._error(
                wire,
                404,
                f"{method} {path} is not served by failover's drop-in client; it serves {SUPPORTED}. "
                "Pass fallthrough=<an httpx transport> to httpx_client() to send other paths to the provider",
                code="unsupported_path",
            )
        wire = WIRES[wire_name]
        if method != "POST":
            return self._error(wire, 405, f"use POST for {path}", code="method_not_allowed")
        self._check_retry(headers)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            return self._error(wire, 400, f"request body is not valid JSON: {exc}", code="invalid_json")
        try:
            call = wire.parse(data, headers)
            call = dataclasses.replace(call, request=self.origins.known(call.request))
            route = self.options.route if self.options.route is not None else call.model
            self.router.route(route)
            env = dataclasses.replace(self.options.envelope, request_id=new_id("req_"))
            env = envelope_with_headers(
                env,
                headers,
                max_deadline_ms=self.options.max_deadline_ms,
                max_attempts_limit=self.options.max_attempts_limit,
            )
            env = with_affinity(env, headers, call.request)
            live = live_reasoning(headers)
        except WireError as err:
            return self._error(wire, err.status, err.message, code=err.code, param=err.param)
        except UnknownRoute:
            known = ", ".join(sorted(self.router.routes)) or "(none)"
            return self._error(
                wire,
                404,
                f"the model {call.model!r} does not name a route of this router ({known}); "
                "pass model=<route name>, or httpx_client(router, route=...)",
                code="model_not_found",
                param="model",
            )
        return _Prepared(wire, call, route, env, live)

    async def answer(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        prepared = self.prepare(method, path, headers, body)
        if isinstance(prepared, Plain):
            return prepared
        wire, call, route, env = prepared.wire, prepared.call, prepared.route, prepared.envelope
        try:
            if call.stream:
                return await self._stream(wire, call, route, env, prepared.live_reasoning)
            return await self._complete(wire, call, route, env)
        except InvalidRequest as exc:  # the Router refused the text before any attempt
            return self._error(wire, 400, str(exc), code="invalid_unicode", param=exc.field)
        except Exception as exc:
            # A bug of ours, not a network problem: raised from the transport it would become
            # the SDK's APIConnectionError, which the SDK retries. A 500 it does not retry.
            log.exception("internal error on route %s request %s", route, env.request_id)
            message = f"internal error in failover: {type(exc).__name__} (request id {env.request_id}); see the log"
            return self._error(wire, 500, message, code="internal_error")

    async def _complete(self, wire: Wire, call: Call, route: str, env: Envelope) -> Answer:
        try:
            resp = await self.router.complete(route, call.request, env)
        except Unavailable as exc:
            self._done(exc.record)
            return self._unavailable(wire, exc)
        record = resp.record
        self._done(record)
        self.origins.remember(resp, wire.raw_reasoning)
        request_id = record.request_id if record is not None else env.request_id
        headers = {"content-type": "application/json", **record_headers(request_id, record)}
        return Plain(200, headers, _dumps(wire.body(resp, answered_by(record, call.model))))

    async def _stream(self, wire: Wire, call: Call, route: str, env: Envelope, live: bool = False) -> Answer:
        """Wait for the first event, so that a failure before any output is an error status."""
        rs = self.router.stream(route, call.request, env, live_reasoning=live)
        await rs.__aenter__()
        events: AsyncIterator[Any] = aiter(rs)
        try:
            first = await anext(events, None)
        except Unavailable as exc:
            await rs.aclose()
            self._done(exc.record)
            return self._unavailable(wire, exc)
        except BaseException:
            await rs.aclose()
            raise
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            **record_headers(env.request_id, None),
            "x-failover-route": route,
        }
        done = first.response.record if isinstance(first, Completed) else None
        capped = capped_to(done) if done is not None else rs.max_tokens_capped_to
        if capped is not None:  # the attempt shown was sent less max_tokens than asked
            headers["x-failover-max-tokens"] = str(capped)
        model = streamed_by(first, rs.model, call.model)
        return Streamed(headers, self._render(wire, call, model, first, events, env), rs)

    async def _render(
        self, wire: Wire, call: Call, model: str, first: Any, events: AsyncIterator[Any], env: Envelope
    ) -> AsyncIterator[bytes]:
        """The SSE bytes: the renderer's start, one chunk per event, the end (or one error event)."""
        out = wire.renderer(call, env.request_id, model)
        yield out.start()
        event = first
        try:
            while event is not None:
                if isinstance(event, Completed):
                    self._done(event.response.record)
                    self.origins.remember(event, wire.raw_reasoning)
                    yield out.end(event)
                    return
                if isinstance(event, PartialOutput):
                    self._done(event.record)
                    self.origins.remember(event, wire.raw_reasoning)
                    yield out.error(
                        "partial_output",
                        f"partial_output: the stream was cut after output began ({event.failure.label}); "
                        f"nothing was spliced on (request id {env.request_id})",
                    )
                    return
                chunk = out.event(event)
                if chunk:
                    yield chunk
                event = await anext(events, None)
        except Unavailable as exc:  # not expected after the commit point; still never a splice
            self._done(exc.record)
            yield out.error(exc.reason.value, self.scrub(f"{exc.reason.value}: {exc.message}"))
        except RelayMismatch as exc:  # a dialect's answer changed under what was sent: say so, never hide it
            log.error("stream %s: stream_mismatch: %s", env.request_id, exc)
            yield out.error("stream_mismatch", mismatch_message(exc, env.request_id))
