"""Streaming: four timeouts per attempt, the commit point, and the stream callers iterate.

One streamed attempt is bounded by four timeouts, each capped by the request's deadline:
``connect`` (the TCP/TLS handshake, in the transport), ``first_event`` (from sending to
the first SSE event: queueing, prefill, thinking), ``idle`` (between events; comments and
pings reset it) and ``total`` (the attempt cap). They share ONE loop-clock timer that is
re-armed after every event, so the check costs nothing per byte.

The commit point: events of an attempt are held back until its first content event (text,
tool call). Until then a failure is an ordinary attempt failure. After it, output has
reached the caller and nothing is ever spliced onto it: the stream ends with
``PartialOutput``, unless the envelope allows recovery after partial output AND the caller
opted in, in which case a ``Restarted`` event announces a new response id first.

A slow reader is not the provider's failure. While the caller does not read, the upstream is
not read either (:class:`RouteStream`'s bounded buffer) and only the total cap runs. An attempt
whose timer fires, or whose connection drops, while it is held back for the caller, or after it
was held back for at least half of its time (:data:`CALLER_SHARE`), ends with a Failure marked
``not_target="slow_reader"``: no breaker and no health score counts it. The time it was held
back is the caller's too: it is left out of the duration the breakers' slow-call rule and the
health board's latency see (``Exchanged.paused``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from ..auth import AuthError
from ..model import (
    SLOW_READER,
    Completed,
    Failure,
    FailureKind,
    PartialOutput,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    Restarted,
    Route,
    RouteRecord,
    StreamEvent,
    Target,
    Terminal,
    TextDelta,
    TimeoutPhase,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Unavailable,
    UsageUpdate,
    new_id,
)
from ..model import Stop as ModelStop
from ..providers import MAX_EVENT_CHARS, EventTooLarge, SSEComment, StreamFailed, stream_decoder
from ..transport import HttpResponse, StreamingTransport, TransportError
from ._exchange import exchange_failure
from ._hooks import degraded
from ._lazy_timeout import LazyTimeout

if TYPE_CHECKING:
    from ._parts import RouterParts
    from ._record import Recorder

# The answer's content: the first of these commits the stream (reasoning does too when live).
_CONTENT: tuple[type, ...] = (TextDelta, ToolCallStart, ToolCallDelta, ToolCallDone)
_LIVE_CONTENT: tuple[type, ...] = (*_CONTENT, ReasoningDelta, ReasoningDone)


class Output:
    """What the caller has been shown of the current response (for PartialOutput), and the
    commit point: the events of an attempt are held back until it passes.

    The commit point can wait (:meth:`hold`): an attempt's content is held until ``tokens``
    (estimated) or ``seconds`` since its first content event have arrived, checked as each
    event arrives, or until the attempt ends. Held output has reached nobody, so a failure
    before the commit point is an ordinary attempt failure: replay, failover and fallback
    answer invisibly, one whole answer under one id. The hold ends by progress only: a stream
    that stalls inside it shows nothing either way, and stays rescuable until its timers end.
    """

    __slots__ = (
        "calls",
        "clock",
        "committed_at",
        "content",
        "first_content_at",
        "held",
        "hold_seconds",
        "hold_tokens",
        "keep_text",
        "max_tokens",
        "pause",
        "pending",
        "reasoning",
        "response_id",
        "sink",
        "source",
        "started",
        "text",
        "thinking",
        "upstream",
    )

    def __init__(self, sink: Callable[[StreamEvent], None] | None) -> None:
        self.sink = sink
        # the caller's backpressure: None while it keeps up, else a future resolved when it has read
        self.pause: Callable[[], asyncio.Future[None] | None] | None = None
        self.started = False
        self.content = _CONTENT  # what commits the stream: the answer, and reasoning if live
        self.held: list[StreamEvent] = []
        self.hold_tokens = 0  # 0: the first content event commits (no hold)
        self.hold_seconds = 0.0
        self.clock: Callable[[], float] = _no_clock
        self.first_content_at: float | None = None  # the held attempt's first content event
        self.pending = 0  # estimated tokens of content held
        self.committed_at: float | None = None  # loop time the current attempt's output was committed
        self.text: list[str] = []
        self.keep_text = True  # False: a relay that passed every delta on needs no second copy
        self.calls: list[ToolCall] = []
        self.reasoning: list[Reasoning] = []  # blocks completed and delivered
        self.thinking: dict[int, list[str]] = {}  # block index -> text delivered, while a block is open
        self.source = ""  # the reasoning format of the attempt being streamed (its dialect's)
        # the target of the attempt being streamed (whose output the caller is shown, once
        # committed), and the max_tokens its request sent
        self.upstream: Target | None = None
        self.max_tokens: int | None = None
        self.response_id = new_id("resp_")

    def hold(self, tokens: int, seconds: float, clock: Callable[[], float]) -> None:
        """Hold each attempt's content until ``tokens`` or ``seconds`` (read on ``clock``) have
        arrived, or the attempt ended; ``tokens=0`` commits on the first content event."""
        self.hold_tokens, self.hold_seconds, self.clock = max(0, tokens), max(0.0, seconds), clock

    def live_reasoning(self) -> None:
        """Pass reasoning on as it comes: it commits the stream like the answer's first text."""
        self.content = _LIVE_CONTENT

    def deliver(self, events: Sequence[StreamEvent]) -> None:
        sink = self.sink
        if sink is None:
            return
        for ev in events:
            if not self.started:
                self.held.append(ev)
                if isinstance(ev, self.content):
                    self.pending += _token_estimate(ev)
                    if self.first_content_at is None:
                        self.first_content_at = self.clock() if self.hold_tokens else 0.0
                elif self.first_content_at is None:
                    continue
                if self.pending >= self.hold_tokens or self.clock() - self.first_content_at >= self.hold_seconds:
                    self._commit()
                continue
            self._shown(ev)
            sink(ev)

    def _commit(self) -> None:
        """The commit point: what was held reaches the caller, and from now on every event."""
        sink = self.sink
        assert sink is not None
        self.started = True
        self.committed_at = self.clock()
        held, self.held = self.held, []
        for ev in held:
            self._shown(ev)
            sink(ev)

    def _shown(self, ev: StreamEvent) -> None:
        """Keep what the caller has seen, for a PartialOutput."""
        if isinstance(ev, TextDelta):
            if self.keep_text:
                self.text.append(ev.text)
        elif isinstance(ev, ToolCallDone):
            self.calls.append(ev.call)
        elif isinstance(ev, ReasoningDelta):
            if self.keep_text:
                self.thinking.setdefault(ev.index, []).append(ev.text)
        elif isinstance(ev, ReasoningDone):
            self.thinking.pop(ev.index, None)
            self.reasoning.append(ev.block)

    def partial_reasoning(self) -> tuple[Reasoning, ...]:
        """The reasoning the caller was shown: whole blocks, then any block cut while open."""
        cut = [
            Reasoning(text="".join(parts), source=self.source, origin=self.upstream.key if self.upstream else None)
            for _, parts in sorted(self.thinking.items())
            if parts
        ]
        return (*self.reasoning, *cut)

    def flush(self) -> None:
        """The attempt succeeded before its commit point (a short answer held whole, an empty
        answer, reasoning only): what it held goes to the caller now, before the terminal event."""
        if not self.started and self.held and self.sink is not None:
            self._commit()

    def discard_attempt(self) -> None:
        """The attempt failed before its commit point: its held events never existed."""
        self.held.clear()
        self.first_content_at, self.pending = None, 0

    def restart(self, failure: Failure) -> None:
        previous = self.response_id
        self.response_id = new_id("resp_")
        self.started, self.text, self.calls = False, [], []
        self.reasoning, self.thinking = [], {}
        self.first_content_at, self.pending = None, 0
        if self.sink is not None:
            self.sink(Restarted(response_id=self.response_id, previous_id=previous, failure=failure))


def _no_clock() -> float:
    return 0.0


def _token_estimate(ev: StreamEvent) -> int:
    """About how many tokens a content event carries (four characters a token, at least one)."""
    if isinstance(ev, TextDelta | ReasoningDelta):
        return max(1, len(ev.text) // 4)
    if isinstance(ev, ToolCallDelta):
        return max(1, len(ev.arguments) // 4)
    return 1


@dataclass(frozen=True, slots=True)
class StreamTimers:
    """When one streamed attempt's single timer fires, by phase (loop times and seconds).

    Before its commit point the attempt ends by ``uncommitted_end`` (the deadline less the next
    tier's reserve) and may stay silent at most ``quiet`` seconds (before the first event and
    between events); once committed, the next tier can no longer be used, so only the target's
    own idle cap and ``committed_end`` (its total cap, within the deadline) apply."""

    start: float
    first_event: float  # seconds from the start to the first event
    idle: float  # seconds between events
    quiet: float  # the most silence an uncommitted attempt may keep (inf: no next tier waits)
    uncommitted_end: float
    committed_end: float

    def first(self) -> float:
        return min(self.start + min(self.first_event, self.quiet), self.uncommitted_end)

    def after_event(self, now: float, committed: bool) -> float:
        if committed:
            return min(now + self.idle, self.committed_end)
        return min(now + min(self.idle, self.quiet), self.uncommitted_end)

    def paused(self, committed: bool) -> float:
        return self.committed_end if committed else self.uncommitted_end

    def expired(self, now: float, first_at: float | None, committed: bool) -> Failure:
        """The timeout that fired at ``now``, as the attempt's Failure."""
        end = self.committed_end if committed else self.uncommitted_end
        if now >= end - 1e-9:
            phase = TimeoutPhase.TOTAL
            kept = not committed and self.uncommitted_end < self.committed_end
            what = f"no complete response within the {end - self.start:.3f}s this attempt had"
            return Failure(
                kind=FailureKind.TIMEOUT,
                phase=phase,
                message=what + (" (the rest is kept for the next tier)" if kept else ""),
            )
        if first_at is None:
            phase, cap = TimeoutPhase.FIRST_EVENT, self.first_event
        else:
            phase, cap = TimeoutPhase.IDLE, self.idle
        kept = not committed and self.quiet < cap
        if kept:
            cap = self.quiet
        message = f"no {phase.value} event within {cap:.3f}s"
        return Failure(
            kind=FailureKind.TIMEOUT,
            phase=phase,
            message=message + (" (a silent stream leaves the rest to the next tier)" if kept else ""),
        )


async def stream_exchange(
    router: RouterParts,
    out: Output,
    target: Target,
    request: Request,
    timers: StreamTimers,
    connect: float,
) -> tuple[int | None, Response | Failure, float | None, bool, float]:
    """One streamed attempt: ``(status, outcome, loop time of the first event, streamed,
    seconds held back for the caller)``; its events go to ``out``, held until its commit point
    (:class:`Output`).

    ``streamed`` is False when the server answered the stream request with a plain JSON body
    (some OpenAI-compatible servers ignore ``stream: true``): that body is read as the plain
    answer it is, and a streaming caller is shown its content as events."""
    loop = asyncio.get_running_loop()
    transport = router.transport
    if not hasattr(transport, "stream"):
        raise TypeError(f"{type(transport).__name__} cannot stream: it has no stream() method")
    st: StreamingTransport = transport  # type: ignore[assignment]
    dialect = router.dialect(target)
    out.source, out.upstream = dialect.reasoning_source, target
    out.max_tokens = request.max_tokens
    first_at: float | None = None
    status: int | None = None
    outcome: Response | Failure
    streamed = True
    held = _Held(loop)  # the time the caller's backpressure held this attempt back
    try:
        async with LazyTimeout(timers.first(), loop) as timer:
            http = dialect.build(target, request, stream=True)
            if router.auth.needed(target):
                http = await router.auth.authorize(target, http)
            async with st.stream(http, connect_timeout=connect) as resp:
                status = resp.status
                if status != 200:
                    body = await resp.aread()
                    parsed = dialect.parse(target, HttpResponse(status=status, headers=resp.headers, body=body))
                    outcome = parsed if isinstance(parsed, Failure) else _odd_status(status)
                elif _plain_json(resp.headers):
                    body = await resp.aread()
                    first_at, streamed = loop.time(), False
                    outcome = dialect.parse(target, HttpResponse(status=status, headers=resp.headers, body=body))
                    if isinstance(outcome, Response):
                        out.deliver(response_events(outcome))
                else:
                    parser = dialect.stream_parser(target, request, resp.headers)
                    limit = getattr(transport, "max_response_bytes", MAX_EVENT_CHARS)
                    decoder = stream_decoder(dialect, limit)  # SSE, or the dialect's own framing
                    # Until the first event, the bytes are kept: a server that answers a stream
                    # request with one JSON document under an event-stream (or no) content type
                    # sends no event at all, and that document is its answer.
                    raw: list[bytes] | None = []
                    kept = 0
                    async for chunk in resp.aiter_bytes():
                        held.resumed = False  # a byte since the caller let it go on
                        if raw is not None:
                            if first_at is None and kept + len(chunk) <= limit:
                                raw.append(chunk)
                                kept += len(chunk)
                            else:
                                raw = None
                        # A big read (a provider far ahead of a slow caller) is fed in slices, so
                        # the caller's backpressure holds it back every slice: at most a slice's
                        # events are decoded ahead of the bounded buffer, not a whole read's.
                        for at in range(0, len(chunk), FEED_SLICE):
                            items = decoder.feed(chunk if len(chunk) <= FEED_SLICE else chunk[at : at + FEED_SLICE])
                            if not items:
                                continue
                            for item in items:
                                if isinstance(item, SSEComment):
                                    continue
                                if first_at is None:
                                    first_at = loop.time()
                                out.deliver(parser.feed(item))
                            if out.pause is not None and (behind := out.pause()) is not None:
                                # the caller is not reading: stop reading upstream (its socket fills
                                # and the provider waits) until it has; only the total cap runs meanwhile
                                timer.move(timers.paused(out.started))
                                with held:
                                    await behind
                            if first_at is not None:  # any event or heartbeat after the first resets idle
                                timer.move(timers.after_event(loop.time(), out.started))
                    for item in decoder.flush():
                        if not isinstance(item, SSEComment):
                            first_at = first_at or loop.time()
                            out.deliver(parser.feed(item))
                    body = b"".join(raw) if first_at is None and raw else b""
                    if body.lstrip()[:1] in (b"{", b"["):
                        first_at, streamed = loop.time(), False
                        outcome = dialect.parse(target, HttpResponse(status=status, headers=resp.headers, body=body))
                        if isinstance(outcome, Response):
                            out.deliver(response_events(outcome))
                    else:
                        outcome = parser.finish()
    except TimeoutError:
        outcome = held.blame(timers.expired(loop.time(), first_at, out.started), timers.start)
    except StreamFailed as exc:
        outcome = exc.failure
    except EventTooLarge as exc:  # leaving the stream's block has closed the connection
        outcome = Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, status=status, message=str(exc))
    except (TransportError, AuthError) as exc:
        left = timers.committed_end - timers.start
        outcome = exchange_failure(exc, timers.uncommitted_end - timers.start, left, target, status)
        if isinstance(exc, TransportError):
            outcome = held.blame(outcome, timers.start, dropped=True)
    if isinstance(outcome, Failure) and not out.started:
        out.discard_attempt()
    return status, outcome, first_at, streamed, held.total


# The share of an attempt's time that, held back for the caller, makes its cut the caller's.
CALLER_SHARE = 0.5


class _Held:
    """The time one streamed attempt was held back for its caller (``with held: await ...``).

    :meth:`blame` says whose a cut is: the caller's (``not_target="slow_reader"``) when the
    attempt was held back at that moment, or had been held back at least :data:`CALLER_SHARE`
    of its time; a dropped connection also when no byte arrived since the caller let the
    stream go on (a provider may close a connection nobody read for a while)."""

    __slots__ = ("_since", "cut", "loop", "resumed", "total")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.total = 0.0
        self.resumed = False  # held back, and no byte since
        self.cut = False  # the attempt ended while held back
        self._since = 0.0

    def __enter__(self) -> None:
        self._since = self.loop.time()

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.total += self.loop.time() - self._since
        self.resumed = True
        self.cut = kind is not None

    def blame(self, failure: Failure, start: float, *, dropped: bool = False) -> Failure:
        took = self.loop.time() - start
        if not (self.cut or (dropped and self.resumed) or (self.total > 0 and self.total >= CALLER_SHARE * took)):
            return failure
        return replace(
            failure,
            not_target=SLOW_READER,
            message=f"{failure.message}; the caller's slow reading held the stream back "
            f"{self.total:.3f}s of its {took:.3f}s (not the provider's failure)",
        )


def _plain_json(headers: Mapping[str, str]) -> bool:
    """A 200 whose body is one JSON document, not an event stream."""
    ctype = (headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    return ctype == "application/json" or ctype.endswith("+json")


def response_events(resp: Response) -> list[StreamEvent]:
    """A whole answer as the events a stream of it would have carried."""
    events: list[StreamEvent] = []
    for i, block in enumerate(resp.reasoning):
        if block.text:
            events.append(ReasoningDelta(index=i, text=block.text))
        events.append(ReasoningDone(index=i, block=block))
    if resp.text:
        events.append(TextDelta(text=resp.text))
    for i, call in enumerate(resp.tool_calls):
        events.append(ToolCallStart(index=i, id=call.id, name=call.name))
        if call.arguments:
            events.append(ToolCallDelta(index=i, arguments=call.arguments))
        events.append(ToolCallDone(index=i, call=call))
    events.append(UsageUpdate(usage=resp.usage))
    events.append(ModelStop(reason=resp.stop_reason, raw=resp.raw_stop_reason))
    return events


def _odd_status(status: int) -> Failure:
    return Failure(
        kind=FailureKind.PROVIDER_SERVER_ERROR, status=status, message=f"unexpected HTTP {status} on a stream"
    )


_END = object()
BUFFERED_EVENTS = 64  # events a RouteStream holds for a caller that does not read; then upstream waits
_RESUME_AT = BUFFERED_EVENTS // 4  # the upstream reader resumes once the caller is down to this
FEED_SLICE = 16 * 1024  # bytes of one upstream read decoded before the caller's backpressure is asked


class StreamedRun(Protocol):
    """The request a RouteStream runs (the router's run, as the stream sees it)."""

    router: RouterParts
    route: Route
    rec: Recorder
    loop: asyncio.AbstractEventLoop
    output: Output

    async def execute(self) -> Response: ...

    def ended(self, record: RouteRecord | None) -> None: ...

    def left(self, outcome: str = "cancelled") -> RouteRecord: ...

    def capped_to(self, sent: int | None) -> int | None: ...


class RouteStream:
    """The stream a caller iterates; see :meth:`Router.stream`.

    Iterating yields StreamEvents and then exactly one terminal event (``Completed`` or
    ``PartialOutput``). A failure before any output raises ``Unavailable``. Leaving the
    ``async with`` block (or ``aclose()``) at any point cancels the request: the upstream
    HTTP stream is closed at once.

    The events between the upstream and the caller are bounded: once about
    ``BUFFERED_EVENTS`` wait for a caller that does not iterate, the upstream stream is no
    longer read (the provider's writes wait on its socket) until the caller catches up.
    ``record``: the request's RouteRecord once it ended, also when it was cancelled
    (outcome ``cancelled``).
    """

    def __init__(self, run: StreamedRun, request: Request, *, coalesce: float | None = None) -> None:
        self._run = run
        self._request = request  # for the route's degraded answer
        self._coalesce = coalesce
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._held: object = _END
        self._finished = False
        self._room: asyncio.Future[None] | None = None  # the upstream reader waits on it
        self.result: Terminal | None = None
        self.record: RouteRecord | None = None
        run.output.sink = self._queue.put_nowait
        run.output.pause = self._pause

    def _pause(self) -> asyncio.Future[None] | None:
        """For the upstream reader after each chunk: None while the caller keeps up, else a
        future it awaits, resolved when the caller has read the backlog down."""
        if self._queue.qsize() < BUFFERED_EVENTS:
            return None
        room = self._room
        if room is None or room.done():
            room = self._room = self._run.loop.create_future()
        return room

    def _took(self) -> None:
        """The caller took an event: let a waiting upstream reader go on once there is room."""
        room = self._room
        if room is not None and self._queue.qsize() <= _RESUME_AT:
            self._room = None
            if not room.done():
                room.set_result(None)

    @property
    def response_id(self) -> str:
        return self._run.output.response_id

    @property
    def ready(self) -> bool:
        """The next event is already here (iterating would not wait): a relay may write what it
        has with the next one, in one write, instead of one write each."""
        return self._held is not _END or not self._queue.empty()

    @property
    def target(self) -> str | None:
        """The name of the target whose answer the caller is being shown, once the first event
        was yielded (see :attr:`model`)."""
        shown = self._run.output.upstream
        return shown.name if shown is not None else None

    @property
    def model(self) -> str | None:
        """The model whose answer the caller is being shown (the target's ``model``), once the
        first event was yielded; None before any attempt streamed."""
        shown = self._run.output.upstream
        return shown.model if shown is not None else None

    @property
    def max_tokens_capped_to(self) -> int | None:
        """The max_tokens the attempt the caller is being shown was sent, when that is less
        than the request's (capped to its target's max output, see ``Route.max_tokens_policy``);
        None when it was sent the request's own, or before the first event was yielded."""
        run = self._run
        return run.capped_to(run.output.max_tokens) if run.output.upstream is not None else None

    async def _produce(self) -> None:
        run = self._run
        record: RouteRecord | None = None  # the final record, for the telemetry hooks
        try:
            response = await run.execute()
        except Unavailable as exc:
            run.router.stats.observe(record := exc.record)
            fallback = await degraded(run.router.degrade.get(run.route.name), self._request, exc)
            if fallback is not None:
                record = fallback.record
            self._queue.put_nowait(exc if fallback is None else Completed(response=fallback))
        except _Partial as p:
            run.router.stats.observe(record := p.event.record)
            self._queue.put_nowait(p.event)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):  # the caller left (or closed the stream)
                record = run.left()
            self._queue.put_nowait(exc)
            raise
        else:
            if (record := response.record) is not None:
                run.router.stats.observe(record)
            run.output.flush()
            self._queue.put_nowait(Completed(response=response))
        finally:
            self.record = record
            if run.router.hooks:
                run.ended(record)

    async def __aenter__(self) -> RouteStream:
        self._task = asyncio.create_task(self._produce(), name=f"failover-stream-{self._run.rec.request_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop: cancel the request and close the upstream stream now."""
        self._finished = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def __aiter__(self) -> RouteStream:
        return self

    async def _get(self) -> object:
        if self._held is not _END:
            item, self._held = self._held, _END
            return item
        item = await self._queue.get()
        if self._room is not None:
            self._took()
        return item

    async def __anext__(self) -> StreamEvent | Terminal:
        if self._finished:
            raise StopAsyncIteration
        if self._task is None:
            raise RuntimeError("use `async with router.stream(...) as s:` before iterating")
        item = await self._get()
        if isinstance(item, TextDelta) and self._coalesce:
            item = await self._merge(item)
        if isinstance(item, BaseException):
            self._finished = True
            raise item
        if isinstance(item, Completed | PartialOutput):
            self._finished = True
            self.result = item
        return item  # type: ignore[return-value]

    async def _merge(self, first: TextDelta) -> TextDelta:
        """Merge text deltas arriving within the window; anything else ends the merge, in order."""
        assert self._coalesce is not None
        loop = asyncio.get_running_loop()
        until = loop.time() + self._coalesce
        parts = [first.text]
        while True:
            left = until - loop.time()
            try:
                nxt = self._queue.get_nowait() if left <= 0 else await asyncio.wait_for(self._queue.get(), left)
            except (TimeoutError, asyncio.QueueEmpty):
                break
            if self._room is not None:
                self._took()
            if isinstance(nxt, TextDelta):
                parts.append(nxt.text)
                continue
            self._held = nxt
            break
        return first if len(parts) == 1 else TextDelta(text="".join(parts))


class _Partial(Exception):
    """Internal: the current response was cut after output reached the caller."""

    def __init__(self, event: PartialOutput) -> None:
        super().__init__(event.failure.message)
        self.event = event
