"""One scripted answer of a fake provider: the kinds there are, and a :class:`Reply` of each.

A reply is plain immutable data built by a constructor named after its kind
(``Reply.rate_limit(retry_after=2)``), and it has a string form that reads back to an equal
reply (``"rate_limit(retry_after=2)"``; see :mod:`._forms`). The 200 kinds share their
keyword arguments (what the answer says, how it is paced): each such constructor names its
own arguments and takes the shared ones as one typed group, checked here as Python checks a
signature.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypedDict, Unpack

from ._forms import read_form, write_form
from ._kinds import STREAM_FAULT_KINDS, ReplyKind

__all__ = ["FakeToolCall", "Forever", "Reply", "ReplySpec", "ToolCallSpec"]


_OK_BODY_KINDS = frozenset(
    {
        ReplyKind.OK,
        ReplyKind.DELAY,
        ReplyKind.TRUNCATE,
        ReplyKind.REFUSE,
        ReplyKind.CONTENT_FILTER,
        ReplyKind.MALFORMED_TOOL_ARGS,
        ReplyKind.SCHEMA_INVALID,
        *STREAM_FAULT_KINDS,
    }
)

Forever: TypeAlias = Literal["forever"]
"""``seconds="forever"`` (or None, or ``math.inf``): a stall that never ends by itself."""


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call a fake model makes: ``FakeToolCall("get_weather", {"city": "Paris"})``."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value: FakeToolCall | Mapping[str, Any] | Sequence[Any]) -> FakeToolCall:
        """Accept a FakeToolCall, ``{"name": ..., "args": {...}}`` or ``(name, args)``."""
        if isinstance(value, FakeToolCall):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"name", "args", "arguments"}
            if "name" not in value or unknown:
                raise ValueError(f"a tool call needs 'name' and optional 'args', got {dict(value)!r}")
            args = value.get("args", value.get("arguments", {}))
            return cls._checked(value["name"], args)
        if isinstance(value, Sequence) and not isinstance(value, str) and len(value) in (1, 2):
            return cls._checked(value[0], value[1] if len(value) == 2 else {})
        raise ValueError(f"a tool call is (name, args) or {{'name': ..., 'args': ...}}, got {value!r}")

    @classmethod
    def _checked(cls, name: object, args: object) -> FakeToolCall:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool call name must be a non-empty string, got {name!r}")
        if not isinstance(args, Mapping):
            raise ValueError(f"tool call {name!r}: args must be a mapping, got {args!r}")
        return cls(name, dict(args))


ToolCallSpec: TypeAlias = "FakeToolCall | Mapping[str, Any] | Sequence[Any]"
# A reply's usage: (input_tokens, output_tokens), or with the provider's cached input tokens
# (prompt-cache reads, part of input_tokens) as a third number, which each dialect reports in
# its own field (OpenAI prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens...).
UsageSpec: TypeAlias = "tuple[int, int] | tuple[int, int, int]"


# The keyword arguments the 200 constructors share, in groups. Each constructor names its own
# arguments and takes one group as ``**``; :func:`_taken` refuses a keyword outside it.


class _Delivery(TypedDict, total=False):
    chunk_interval: float  # seconds between two stream events
    split_bytes: int | None  # write each event in pieces of this many bytes
    latency: float  # seconds before any answer


class _Paced(_Delivery, total=False):
    heartbeat_interval: float | None  # a keep-alive after this many seconds of silence


class _Content(TypedDict, total=False):
    tool_calls: Iterable[ToolCallSpec]
    json: Mapping[str, Any] | None
    usage: UsageSpec | None
    reasoning: str | None
    redacted_thinking: bool
    interleave: bool


class _Answer(_Content, _Paced, total=False):
    """What ``ok`` takes besides its text: the answer's content and its pacing."""


class _Told(_Answer, total=False):
    """The answer a delayed or faulty 200 sends, its text included."""

    text: str | None


class _Queued(_Content, _Delivery, total=False):
    """``heartbeats_only``'s answer: its keep-alive interval is its own first argument."""

    text: str | None


class _Waits(TypedDict, total=False):
    """What ``rate_limit`` and ``overloaded`` take besides ``retry_after``."""

    retry_after_ms: float | None
    retry_after_date: float | None
    message: str | None
    latency: float


_WAITS = _Waits.__optional_keys__
_PACED = _Paced.__optional_keys__
_ANSWER = _Answer.__optional_keys__
_TOLD = _Told.__optional_keys__
_QUEUED = _Queued.__optional_keys__


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer. Build it with a constructor named after its kind.

    >>> Reply.ok("hello")
    Reply.ok('hello')
    >>> Reply.rate_limit(retry_after=2)
    Reply.rate_limit(retry_after=2)
    >>> Reply.parse("delay(1.5, text='late')")
    Reply.delay(1.5, text='late')

    ``latency`` is waited before ANY answer (also before an error, a reset or a hang);
    ``delay(seconds)`` adds its own wait and then answers like ``ok``. Fields a kind does not
    use are ignored by it. The provider's own ``latency`` is added on top.

    Every 200 reply can be delivered over time: ``chunk_interval`` seconds between stream
    events, a keep-alive every ``heartbeat_interval`` seconds of silence, each event written
    in pieces of ``split_bytes`` bytes. The stream-fault kinds (``stall_after(3, 10)``,
    ``drop_after(2)``...) script what goes wrong, and when.

    >>> Reply.ok("one two three", chunk_interval=0.05)
    Reply.ok('one two three', chunk_interval=0.05)
    >>> Reply.parse("stall_after(3, 10)")
    Reply.stall_after(3, 10)
    """

    kind: ReplyKind = ReplyKind.OK
    latency: float = 0.0
    seconds: float | None = 0.0  # delay: the wait before the answer; stalls: how long (None: forever)
    text: str | None = None  # ok / delay / truncate: the text; refuse: the refusal message
    tool_calls: tuple[FakeToolCall, ...] = ()
    json: Mapping[str, Any] | None = None  # structured output: returned as the text (or forced tool input)
    # (input_tokens, output_tokens) or (input_tokens, output_tokens, cached_input_tokens), the
    # cached ones part of the input; default: estimated, nothing cached
    usage: UsageSpec | None = None
    retry_after: float | None = None  # rate_limit / overloaded: seconds header (Gemini: RetryInfo)
    retry_after_ms: float | None = None  # rate_limit / overloaded: milliseconds header
    retry_after_date: float | None = None  # rate_limit / overloaded: seconds from now, as an HTTP-date
    message: str | None = None  # errors: replace the provider's default message
    prompt_tokens: int | None = None  # context_overflow: the N in "N tokens > M maximum"
    limit: int | None = None  # context_overflow: the M (the model's window)
    arguments: str | None = None  # malformed_tool_args: the raw, invalid argument text
    after: int | None = None  # stream faults: how many events are sent before the fault
    chunk_interval: float = 0.0  # streams: seconds between two events
    heartbeat_interval: float | None = None  # streams: a keep-alive after this many seconds of silence
    split_bytes: int | None = None  # streams: write each event in pieces of this many bytes
    plain: bool = False  # ok / delay: a JSON body even to a stream request (as some servers do)
    reasoning: str | None = None  # 200s: the model's reasoning, in the dialect's own shape
    redacted_thinking: bool = False  # 200s, Anthropic: a redacted_thinking block after the thinking
    interleave: bool = False  # 200s, OpenAI streams: parallel tool calls' fragments interleave
    cause: ReplyKind | None = None  # error_event_after: overloaded (default), rate_limit or server_error

    def __post_init__(self) -> None:
        _settle(self)

    # -- constructors, one per kind -----------------------------------------------------------

    @classmethod
    def ok(cls, text: str | None = None, *, plain: bool = False, **answer: Unpack[_Answer]) -> Reply:
        """A 200. Default text: ``"ok from <provider>"``; for a structured-output request, an
        object built from the requested schema; for a request that forces a tool, a call to it.
        ``json`` is sent as the text (or as the forced tool's input).

        Streamed, the text goes a word per delta and tool arguments in 8-character fragments;
        ``chunk_interval`` spaces the events on the loop clock, ``heartbeat_interval`` adds a
        keep-alive in every silence that long, ``split_bytes`` writes each event in pieces.
        ``plain=True`` answers a stream request with the plain JSON body instead, as some
        OpenAI-compatible servers do when they ignore ``stream: true``.

        ``reasoning`` is what the model thought first, in each dialect's own shape: OpenAI
        ``reasoning_content`` (as DeepSeek sends it: deltas before the answer, a message
        field in a body); Anthropic a ``thinking`` block (``thinking_delta`` pieces, then a
        ``signature_delta`` with a fake signature), followed by a ``redacted_thinking`` block
        when ``redacted_thinking=True``; Gemini ``thought: true`` parts, with a
        ``thoughtSignature`` on the first function-call part (else on the last text part).
        ``interleave=True`` interleaves the argument fragments of parallel tool calls in an
        OpenAI stream (each call's head, then one fragment of each call in turn), as some
        servers send them; other dialects send calls one after the other, as their APIs do.

        ``usage=(input, output)`` sets the token counts; a third number is how many of the
        input tokens were read from the provider's prompt cache, which each dialect reports
        in its own field (Anthropic and Bedrock leave them out of their input count)."""
        return _make(cls, ReplyKind.OK, _taken(ReplyKind.OK, answer, _ANSWER), text=text, plain=plain)

    @classmethod
    def delay(cls, seconds: float, *, plain: bool = False, **told: Unpack[_Told]) -> Reply:
        """Wait ``seconds`` (on the loop clock), then answer like :meth:`ok`."""
        return _make(cls, ReplyKind.DELAY, _taken(ReplyKind.DELAY, told, _TOLD), seconds=seconds, plain=plain)

    @classmethod
    def hang(cls, *, latency: float = 0.0) -> Reply:
        """Never answer. The call ends when the client times out, is cancelled or disconnects."""
        return cls(kind=ReplyKind.HANG, latency=latency)

    @classmethod
    def rate_limit(cls, retry_after: float | None = None, **waits: Unpack[_Waits]) -> Reply:
        """429. ``retry_after`` becomes ``retry-after`` in seconds (Gemini: ``RetryInfo.retryDelay``),
        ``retry_after_ms`` becomes ``retry-after-ms``, ``retry_after_date`` (seconds from now)
        becomes ``retry-after`` as an HTTP-date beside the response's ``date``. None given: no
        hint at all."""
        kind = ReplyKind.RATE_LIMIT
        return _make(cls, kind, _taken(kind, waits, _WAITS), retry_after=retry_after)

    @classmethod
    def quota(cls, *, message: str | None = None, latency: float = 0.0) -> Reply:
        """Out of money: OpenAI 429 ``insufficient_quota``; Anthropic 400 "credit balance is too
        low"; Gemini 429 ``RESOURCE_EXHAUSTED`` on a per-day quota, without ``RetryInfo``."""
        return cls(kind=ReplyKind.QUOTA, message=message, latency=latency)

    @classmethod
    def overloaded(cls, retry_after: float | None = None, **waits: Unpack[_Waits]) -> Reply:
        """Anthropic 529 ``overloaded_error``; OpenAI 503 ``server_is_overloaded``; Gemini 503
        ``UNAVAILABLE``. The wait hints as for :meth:`rate_limit`."""
        kind = ReplyKind.OVERLOADED
        return _make(cls, kind, _taken(kind, waits, _WAITS), retry_after=retry_after)

    @classmethod
    def server_error(cls, *, message: str | None = None, latency: float = 0.0) -> Reply:
        """500 (OpenAI ``server_error``, Anthropic ``api_error``, Gemini ``INTERNAL``)."""
        return cls(kind=ReplyKind.SERVER_ERROR, message=message, latency=latency)

    @classmethod
    def unauthorized(cls, *, message: str | None = None, latency: float = 0.0) -> Reply:
        """401 (OpenAI ``invalid_api_key``, Anthropic ``authentication_error``); Gemini answers a
        bad key with 400 ``INVALID_ARGUMENT`` / ``API_KEY_INVALID``."""
        return cls(kind=ReplyKind.UNAUTHORIZED, message=message, latency=latency)

    @classmethod
    def not_found(cls, *, message: str | None = None, latency: float = 0.0) -> Reply:
        """404: the requested model does not exist (or this key may not use it)."""
        return cls(kind=ReplyKind.NOT_FOUND, message=message, latency=latency)

    @classmethod
    def context_overflow(
        cls,
        *,
        prompt_tokens: int | None = None,
        limit: int | None = None,
        message: str | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """400 with the dialect's real message. ``limit`` defaults to the dialect's usual window,
        ``prompt_tokens`` to the larger of the request's estimate and ``limit + 1``."""
        kind = ReplyKind.CONTEXT_OVERFLOW
        return cls(kind=kind, prompt_tokens=prompt_tokens, limit=limit, message=message, latency=latency)

    @classmethod
    def invalid(cls, message: str | None = None, *, latency: float = 0.0) -> Reply:
        """400: the request itself is wrong (resending it cannot help)."""
        return cls(kind=ReplyKind.INVALID, message=message, latency=latency)

    @classmethod
    def truncate(
        cls,
        text: str | None = None,
        *,
        usage: UsageSpec | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        **paced: Unpack[_Paced],
    ) -> Reply:
        """200 cut off by the output limit: ``length`` / ``max_tokens`` / ``MAX_TOKENS``."""
        said = {"text": text, "usage": usage, "reasoning": reasoning, "redacted_thinking": redacted_thinking}
        return _make(cls, ReplyKind.TRUNCATE, _taken(ReplyKind.TRUNCATE, paced, _PACED), **said)

    @classmethod
    def refuse(cls, text: str | None = None, **paced: Unpack[_Paced]) -> Reply:
        """200 refusal: OpenAI ``message.refusal``; Anthropic ``stop_reason: refusal``; Gemini
        ``finishReason: SAFETY``. ``text`` is the refusal message where the dialect has one."""
        return _make(cls, ReplyKind.REFUSE, _taken(ReplyKind.REFUSE, paced, _PACED), text=text)

    @classmethod
    def content_filter(cls, **paced: Unpack[_Paced]) -> Reply:
        """200 blocked by a filter: OpenAI ``finish_reason: content_filter``; Anthropic
        ``stop_reason: refusal``; Gemini ``promptFeedback.blockReason`` with no candidates."""
        return _make(cls, ReplyKind.CONTENT_FILTER, _taken(ReplyKind.CONTENT_FILTER, paced, _PACED))

    @classmethod
    def malformed_tool_args(
        cls, name: str | None = None, *, arguments: str | None = None, **paced: Unpack[_Paced]
    ) -> Reply:
        """200 with a tool call whose arguments are not valid JSON.

        OpenAI: ``function.arguments`` is the broken text. Anthropic: ``tool_use.input`` is that
        text as a JSON string instead of an object (streamed: ``input_json_delta`` fragments
        that never close). Gemini cannot carry broken JSON (``args`` is a Struct): it answers
        ``finishReason: MALFORMED_FUNCTION_CALL`` with a ``finishMessage``, as the real API does.
        ``name`` defaults to the request's forced or first tool.
        """
        kind = ReplyKind.MALFORMED_TOOL_ARGS
        calls = (FakeToolCall(name, {}),) if name else ()
        return _make(cls, kind, _taken(kind, paced, _PACED), tool_calls=calls, arguments=arguments)

    @classmethod
    def schema_invalid(cls, json: Mapping[str, Any] | None = None, **paced: Unpack[_Paced]) -> Reply:
        """200 whose JSON does not match the requested schema (default ``{"wrong": 1}``)."""
        return _make(cls, ReplyKind.SCHEMA_INVALID, _taken(ReplyKind.SCHEMA_INVALID, paced, _PACED), json=json)

    @classmethod
    def reset(cls, *, latency: float = 0.0) -> Reply:
        """The server closes the connection without answering (a read-phase transport error)."""
        return cls(kind=ReplyKind.RESET, latency=latency)

    @classmethod
    def connect_error(cls, *, latency: float = 0.0) -> Reply:
        """The connection is never made: ``FakeNetwork`` raises ``TransportError("connect")``
        (a ``latency`` at or above the connect timeout becomes a connect timeout). A real
        server cannot refuse one request on an open connection: ``FakeServer`` closes it,
        as for ``reset``."""
        return cls(kind=ReplyKind.CONNECT_ERROR, latency=latency)

    # -- stream faults ------------------------------------------------------------------------
    #
    # Each sends a 200 and the answer ``ok`` would send (same ``text``, ``tool_calls``, ``json``,
    # ``usage``), going wrong as its name says. ``after`` is capped at the number of events
    # before the stream's last one, so the fault always comes before the stream's end. A
    # request that did not ask for a stream gets its JSON body as a single event.

    @classmethod
    def stall_before_first(cls, seconds: float | Forever | None = None, **told: Unpack[_Told]) -> Reply:
        """The status and headers, then nothing for ``seconds`` (default: forever), then the
        stream. The first-event timeout's fault."""
        kind = ReplyKind.STALL_BEFORE_FIRST
        return _make(cls, kind, _taken(kind, told, _TOLD), seconds=_duration(seconds))

    @classmethod
    def stall_after(cls, after: int, seconds: float | Forever | None = None, **told: Unpack[_Told]) -> Reply:
        """``after`` events, then nothing for ``seconds`` (default: forever), then the rest of the
        stream. The idle timeout's fault; with ``heartbeat_interval``, keep-alives flow while
        the stream makes no progress."""
        kind = ReplyKind.STALL_AFTER
        return _make(cls, kind, _taken(kind, told, _TOLD), after=after, seconds=_duration(seconds))

    @classmethod
    def heartbeats_only(
        cls, heartbeat_interval: float, seconds: float | Forever | None = None, **queued: Unpack[_Queued]
    ) -> Reply:
        """The headers, then only keep-alives (``: keep-alive`` comments; Anthropic ``event:
        ping``), one every ``heartbeat_interval`` seconds, for ``seconds`` (default: forever),
        then the stream: a request queued the way DeepSeek documents it. Bytes arrive, but no
        event ever does while it lasts. The keep-alives go on between later events too."""
        kind = ReplyKind.HEARTBEATS_ONLY
        given = _taken(kind, queued, _QUEUED)
        return _make(cls, kind, given, heartbeat_interval=heartbeat_interval, seconds=_duration(seconds))

    @classmethod
    def drop_after(cls, after: int, **told: Unpack[_Told]) -> Reply:
        """``after`` events, then the connection closes (when the next event was due) with no
        terminal event: ``FakeNetwork`` raises ``TransportError("read")`` from the body, an
        HTTP client sees an incomplete chunked body. Recorded ``reset``."""
        return _make(cls, ReplyKind.DROP_AFTER, _taken(ReplyKind.DROP_AFTER, told, _TOLD), after=after)

    @classmethod
    def end_after(cls, after: int, **told: Unpack[_Told]) -> Reply:
        """``after`` events, then the body ends cleanly (a complete HTTP body, the connection
        intact, when the next event was due) with no terminal event: an OpenAI stream without
        its ``data: [DONE]`` (``end_after(10**6)``: every event but the last), an Anthropic one
        without ``message_stop``. Recorded ``completed``, with the events sent. A request that
        did not ask for a stream gets its whole JSON body (it has no terminal event)."""
        return _make(cls, ReplyKind.END_AFTER, _taken(ReplyKind.END_AFTER, told, _TOLD), after=after)

    @classmethod
    def malformed_after(cls, after: int, **told: Unpack[_Told]) -> Reply:
        """``after`` good events, then one whose ``data:`` is cut in half (not JSON, framing
        intact), then the rest of the stream. Anthropic pings are not chosen (clients skip
        them unread)."""
        return _make(cls, ReplyKind.MALFORMED_AFTER, _taken(ReplyKind.MALFORMED_AFTER, told, _TOLD), after=after)

    @classmethod
    def error_event_after(
        cls,
        after: int,
        *,
        cause: ReplyKind | str = ReplyKind.OVERLOADED,
        message: str | None = None,
        **told: Unpack[_Told],
    ) -> Reply:
        """``after`` events, then the dialect's mid-stream error, and the stream ends there.

        ``cause`` picks the error, in the codes each dialect documents:

        * ``"overloaded"`` (default): OpenAI ``server_is_overloaded``, Anthropic
          ``overloaded_error``, Gemini ``503 UNAVAILABLE``;
        * ``"rate_limit"``: OpenAI ``rate_limit_exceeded``, Anthropic ``rate_limit_error``,
          Gemini ``429 RESOURCE_EXHAUSTED``;
        * ``"server_error"``: OpenAI ``server_error``, Anthropic ``api_error``, Gemini
          ``500 INTERNAL``.

        OpenAI sends it as a ``data: {"error": {...}}`` payload (no ``[DONE]`` follows),
        Anthropic as ``event: error``, Gemini as an ``{"error": {...}}`` chunk.
        A request that did not ask for a stream gets the plain error answer of that kind
        instead (a 529 or 503, a 429, a 500)."""
        kind = ReplyKind.ERROR_EVENT_AFTER
        return _make(cls, kind, _taken(kind, told, _TOLD), after=after, cause=_cause(cause), message=message)

    # -- what the reply does ------------------------------------------------------------------

    @property
    def is_http_answer(self) -> bool:
        """False for hang, reset and connect_error: no HTTP response is ever sent."""
        return self.kind not in (ReplyKind.HANG, ReplyKind.RESET, ReplyKind.CONNECT_ERROR)

    @property
    def has_ok_body(self) -> bool:
        """True for the kinds answered with a 200 body (ok, delay, truncate, refuse, ...)."""
        return self.kind in _OK_BODY_KINDS

    @property
    def wait(self) -> float:
        """Seconds this reply waits before answering (latency plus a delay's seconds)."""
        if self.kind is ReplyKind.DELAY and self.seconds:
            return self.latency + self.seconds
        return self.latency

    @property
    def timed(self) -> bool:
        """True when the body is delivered over time (a stream fault, or any stream knob set)."""
        return (
            self.kind in STREAM_FAULT_KINDS
            or self.chunk_interval > 0
            or self.heartbeat_interval is not None
            or self.split_bytes is not None
        )

    # -- data forms ---------------------------------------------------------------------------

    @classmethod
    def parse(cls, spec: ReplySpec, *, where: str = "reply") -> Reply:
        """A Reply from its data form: a Reply, ``"name(kw=value, ...)"``, ``"name"``,
        ``{"kind": name, **kw}`` or ``{name: {**kw}}``. Raises ValueError naming ``where``."""
        if isinstance(spec, Reply):
            return spec
        return read_form(spec, where, _CONSTRUCTORS)

    def to_string(self) -> str:
        """The string form, which :meth:`parse` reads back to an equal Reply."""
        return write_form(self.kind, lambda name: getattr(self, name))

    def __repr__(self) -> str:
        return f"Reply.{self.to_string()}"


ReplySpec: TypeAlias = "Reply | str | Mapping[str, Any]"


# -- building and checking a reply -------------------------------------------------------------


def _taken(kind: ReplyKind, given: Mapping[str, Any], accepted: frozenset[str]) -> Mapping[str, Any]:
    """The shared keyword arguments a constructor was given, each one it accepts (else the
    TypeError Python raises for an unexpected keyword)."""
    for name in given:
        if name not in accepted:
            raise TypeError(f"Reply.{kind.value}() got an unexpected keyword argument {name!r}")
    return given


def _make(cls: type[Reply], kind: ReplyKind, shared: Mapping[str, Any], **named: Any) -> Reply:
    """A reply of ``kind`` from a constructor's own arguments and its shared keywords."""
    fields = dict(shared)
    if "tool_calls" in fields:
        fields["tool_calls"] = _tool_calls(fields["tool_calls"])
    return cls(kind=kind, **named, **fields)


_NUMBERS = (
    "latency",
    "seconds",
    "retry_after",
    "retry_after_ms",
    "retry_after_date",
    "chunk_interval",
    "heartbeat_interval",
)


def _settle(reply: Reply) -> None:
    """Check a new reply's fields and bring each to its one form (a ReplyKind, a tuple of
    FakeToolCall, a usage tuple, a cause): a clear ValueError for a field that cannot be."""
    kind: object = reply.kind
    if not isinstance(kind, ReplyKind):
        object.__setattr__(reply, "kind", ReplyKind(str(kind)))
    for name in _NUMBERS:
        value = getattr(reply, name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0
        ):
            raise ValueError(f"Reply.{name} must be a finite number >= 0, got {value!r}")
    if reply.kind is ReplyKind.DELAY and reply.seconds is None:
        raise ValueError("Reply.delay needs a number of seconds")
    if reply.heartbeat_interval is not None and reply.heartbeat_interval <= 0:
        raise ValueError(f"Reply.heartbeat_interval must be > 0, got {reply.heartbeat_interval!r}")
    for name, low in (("after", 0), ("split_bytes", 1)):
        value = getattr(reply, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValueError(f"Reply.{name} must be an integer >= {low}, got {value!r}")
    if reply.kind in STREAM_FAULT_KINDS and reply.kind.value.endswith("_after") and reply.after is None:
        raise ValueError(f"Reply.{reply.kind.value} needs the number of events to send first")
    if reply.usage is not None:
        usage = tuple(reply.usage)
        if (
            len(usage) not in (2, 3)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in usage)
            or (len(usage) == 3 and usage[2] > usage[0])
        ):
            raise ValueError(
                "Reply.usage is (input_tokens, output_tokens) or (input_tokens, output_tokens, "
                f"cached_input_tokens) with the cached ones part of the input, got {reply.usage!r}"
            )
        object.__setattr__(reply, "usage", usage)
    calls: object = reply.tool_calls
    if not isinstance(calls, tuple) or not all(isinstance(t, FakeToolCall) for t in calls):
        object.__setattr__(reply, "tool_calls", _tool_calls(reply.tool_calls))
    reasoning: object = reply.reasoning
    if reasoning is not None and not isinstance(reasoning, str):
        raise ValueError(f"Reply.reasoning must be a string, got {reasoning!r}")
    for name in ("plain", "redacted_thinking", "interleave"):
        if not isinstance(getattr(reply, name), bool):
            raise ValueError(f"Reply.{name} must be True or False, got {getattr(reply, name)!r}")
    if reply.cause is not None or reply.kind is ReplyKind.ERROR_EVENT_AFTER:
        object.__setattr__(reply, "cause", _cause(reply.cause))


def _tool_calls(values: Iterable[ToolCallSpec]) -> tuple[FakeToolCall, ...]:
    if isinstance(values, str | Mapping):
        raise ValueError(f"tool_calls must be a list of tool calls, got {values!r}")
    return tuple(FakeToolCall.of(v) for v in values)


def _duration(seconds: float | str | None) -> float | None:
    """A stall's length: None, ``"forever"`` and infinity all mean forever (stored as None)."""
    if seconds is None or seconds == "forever":
        return None
    if isinstance(seconds, str):
        raise ValueError(f"a stall lasts a number of seconds or 'forever', got {seconds!r}")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds == math.inf:
        return None
    return seconds


_CAUSES = (ReplyKind.OVERLOADED, ReplyKind.RATE_LIMIT, ReplyKind.SERVER_ERROR)


def _cause(value: object) -> ReplyKind:
    """A mid-stream error's cause: ``overloaded`` (also for None), ``rate_limit`` or ``server_error``."""
    if value is None:
        return ReplyKind.OVERLOADED
    if isinstance(value, str) and value in {c.value for c in _CAUSES}:
        return ReplyKind(value)
    choices = ", ".join(repr(c.value) for c in _CAUSES)
    raise ValueError(f"a mid-stream error's cause is one of {choices}, got {value!r}")


_CONSTRUCTORS: dict[str, Callable[..., Reply]] = {
    "ok": Reply.ok,
    "delay": Reply.delay,
    "hang": Reply.hang,
    "rate_limit": Reply.rate_limit,
    "quota": Reply.quota,
    "overloaded": Reply.overloaded,
    "server_error": Reply.server_error,
    "unauthorized": Reply.unauthorized,
    "not_found": Reply.not_found,
    "context_overflow": Reply.context_overflow,
    "invalid": Reply.invalid,
    "truncate": Reply.truncate,
    "refuse": Reply.refuse,
    "content_filter": Reply.content_filter,
    "malformed_tool_args": Reply.malformed_tool_args,
    "schema_invalid": Reply.schema_invalid,
    "reset": Reply.reset,
    "connect_error": Reply.connect_error,
    "stall_before_first": Reply.stall_before_first,
    "stall_after": Reply.stall_after,
    "heartbeats_only": Reply.heartbeats_only,
    "drop_after": Reply.drop_after,
    "end_after": Reply.end_after,
    "malformed_after": Reply.malformed_after,
    "error_event_after": Reply.error_event_after,
}
assert set(_CONSTRUCTORS) == {k.value for k in ReplyKind}
