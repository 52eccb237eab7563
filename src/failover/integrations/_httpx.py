"""The official SDKs over failover, in-process: an httpx client whose transport is the Router.

>>> client = openai.AsyncOpenAI(api_key="unused", max_retries=0,
...                             http_client=failover.httpx_client(router, route="chat"))
>>> resp = await client.chat.completions.create(model="chat", messages=[...])

The SDK builds its HTTP request as usual; instead of going to the network it reaches
the transport made here (``_AsyncTransportBase`` / ``_SyncTransportBase`` mixed into the
httpx module's base class), which reads the body with the same validated converters the gateway
uses (``failover.inbound``), runs ``Router.complete`` / ``Router.stream`` on the route, and
answers in the SDK's own wire format: a JSON body, an SSE byte stream, or an error body with
the status that makes the SDK raise its own exception class. A fallback to a target of another
dialect needs no extra step: the Router's Response is dialect-neutral and is rendered in the
dialect of the path the SDK called.

What it intercepts: ``POST .../chat/completions`` (OpenAI) and ``POST .../v1/messages``
(Anthropic). Any other path (``/models``, ``/embeddings``, ``/v1/messages/count_tokens`` ...)
is answered 404 in the SDK's dialect naming what is supported, or handed to the ``fallthrough``
transport when one is given (a real ``httpx2.AsyncHTTPTransport`` for example).

The client is an ``httpx2`` client when ``httpx2`` is installed (the current openai and
anthropic SDKs are built on it, and anthropic refuses an ``httpx`` client), else an ``httpx``
one; ``http_module=`` picks one explicitly.

Every error answer carries ``x-should-retry: false``: the Router already retried, failed over
and fell back within the deadline, and the SDKs honour that header, so their own retries never
nest on top of ours even when ``max_retries`` was left on. ``max_retries=0`` is still the
documented setting (it also stops retries of the SDK's own timeouts); a request that arrives
as an SDK retry (``x-stainless-retry-count`` > 0) is logged once as a warning.

Sync SDK clients (``openai.OpenAI``, ``anthropic.Anthropic``) use :func:`sync_httpx_client`
over a :class:`~failover.SyncRouter`: each call runs on the SyncRouter's event loop and
blocks only the calling thread.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import importlib
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast, overload

from ..inbound import RelayMismatch, WireError
from ..inbound import anthropic as ant
from ..inbound import openai as oai
from ..inbound._headers import envelope_with_headers, live_reasoning, record_headers, retry_headers
from ..inbound._relay import mismatch_message
from ..model import (
    Completed,
    Envelope,
    FailureKind,
    InvalidRequest,
    PartialOutput,
    Request,
    Response,
    RouteRecord,
    SideEffectMode,
    StreamEvent,
    Unavailable,
    UnknownRoute,
)
from ..model._ids import new_id
from ..model._json import dumps as _dumps
from ..router import Router, RouteStream, SyncRouter

if TYPE_CHECKING:
    import httpx
    import httpx2

log = logging.getLogger("failover.integrations")

T = TypeVar("T")
WireDialect = Literal["openai", "anthropic"]
HttpModule = Literal["httpx", "httpx2"]
RecordHook = Callable[[RouteRecord], None]

_LAST_RECORD: contextvars.ContextVar[RouteRecord | None] = contextvars.ContextVar("failover_last_record", default=None)
_SUPPORTED = "POST /chat/completions (OpenAI SDK) and POST /v1/messages (Anthropic SDK)"
# Things shaped like credentials, removed from every message (a provider may echo part of a key).
_KEYLIKE = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{3,}|AIza[0-9A-Za-z_\-]{10,}|(?i:bearer)\s+[A-Za-z0-9._\-~+/=]{8,}|key=[^&\s\"']+)"
)


def last_record() -> RouteRecord | None:
    """The RouteRecord of the last call made through a failover httpx client in this context.

    Set when a plain call returns or raises, and when a stream ends (its last event is read
    or it is closed); ``None`` before the first call. Async code sees the record of its own
    task's last call; with the sync client, the calling thread's.
    """
    return _LAST_RECORD.get()


def _dialect_of(path: str) -> WireDialect | None:
    """The SDK dialect a path belongs to, or None for a path we do not serve."""
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/v1/messages") or path == "/messages":
        return "anthropic"
    return None


def _error_dialect(path: str, headers: Mapping[str, str]) -> WireDialect:
    """Which error shape an unsupported path gets: the Anthropic SDK always sends anthropic-version."""
    if "anthropic-version" in headers or path.rstrip("/").startswith("/v1/messages"):
        return "anthropic"
    return "openai"


# -- answers ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plain:
    status: int
    headers: dict[str, str]
    body: bytes


class _Streamed:
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


_Answer = _Plain | _Streamed


# -- one dialect's wire format --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    """A parsed SDK request."""

    request: Request
    model: str
    stream: bool
    include_usage: bool = False


class _Renderer(Protocol):
    def start(self) -> bytes: ...
    def event(self, event: StreamEvent) -> bytes: ...
    def end(self, done: Completed) -> bytes: ...
    def error(self, code: str, message: str) -> bytes: ...


class _Wire(Protocol):
    name: WireDialect

    def parse(self, data: Any) -> _Call: ...
    def body(self, resp: Response, model: str) -> dict[str, Any]: ...
    def error(self, status: int, message: str, *, code: str | None, param: str | None = None) -> dict[str, Any]: ...
    def renderer(self, call: _Call, request_id: str) -> _Renderer: ...


def _openai_type(status: int) -> str:
    return {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        503: "service_unavailable",
        504: "timeout_error",
    }.get(status, "invalid_request_error" if status < 500 else "server_error")


class _OpenAIWire:
    name: WireDialect = "openai"

    def parse(self, data: Any) -> _Call:
        body = oai.parse_body(data)
        usage = body.stream_options is not None and body.stream_options.include_usage
        return _Call(oai.to_request(body), body.model, bool(body.stream), usage)

    def body(self, resp: Response, model: str) -> dict[str, Any]:
        cid = new_id("chatcmpl-")
        return oai.completion_body(resp, completion_id=cid, created=int(time.time()), model=model)

    def error(self, status: int, message: str, *, code: str | None, param: str | None = None) -> dict[str, Any]:
        return oai.error_body(status, message, type=_openai_type(status), code=code, param=param)

    def renderer(self, call: _Call, request_id: str) -> _Renderer:
        return _OpenAIChunks(self, call, request_id)


class _OpenAIChunks:
    """``chat.completion.chunk`` events as ``data: {...}`` lines, then ``data: [DONE]``."""

    def __init__(self, wire: _OpenAIWire, call: _Call, request_id: str) -> None:
        self.wire = wire
        cid = new_id("chatcmpl-")
        self.chunks = oai.ChunkRenderer(cid, int(time.time()), call.model, call.include_usage, request_id=request_id)

    @staticmethod
    def _sse(items: list[dict[str, Any]]) -> bytes:
        return b"".join(b"data: " + _dumps(d) + b"\n\n" for d in items)

    def start(self) -> bytes:
        return self._sse(self.chunks.start())

    def event(self, event: StreamEvent) -> bytes:
        return self._sse(self.chunks.render(event))

    def end(self, done: Completed) -> bytes:
        return self._sse(self.chunks.end(done)) + b"data: [DONE]\n\n"

    def error(self, code: str, message: str) -> bytes:
        # The openai SDK raises APIError for a data line whose object has an "error" key.
        return self._sse([self.wire.error(500, message, code=code)])


class _AnthropicWire:
    name: WireDialect = "anthropic"

    def parse(self, data: Any) -> _Call:
        body = ant.parse_body(data)
        return _Call(ant.to_request(body), body.model, bool(body.stream))

    def body(self, resp: Response, model: str) -> dict[str, Any]:
        return ant.message_body(resp, message_id=new_id("msg_"), model=model)

    def error(self, status: int, message: str, *, code: str | None, param: str | None = None) -> dict[str, Any]:
        return ant.error_body(status, message, type=ant.error_type_for(status), code=code)

    def renderer(self, call: _Call, request_id: str) -> _Renderer:
        return _AnthropicEvents(call, request_id)


class _AnthropicEvents:
    """Messages stream events as ``event: name`` / ``data: {...}`` pairs."""

    def __init__(self, call: _Call, request_id: str) -> None:
        self.events = ant.EventRenderer(new_id("msg_"), call.model, request_id=request_id)

    @staticmethod
    def _sse(pairs: list[tuple[str, dict[str, Any]]]) -> bytes:
        return b"".join(b"event: " + name.encode() + b"\ndata: " + _dumps(d) + b"\n\n" for name, d in pairs)

    def start(self) -> bytes:
        return self._sse(self.events.start())

    def event(self, event: StreamEvent) -> bytes:
        return self._sse(self.events.render(event))

    def end(self, done: Completed) -> bytes:
        return self._sse(self.events.end(done))

    def error(self, code: str, message: str) -> bytes:
        # The anthropic SDK raises an APIStatusError for an ``event: error``.
        return self._sse(self.events.error(message, code=code))


_WIRES: dict[WireDialect, _Wire] = {"openai": _OpenAIWire(), "anthropic": _AnthropicWire()}


# -- Unavailable -> status ------------------------------------------------------------------------

# Statuses chosen so that the SDKs raise the exception a caller would catch for the same
# problem from the provider itself. In-process, the caller owns the router's credentials, so
# an authentication failure upstream is shown as one (the message says it is the target's key).
_STATUS: dict[FailureKind, int] = {
    FailureKind.DEADLINE_EXHAUSTED: 504,
    FailureKind.TIMEOUT: 504,
    FailureKind.RATE_LIMITED: 429,
    FailureKind.QUOTA_EXHAUSTED: 429,
    FailureKind.INVALID_REQUEST: 400,
    FailureKind.CONTEXT_OVERFLOW: 400,
    FailureKind.CONTENT_FILTERED: 400,
    FailureKind.CONTRACT_FAILURE: 422,
    FailureKind.SCHEMA_INVALID: 422,
    FailureKind.TOOL_CALL_MALFORMED: 422,
    FailureKind.TRUNCATED: 422,
    FailureKind.SIDE_EFFECT_UNCERTAIN: 409,
    FailureKind.AUTHENTICATION_OR_PERMISSION: 401,
    FailureKind.MODEL_NOT_FOUND: 404,
}


def status_for(exc: Unavailable, dialect: WireDialect) -> int:
    """The HTTP status an Unavailable is answered with (the SDK picks its exception class by it)."""
    if exc.reason is FailureKind.PROVIDER_OVERLOADED:
        return 529 if dialect == "anthropic" else 503  # anthropic.OverloadedError
    status = _STATUS.get(exc.reason)
    if status is not None and exc.retryable and status in (401, 404):
        # An open circuit tripped by rejected credentials or an unknown model turned the request
        # away for now: a 401/404 would tell the SDK (and the user) to give up for good.
        return 503
    if status is not None:
        return status
    return 503 if exc.retryable else 502


class _Scrub:
    """Removes the router's provider secrets (and key-shaped strings) from a message."""

    def __init__(self, router: Router) -> None:
        found = {t.api_key.reveal() for r in router.routes.values() for t in r.targets if t.api_key}
        self._secrets = sorted((s for s in found if len(s) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return _KEYLIKE.sub("***", text)


# -- the envelope of one call -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    route: str | None
    envelope: Envelope
    max_deadline_ms: int
    max_attempts_limit: int
    on_record: RecordHook | None


def _template(
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
    wire: _Wire
    call: _Call
    route: str
    envelope: Envelope
    live_reasoning: bool = False  # x-failover-live-reasoning: a stream's reasoning as it comes


class _Core:
    def __init__(self, router: Router, options: _Options) -> None:
        self.router = router
        self.options = options
        self.scrub = _Scrub(router)
        self._warned_retries = False

    def _error(
        self,
        wire: _Wire,
        status: int,
        message: str,
        *,
        code: str | None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> _Plain:
        """An error answer; ``x-should-retry: false`` because the router already did the retrying."""
        h = {"content-type": "application/json", "x-should-retry": "false", **(headers or {})}
        return _Plain(status, h, _dumps(wire.error(status, message, code=code, param=param)))

    def _unavailable(self, wire: _Wire, exc: Unavailable) -> _Plain:
        status = status_for(exc, wire.name)
        message = self.scrub(f"{exc.reason.value}: {exc.message}") + f" (request id {exc.request_id})"
        headers = {**record_headers(exc.request_id, exc.record), **retry_headers(exc)}
        return self._error(wire, status, message, code=exc.reason.value, headers=headers)

    def _done(self, record: RouteRecord | None) -> None:
        if record is None:
            return
        _LAST_RECORD.set(record)
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

    def prepare(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> _Plain | _Prepared:
        """Everything before the router: the dialect, the body, the route, the envelope; or an error answer."""
        wire_name = _dialect_of(path)
        if wire_name is None:
            wire = _WIRES[_error_dialect(path, headers)]
            return self._error(
                wire,
                404,
                f"{method} {path} is not served by failover's drop-in client; it serves {_SUPPORTED}. "
                "Pass fallthrough=<an httpx transport> to httpx_client() to send other paths to the provider",
                code="unsupported_path",
            )
        wire = _WIRES[wire_name]
        if method != "POST":
            return self._error(wire, 405, f"use POST for {path}", code="method_not_allowed")
        self._check_retry(headers)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            return self._error(wire, 400, f"request body is not valid JSON: {exc}", code="invalid_json")
        try:
            call = wire.parse(data)
            route = self.options.route if self.options.route is not None else call.model
            self.router.route(route)
            env = dataclasses.replace(self.options.envelope, request_id=new_id("req_"))
            env = envelope_with_headers(
                env,
                headers,
                max_deadline_ms=self.options.max_deadline_ms,
                max_attempts_limit=self.options.max_attempts_limit,
            )
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

    async def answer(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> _Answer:
        prepared = self.prepare(method, path, headers, body)
        if isinstance(prepared, _Plain):
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

    async def _complete(self, wire: _Wire, call: _Call, route: str, env: Envelope) -> _Answer:
        try:
            resp = await self.router.complete(route, call.request, env)
        except Unavailable as exc:
            self._done(exc.record)
            return self._unavailable(wire, exc)
        record = resp.record
        self._done(record)
        request_id = record.request_id if record is not None else env.request_id
        headers = {"content-type": "application/json", **record_headers(request_id, record)}
        return _Plain(200, headers, _dumps(wire.body(resp, call.model)))

    async def _stream(self, wire: _Wire, call: _Call, route: str, env: Envelope, live: bool = False) -> _Answer:
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
        return _Streamed(headers, self._render(wire, call, first, events, env), rs)

    async def _render(
        self, wire: _Wire, call: _Call, first: Any, events: AsyncIterator[Any], env: Envelope
    ) -> AsyncIterator[bytes]:
        """The SSE bytes: the renderer's start, one chunk per event, the end (or one error event)."""
        out = wire.renderer(call, env.request_id)
        yield out.start()
        event = first
        try:
            while event is not None:
                if isinstance(event, Completed):
                    self._done(event.response.record)
                    yield out.end(event)
                    return
                if isinstance(event, PartialOutput):
                    self._done(event.record)
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


# -- httpx / httpx2 glue ------------------------------------------------------------------------------


def _http_module(name: HttpModule | None) -> ModuleType:
    """httpx2 when installed (the current openai and anthropic SDKs use it), else httpx."""
    if name is not None:
        if name not in ("httpx", "httpx2"):
            raise ValueError(f"http_module: {name!r} is neither 'httpx' nor 'httpx2'")
        return importlib.import_module(name)
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


class _AsyncBody:
    """The response stream of an SSE answer; closing it closes the router stream and upstream."""

    def __init__(self, answer: _Streamed) -> None:
        self.answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.answer.chunks:
                yield chunk
        finally:
            await self.answer.aclose()

    async def aclose(self) -> None:
        await self.answer.aclose()


class _AsyncTransportBase:
    """``handle_async_request``: the SDK's request, answered by the Router on the caller's loop."""

    def __init__(self, core: _Core, mod: ModuleType, fallthrough: Any) -> None:
        self._core = core
        self._mod = mod
        self._fallthrough = fallthrough

    async def handle_async_request(self, request: Any) -> Any:
        path = request.url.path
        if self._fallthrough is not None and _dialect_of(path) is None:
            return await self._fallthrough.handle_async_request(request)
        body = await request.aread()
        answer = await self._core.answer(request.method, path, request.headers, body)
        mod = self._mod
        if isinstance(answer, _Plain):
            return mod.Response(answer.status, headers=answer.headers, content=answer.body, request=request)
        stream = _body_class(mod, "async")(answer)
        return mod.Response(200, headers=answer.headers, stream=stream, request=request)

    async def aclose(self) -> None:
        if self._fallthrough is not None:
            await self._fallthrough.aclose()


class _SyncBody:
    """The sync side of an SSE answer: each chunk is fetched from the router's loop thread."""

    def __init__(self, answer: _Streamed, run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self.answer = answer
        self.run = run
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        chunks = self.answer.chunks
        try:
            while True:
                chunk = self.run(anext(chunks, None))
                if chunk is None:
                    return
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.run(self.answer.aclose())


class _SyncTransportBase:
    """``handle_request``: the SDK's request, answered on the SyncRouter's loop thread."""

    def __init__(self, core: _Core, sync_router: SyncRouter, mod: ModuleType, fallthrough: Any) -> None:
        self._core = core
        self._sync = sync_router
        self._mod = mod
        self._fallthrough = fallthrough

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the router's loop, blocking this thread; the record set there is copied back."""

        async def in_context() -> tuple[T, contextvars.Context]:
            result = await coro
            return result, contextvars.copy_context()

        fut: concurrent.futures.Future[tuple[T, contextvars.Context]] = self._sync.submit(in_context())
        try:
            result, after = fut.result()
        except BaseException:
            fut.cancel()  # KeyboardInterrupt in the caller: stop the router call too
            raise
        record = after.get(_LAST_RECORD)
        if record is not None:  # set on the loop thread by this call: show it to the calling thread
            _LAST_RECORD.set(record)
        return result

    def handle_request(self, request: Any) -> Any:
        path = request.url.path
        if self._fallthrough is not None and _dialect_of(path) is None:
            return self._fallthrough.handle_request(request)
        body = request.read()
        answer = self._run(self._core.answer(request.method, path, request.headers, body))
        mod = self._mod
        if isinstance(answer, _Plain):
            return mod.Response(answer.status, headers=answer.headers, content=answer.body, request=request)
        stream = _body_class(mod, "sync")(answer, self._run)
        return mod.Response(200, headers=answer.headers, stream=stream, request=request)

    def close(self) -> None:
        if self._fallthrough is not None:
            self._fallthrough.close()


@cache
def _body_class(mod: ModuleType, kind: Literal["sync", "async"]) -> type[Any]:
    """Our byte stream as a subclass of the module's stream base (httpx checks it with isinstance)."""
    if kind == "async":
        return type("FailoverAsyncStream", (_AsyncBody, mod.AsyncByteStream), {})
    return type("FailoverSyncStream", (_SyncBody, mod.SyncByteStream), {})


@cache
def _transport_class(mod: ModuleType, kind: Literal["sync", "async"]) -> type[Any]:
    if kind == "async":
        return type("FailoverAsyncTransport", (_AsyncTransportBase, mod.AsyncBaseTransport), {})
    return type("FailoverTransport", (_SyncTransportBase, mod.BaseTransport), {})


# -- the public constructors ------------------------------------------------------------------------


def _client(
    router: Router,
    sync_router: SyncRouter | None,
    /,
    *,
    route: str | None = None,
    envelope: Envelope | None = None,
    deadline: float | None = None,
    max_attempts: int | None = None,
    max_cost: float | None = None,
    allow_failover: bool | None = None,
    allow_fallback: bool | None = None,
    side_effects: SideEffectMode | str | None = None,
    tenant: str | None = None,
    on_record: RecordHook | None = None,
    fallthrough: Any = None,
    max_deadline: float = 600.0,
    max_attempts_limit: int = 20,
    http_module: HttpModule | None = None,
    **client_kwargs: Any,
) -> Any:
    """The one body of :func:`httpx_client` and :func:`sync_httpx_client`.

    The public functions keep their typed overloads (the client class follows ``http_module``)
    and pass their keywords through to here, so the defaults and the checks live in one place.
    ``sync_router``: ``None`` for an ``AsyncClient`` on the caller's loop; else a sync ``Client``
    whose calls run on that SyncRouter's loop thread.
    """
    if route is not None:
        router.route(route)  # UnknownRoute now, naming the configured routes, not on the first call
    opts = _Options(
        route=route,
        envelope=_template(
            envelope,
            deadline=deadline,
            max_attempts=max_attempts,
            max_cost=max_cost,
            allow_failover=allow_failover,
            allow_fallback=allow_fallback,
            side_effects=side_effects,
            tenant=tenant,
        ),
        max_deadline_ms=int(max_deadline * 1000),
        max_attempts_limit=max_attempts_limit,
        on_record=on_record,
    )
    mod = _http_module(http_module)
    core = _Core(router, opts)
    if sync_router is None:
        return mod.AsyncClient(transport=_transport_class(mod, "async")(core, mod, fallthrough), **client_kwargs)
    transport = _transport_class(mod, "sync")(core, sync_router, mod, fallthrough)
    return mod.Client(transport=transport, **client_kwargs)


@overload
def httpx_client(
    router: Router,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx2"] | None = ...,
    **client_kwargs: Any,
) -> httpx2.AsyncClient: ...


@overload
def httpx_client(
    router: Router,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx"],
    **client_kwargs: Any,
) -> httpx.AsyncClient: ...


def httpx_client(router: Router, **kwargs: Any) -> Any:
    """An ``AsyncClient`` for ``openai.AsyncOpenAI`` / ``anthropic.AsyncAnthropic(http_client=...)``.

    >>> client = openai.AsyncOpenAI(api_key="unused", max_retries=0,
    ...                             http_client=failover.httpx_client(router, route="chat", deadline=20))

    ``route``: the route every call takes; ``None``: the body's ``model`` must name a route.
    ``envelope`` and the keywords after it (``deadline`` in seconds, ``max_attempts`` ...) make
    the envelope each call starts from (with a new request id per call); a call may change it
    with the gateway's ``x-failover-*`` headers (``extra_headers={"x-failover-deadline-ms":
    "5000"}``), up to ``max_deadline`` seconds and ``max_attempts_limit`` attempts.
    ``on_record(record)`` is called with the RouteRecord of every call (also see
    :func:`last_record`). ``fallthrough``: an ``AsyncBaseTransport`` for paths failover does
    not serve (default: a 404 naming what is served). ``http_module``: ``"httpx2"`` (the
    default when installed; what the current SDKs use) or ``"httpx"`` (older SDKs).
    Other keywords go to the ``AsyncClient``.
    """
    return _client(router, None, **kwargs)


@overload
def sync_httpx_client(
    router: SyncRouter,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx2"] | None = ...,
    **client_kwargs: Any,
) -> httpx2.Client: ...


@overload
def sync_httpx_client(
    router: SyncRouter,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx"],
    **client_kwargs: Any,
) -> httpx.Client: ...


def sync_httpx_client(router: SyncRouter, **kwargs: Any) -> Any:
    """A sync ``Client`` for ``openai.OpenAI`` / ``anthropic.Anthropic(http_client=...)``.

    >>> with SyncRouter(lambda: Router.from_config("failover.yaml")) as router:
    ...     client = openai.OpenAI(api_key="unused", max_retries=0,
    ...                            http_client=failover.sync_httpx_client(router, route="chat"))

    The router runs on the :class:`~failover.SyncRouter`'s own loop thread (its HTTP pool
    and limiters live there); each SDK call blocks only the calling thread, and a stream is
    pulled one chunk at a time. The keywords are those of :func:`httpx_client`.
    """
    if not isinstance(router, SyncRouter):
        raise TypeError(
            f"sync_httpx_client needs a SyncRouter, not {type(router).__name__}: the sync SDK clients call "
            "from threads without an event loop. Wrap the router: SyncRouter(lambda: Router(...)); "
            "or use httpx_client() with the async SDK client"
        )
    return _client(router.router, router, **kwargs)


__all__ = ["httpx_client", "last_record", "status_for", "sync_httpx_client"]
