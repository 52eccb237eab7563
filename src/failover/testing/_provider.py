"""Scripted fake providers, and an in-process network that routes requests to them.

A :class:`FakeProvider` answers each request with the next reply of its :class:`Script`,
rendered in its real wire dialect, and records every request it received as a
:class:`ReceivedCall`. :class:`FakeNetwork` is a :class:`~failover.transport.Transport`
that hands requests to fake providers without sockets, so a router under test runs on
virtual loop time (looptime) and thousands of calls cost milliseconds::

    a = FakeProvider("a", "openai", ["rate_limit(retry_after=2)", "ok"])
    b = FakeProvider("b", "anthropic", Script.always("overloaded"))
    router = Router([route], transport=FakeNetwork(a, b))
    ...
    assert [c.kind for c in a.calls] == ["rate_limit", "ok"]

``FakeNetwork`` is also a :class:`~failover.transport.StreamingTransport`: ``stream()`` gives
the status and headers at once and the body event by event on the loop clock, as scripted
(``Reply.stall_after(3, 10)``, ``Reply.drop_after(2)``...).

Every time recorded is ``asyncio.get_running_loop().time()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..model import Dialect, Secret, Target
from ..model._record import mark_connected
from ..transport._types import HttpRequest, HttpResponse, StreamingResponse, TransportError
from ._dialects import (
    SPOKEN,
    Exchange,
    Rendered,
    check_request,
    endpoint_for,
    render,
    render_unknown_path,
    requested_model,
)
from ._script import Outcome, Reply, ReplyKind, Script, ScriptSpec
from ._stream import Dropped, Playback

if TYPE_CHECKING:
    from ..transport._types import StreamingTransport

__all__ = ["FakeNetwork", "FakeProvider", "ReceivedCall"]

_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "x-amz-security-token"}
)
_SECRET_QUERY = re.compile(r"(?i)(^|&)(key|api[-_]?key|access_token)=[^&]*")
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


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


class _Reset(Exception):
    """The fake closes the connection without an answer."""


class _ConnectFailed(Exception):
    def __init__(self, timed_out: bool, after: float) -> None:
        super().__init__("connect timeout" if timed_out else "connection refused")
        self.timed_out = timed_out
        self.after = after


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


_INVALID_JSON = object()  # a request body that is not JSON


def _default_on_cancel() -> Outcome:
    return Outcome.CLIENT_DISCONNECTED


class FakeProvider:
    """A scripted model provider that speaks a real wire dialect.

    >>> p = FakeProvider("a", "openai", ["rate_limit(retry_after=2)", "ok"], model="gpt-4o-mini")
    >>> p.base_url
    'http://a.fake/v1'

    * ``script``: a :class:`Script`, or its data form (a list of replies, ``{"replies": ...,
      "default": ...}``, or one reply for every call). Default: ``ok`` to every call.
    * ``model``: the provider's model (what a Target names) and the model its answers report.
      Default: a typical name for the dialect (``gpt-4o-mini``, ``gpt-5-mini`` for Responses,
      ``claude-haiku-4-5``, ``gemini-2.5-flash``), and answers then echo whatever model the
      request named.
    * ``latency``: seconds added before every answer (on top of each reply's own).
    * ``connect_latency``: seconds the connection takes before the request is sent; one longer
      than the caller's connect timeout fails as a connect timeout. The moment it is up is
      reported on the loop clock (``Attempt.connected`` in a RouteRecord).
    * ``api_key``: when given, a request must carry exactly this key where the dialect's
      clients put it (``Authorization: Bearer`` / ``api-key``, ``x-api-key``,
      ``x-goog-api-key`` or ``?key=``), or it gets the real "unauthorized" answer. On a Vertex
      AI path it is the access token, in ``Authorization: Bearer`` only. A callable is asked
      whether the credential presented is good (tokens that rotate: ``lambda t: t in live``).
    * ``secret_key``: Bedrock: with ``api_key`` (the access key id), the secret access key;
      the request's SigV4 signature is then recomputed with botocore, and a wrong one gets
      Bedrock's ``InvalidSignatureException``. (Without it only the key id is checked.)
    * ``validate``: answer like the real API when a request lacks a required field
      (``model``, ``messages``, Anthropic ``max_tokens`` and the ``anthropic-version``
      header, Gemini ``contents``, Responses ``input``; a Responses ``max_output_tokens``
      under 16) or is not JSON.

    Calls rejected by ``api_key`` or ``validate`` are recorded with ``scripted=False`` and do
    not consume a scripted reply.

    Requests to a path the dialect does not serve get the provider's real 404; Anthropic
    ``/messages/count_tokens`` and Gemini ``:countTokens`` are answered with the estimate.
    Neither consumes a scripted reply.

    A Gemini or Anthropic fake also answers as the model on Google Vertex AI, at Vertex's
    paths (``.../projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{model}:
    {generateContent|streamGenerateContent|countTokens|rawPredict|streamRawPredict}`` and
    Claude's ``count-tokens:rawPredict``): the same answers, Vertex's request rules, and
    Google's error envelope for what Vertex itself refuses. ``target(vertex=Vertex(...))``
    points a Target there.
    """

    def __init__(
        self,
        name: str,
        dialect: Dialect | str = Dialect.OPENAI,
        script: ScriptSpec | None = None,
        *,
        model: str | None = None,
        latency: float = 0.0,
        api_key: str | Callable[[str], bool] | None = None,
        validate: bool = True,
        connect_latency: float = 0.0,
        secret_key: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(
                f"FakeProvider name {name!r} must be a lower-case DNS label (letters, digits, '-'): "
                "it becomes the host name <name>.fake and the path prefix /<name>/"
            )
        if not isinstance(latency, int | float) or not math.isfinite(latency) or latency < 0:
            raise ValueError(f"FakeProvider latency must be a finite number >= 0, got {latency!r}")
        if not isinstance(connect_latency, int | float) or not math.isfinite(connect_latency) or connect_latency < 0:
            raise ValueError(f"FakeProvider connect_latency must be a finite number >= 0, got {connect_latency!r}")
        spoken = {d.value: d for d in SPOKEN}
        found = spoken.get(str(dialect))
        if found is None:
            choices = ", ".join(sorted(spoken))
            raise ValueError(f"FakeProvider {name!r}: unknown dialect {dialect!r}; expected one of {choices}")
        self.dialect: Dialect = found
        if callable(api_key) and found is Dialect.BEDROCK:
            raise ValueError(f"FakeProvider {name!r}: a Bedrock fake checks an access key id: give api_key as a string")
        self.name = name
        self.model: str = model or _DEFAULT_MODEL[self.dialect]
        self._report_model = model  # None: answers echo the model the request named
        self.latency = float(latency)
        self.connect_latency = float(connect_latency)
        self.validate = validate
        self._api_key = api_key
        self._secret_key = secret_key
        self._script = Script.parse(script, where=f"FakeProvider {name!r} script")
        self._position = 0
        self._slots: list[_Slot] = []
        self._serial = 0

    # -- addresses ----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The host name FakeNetwork routes to this provider: ``<name>.fake``."""
        return f"{self.name}.fake"

    @property
    def root_url(self) -> str:
        """``http://<name>.fake``, without the API version."""
        return f"http://{self.host}"

    @property
    def base_url(self) -> str:
        """``http://<name>.fake/v1`` (Gemini: ``/v1beta``; Bedrock: the root, as its endpoint has
        no version): the Target base URL convention."""
        if self.dialect is Dialect.BEDROCK:
            return self.root_url
        return f"{self.root_url}/{'v1beta' if self.dialect is Dialect.GEMINI else 'v1'}"

    def target(self, model: str | None = None, **overrides: Any) -> Target:
        """A :class:`~failover.model.Target` that points at this provider through FakeNetwork.

        ``name`` defaults to the provider's name, ``model`` to the provider's model,
        ``api_key`` to ``Secret("sk-fake-<name>")`` (Bedrock: none, its requests are signed
        with AWS credentials, for ``region`` us-east-1); any other Target field can be given.
        With ``vertex``, the base URL is the root (Vertex adds ``/v1/projects/...``).
        """
        fields: dict[str, Any] = {
            "name": self.name,
            "dialect": self.dialect,
            "model": model or self.model,
            "base_url": self.root_url if overrides.get("vertex") is not None else self.base_url,
            "api_key": Secret(f"sk-fake-{self.name}"),
        }
        if self.dialect is Dialect.BEDROCK:
            fields.update(api_key=None, region="us-east-1")
        fields.update(overrides)
        return Target(**fields)

    # -- script -------------------------------------------------------------------------------

    @property
    def script(self) -> Script:
        return self._script

    @script.setter
    def script(self, script: ScriptSpec) -> None:
        self.load(script)

    def load(self, script: ScriptSpec, *, restart: bool = True) -> None:
        """Use a new script; by default its first reply answers the next call."""
        self._script = Script.parse(script, where=f"FakeProvider {self.name!r} script")
        if restart:
            self._position = 0

    @property
    def position(self) -> int:
        """How many scripted replies have been used (the index of the next one)."""
        return self._position

    @property
    def next_reply(self) -> Reply:
        return self._script.reply_for(self._position)

    def clear(self) -> None:
        """Forget every recorded call and restart the script."""
        self._slots = []
        self._position = 0

    # -- records ------------------------------------------------------------------------------

    @property
    def calls(self) -> list[ReceivedCall]:
        """Every request received, in arrival order (a fresh list of immutable records)."""
        return [s.record for s in self._slots]

    @property
    def kinds(self) -> list[str]:
        """The reply kind of each call (``"unscripted"`` for calls outside the script)."""
        return [s._base.kind.value if s._base.kind is not None else "unscripted" for s in self._slots]

    def __repr__(self) -> str:
        return (
            f"FakeProvider({self.name!r}, {self.dialect.value!r}, calls={len(self._slots)}, "
            f"next={self.next_reply!r}, model={self.model!r})"
        )

    # -- answering ----------------------------------------------------------------------------

    async def _respond(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: Any,
        *,
        connect_timeout: float = math.inf,
        on_cancel: Callable[[], Outcome] = _default_on_cancel,
        log: list[_Slot] | None = None,
        wire: tuple[str, str, bytes] | None = None,
    ) -> tuple[_Slot, Rendered]:
        """Answer one request. Raises _Reset / _ConnectFailed for the scripted transport
        failures; records a cancellation (timeout, disconnect) with the loop time. ``wire``:
        the request as received (method, absolute URL, body bytes), for signature checks."""
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        dialect = self.dialect
        endpoint = endpoint_for(dialect, path)
        data: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
        reply: Reply | None = None
        scripted = False
        if body is _INVALID_JSON:
            reply = Reply.invalid("We could not parse the JSON body of your request.")
        elif endpoint is None or endpoint.operation == "count_tokens":
            pass
        elif (
            self.validate
            and (
                problem := check_request(
                    dialect,
                    endpoint,
                    path,
                    headers,
                    query,
                    data,
                    api_key=self._api_key,
                    secret_key=self._secret_key,
                    wire=wire,
                )
            )
            is not None
        ):
            reply = problem
        else:
            reply = self._script.reply_for(self._position)
            self._position += 1
            scripted = True
        index = len(self._slots)
        self._serial += 1
        serial = self._serial
        model = requested_model(dialect, endpoint, data)
        if dialect in (Dialect.GEMINI, Dialect.BEDROCK):
            stream = endpoint is not None and endpoint.stream_path
        else:
            stream = data.get("stream") is True
        slot = _Slot(
            ReceivedCall(
                provider=self.name,
                index=index,
                time=arrived,
                method=method,
                path=path,
                query=redact_query(query),
                headers=redact_headers(headers),
                json=data if body is not None and body is not _INVALID_JSON else None,
                model=model,
                stream=stream,
                kind=reply.kind if reply is not None else None,
                reply=reply,
                scripted=scripted,
            )
        )
        self._slots.append(slot)
        if log is not None:
            log.append(slot)

        request_id = f"req_{self.name}_{serial}"
        if endpoint is None:
            rendered = render_unknown_path(dialect, method, path, request_id)
            slot.update(status=rendered.status)
            return slot, rendered

        try:
            kind = reply.kind if reply is not None else None
            if kind is not ReplyKind.CONNECT_ERROR:
                await self._connect(slot, connect_timeout)
            wait = self.latency + (reply.wait if reply is not None else 0.0)
            if kind is ReplyKind.CONNECT_ERROR:
                timed_out = wait >= connect_timeout
                after = connect_timeout if timed_out else wait
                if after > 0:
                    await asyncio.sleep(after)
                slot.update(outcome=Outcome.CONNECT_FAILED, disconnected_at=loop.time())
                raise _ConnectFailed(timed_out, after)
            if wait > 0:
                await asyncio.sleep(wait)
            if kind is ReplyKind.HANG:
                await loop.create_future()  # until cancelled
            if kind is ReplyKind.RESET:
                slot.update(outcome=Outcome.RESET, disconnected_at=loop.time())
                raise _Reset()
        except asyncio.CancelledError:
            slot.update(outcome=on_cancel(), disconnected_at=loop.time())
            raise

        exchange = Exchange(
            provider=self.name,
            dialect=dialect,
            endpoint=endpoint,
            path=path,
            method=method,
            body=data,
            model=self._report_model or model or self.model,
            request_id=request_id,
            response_id=_response_id(dialect, self.name, serial),
            sse="alt=sse" in query,
        )
        rendered = render(reply if reply is not None else Reply.ok(), exchange)
        slot.update(status=rendered.status)
        return slot, rendered

    async def _connect(self, slot: _Slot, connect_timeout: float) -> None:
        """The handshake: ``connect_latency`` on the loop clock, then report the connection up."""
        loop = asyncio.get_running_loop()
        if self.connect_latency > 0 and self.connect_latency >= connect_timeout:
            await asyncio.sleep(connect_timeout)
            slot.update(outcome=Outcome.CONNECT_FAILED, disconnected_at=loop.time())
            raise _ConnectFailed(True, connect_timeout)
        if self.connect_latency > 0:
            await asyncio.sleep(self.connect_latency)
        mark_connected(loop.time())

    @staticmethod
    def _finish(slot: _Slot, outcome: Outcome, at: float, *, events: int | None = None) -> None:
        if outcome is Outcome.COMPLETED:
            slot.update(outcome=outcome, answered_at=at, events_sent=events)
        else:
            slot.update(outcome=outcome, disconnected_at=at, events_sent=events)


def _events_in(rendered: Rendered) -> int:
    """How many events an answer sent all at once holds."""
    return len(rendered.chunks) if rendered.chunks else 1


_DEFAULT_MODEL = {
    Dialect.OPENAI: "gpt-4o-mini",
    Dialect.OPENAI_RESPONSES: "gpt-5-mini",
    Dialect.ANTHROPIC: "claude-haiku-4-5",
    Dialect.GEMINI: "gemini-2.5-flash",
    Dialect.BEDROCK: "us.anthropic.claude-haiku-4-5-20251001-v1:0",
}


def _response_id(dialect: Dialect, name: str, serial: int) -> str:
    if dialect is Dialect.OPENAI:
        return f"chatcmpl-{name}-{serial}"
    if dialect is Dialect.OPENAI_RESPONSES:
        return f"resp_{name}_{serial}"
    if dialect is Dialect.ANTHROPIC:
        return f"msg_{name}_{serial}"
    return f"{name}-{serial}"


def _split_url(url: str) -> tuple[str, str, str]:
    """(host, path, query) of an absolute http(s) URL, cheaply."""
    rest = url.partition("://")[2] or url
    authority, slash, tail = rest.partition("/")
    path, _, query = (slash + tail).partition("?")
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    else:
        host = host.partition(":")[0]
    return host.lower(), path or "/", query.partition("#")[0]


class FakeNetwork:
    """An in-process :class:`~failover.transport.Transport` to fake providers.

    >>> a, b = FakeProvider("a", "openai"), FakeProvider("b", "gemini", ["hang"])
    >>> net = FakeNetwork(a, b)
    >>> router = Router(routes, transport=net)        # targets use a.base_url, b.base_url

    Requests are routed by host (``<name>.fake``); the dialect endpoint is found from the
    END of the path, so any prefix works. ``total_timeout`` is enforced on the loop clock:
    when it fires the call is recorded ``client_disconnected`` at exactly that loop time
    and :class:`TransportError` ``("total")`` is raised. A ``reset`` reply raises
    ``TransportError("read")``, a ``connect_error`` ``TransportError("connect")`` (and an
    unknown host does too, as a DNS failure would). Cancelling the caller (a deadline)
    records ``client_disconnected`` and propagates the cancellation.

    ``send`` returns once the whole body has been delivered, on its schedule: a reply with a
    ``chunk_interval`` or a stall takes that long, and ``drop_after`` raises
    ``TransportError("read")``. :meth:`stream` hands the body over event by event instead.
    """

    enforces_total = True  # send() bounds the exchange by total_timeout on the loop clock

    def __init__(self, *providers: FakeProvider) -> None:
        self._by_host: dict[str, FakeProvider] = {}
        self._routes: dict[str, tuple[FakeProvider, str, str]] = {}
        self._log: list[_Slot] = []
        for p in providers:
            self.add(p)

    def add(self, provider: FakeProvider) -> None:
        if provider.host in self._by_host and self._by_host[provider.host] is not provider:
            raise ValueError(f"FakeNetwork already has a provider named {provider.name!r}")
        self._by_host[provider.host] = provider
        self._routes.clear()

    @property
    def providers(self) -> tuple[FakeProvider, ...]:
        return tuple(self._by_host.values())

    def __getitem__(self, name: str) -> FakeProvider:
        try:
            return self._by_host[f"{name}.fake"]
        except KeyError:
            raise KeyError(f"no fake provider {name!r} (have: {', '.join(self._names())})") from None

    @property
    def calls(self) -> list[ReceivedCall]:
        """Every call through this network, across providers, in arrival order."""
        return [s.record for s in self._log]

    def clear(self) -> None:
        """Forget the network's log and every provider's calls; restart every script."""
        self._log = []
        for p in self._by_host.values():
            p.clear()

    def _names(self) -> list[str]:
        return [p.name for p in self._by_host.values()]

    def _route(self, url: str) -> tuple[FakeProvider, str, str]:
        route = self._routes.get(url)
        if route is None:
            host, path, query = _split_url(url)
            provider = self._by_host.get(host)
            if provider is None:
                known = ", ".join(p.host for p in self._by_host.values()) or "none"
                raise TransportError("connect", f"fake network: no provider at host {host!r} (known: {known})")
            route = (provider, path, query)
            if len(self._routes) < 4096:
                self._routes[url] = route
        return route

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        provider, path, query = self._route(request.url)
        if not total_timeout > 0:
            raise TransportError("total", f"fake {provider.name}: no time left to send (total_timeout={total_timeout})")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + total_timeout if math.isfinite(total_timeout) else None
        try:
            async with asyncio.timeout_at(deadline):
                slot, rendered = await provider._respond(
                    request.method,
                    path,
                    query,
                    request.headers,
                    request.json,
                    connect_timeout=connect_timeout,
                    log=self._log,
                    wire=(request.method, request.url, request.body_bytes()),
                )
                body = rendered.body
                if rendered.timing is not None:  # the body takes time: read it all, on schedule
                    playback = Playback(slot, rendered.chunks, rendered.timing, start=loop.time())
                    body = await playback.read_all()
        except TimeoutError:
            raise TransportError(
                "total", f"fake {provider.name}: no complete response within {total_timeout:g}s"
            ) from None
        except _Reset:
            raise TransportError(
                "read", f"fake {provider.name}: server closed the connection without sending a response"
            ) from None
        except Dropped:
            raise TransportError(
                "read", f"fake {provider.name}: server closed the connection in the middle of the body"
            ) from None
        except _ConnectFailed as exc:
            raise _connect_error(provider, exc) from None
        if rendered.timing is None:
            FakeProvider._finish(slot, Outcome.COMPLETED, loop.time(), events=_events_in(rendered))
        return HttpResponse(status=rendered.status, headers=dict(rendered.headers), body=body)

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[StreamingResponse]:
        """The :class:`~failover.transport.StreamingTransport` side: open one streaming exchange.

        Entering waits for the status and headers (the reply's latency; a ``hang`` never gets
        there, so bound it with a timeout). The body is then delivered by
        ``aiter_bytes()`` on the loop clock, one event per chunk (or per ``split_bytes``
        piece): a 10 s stall costs nothing under looptime. A ``drop_after`` ends the
        iteration with ``TransportError("read")``. Leaving the block before the body ended
        records ``client_disconnected`` at that loop time, with ``events_sent`` so far. An
        answer that is not delivered over time (an error, a plain stream) is sent whole with
        the headers, as a server writes it in one go.
        """
        provider, path, query = self._route(request.url)
        loop = asyncio.get_running_loop()
        try:
            slot, rendered = await provider._respond(
                request.method,
                path,
                query,
                request.headers,
                request.json,
                connect_timeout=connect_timeout,
                log=self._log,
                wire=(request.method, request.url, request.body_bytes()),
            )
        except _Reset:
            raise TransportError(
                "read", f"fake {provider.name}: server closed the connection without sending a response"
            ) from None
        except _ConnectFailed as exc:
            raise _connect_error(provider, exc) from None
        playback: Playback | None = None
        if rendered.timing is None:
            FakeProvider._finish(slot, Outcome.COMPLETED, loop.time(), events=_events_in(rendered))
        else:
            playback = Playback(slot, rendered.chunks, rendered.timing, start=loop.time())
        try:
            yield _FakeStreamingResponse(provider.name, rendered, playback)
        finally:
            if playback is not None:
                playback.abandon(Outcome.CLIENT_DISCONNECTED)

    async def aclose(self) -> None:
        """Nothing to release; the network stays usable (a router may be re-created)."""

    def __repr__(self) -> str:
        return f"FakeNetwork({', '.join(repr(n) for n in self._names())}, calls={len(self._log)})"


def _connect_error(provider: FakeProvider, exc: _ConnectFailed) -> TransportError:
    what = f"connect timeout after {exc.after:g}s" if exc.timed_out else "connection refused"
    return TransportError("connect", f"fake {provider.name}: {what}")


class _FakeStreamingResponse:
    """One streaming answer of a FakeNetwork (a :class:`~failover.transport.StreamingResponse`)."""

    __slots__ = ("_pending", "_playback", "_provider", "headers", "status")

    def __init__(self, provider: str, rendered: Rendered, playback: Playback | None) -> None:
        self._provider = provider
        self.status: int = rendered.status
        self.headers: Mapping[str, str] = dict(rendered.headers)
        self._playback = playback
        self._pending: list[bytes] = [] if playback is not None else list(rendered.chunks or (rendered.body,))

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body chunks as they arrive; iterating again goes on where the last stopped."""
        playback = self._playback
        if playback is None:
            while self._pending:
                chunk = self._pending.pop(0)
                if chunk:
                    yield chunk
            return
        while True:
            try:
                piece = await playback.next()
            except Dropped:
                raise TransportError(
                    "read", f"fake {self._provider}: server closed the connection in the middle of the stream"
                ) from None
            if piece is None:
                return
            yield piece

    async def aread(self) -> bytes:
        """The rest of the body (waiting for it on schedule)."""
        return b"".join([piece async for piece in self.aiter_bytes()])


if TYPE_CHECKING:

    def _is_a_streaming_transport(net: FakeNetwork) -> StreamingTransport:
        return net
