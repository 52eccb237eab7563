"""Scenario data: what a fake provider answers, call after call.

A :class:`Reply` describes ONE answer (a success, a 429, a hang, a reset connection...).
A :class:`Script` is the ordered replies one provider gives to its successive calls, then a
``default`` for every later call. A :class:`Scenario` names the script of each provider.

All three are plain immutable data, and can be written as data: a reply has a tiny string
form ``name(kw=value, ...)`` (``"rate_limit(retry_after=2)"``, ``"ok('hello')"``, ``"hang"``,
``"stall_after(3, 10)"``)
that is parsed with :mod:`ast` and :func:`ast.literal_eval` (never ``eval``), and a scenario
is a plain mapping, so it can live in YAML or JSON next to the test that uses it::

    Scenario.from_dict({
        "a": ["rate_limit(retry_after=2)", "ok"],
        "b": {"replies": ["hang"], "default": "server_error"},
    })
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..model import Dialect

if TYPE_CHECKING:
    from ._provider import FakeNetwork, FakeProvider

__all__ = [
    "STREAM_FAULT_KINDS",
    "FakeToolCall",
    "Forever",
    "Outcome",
    "ProviderPlan",
    "Reply",
    "ReplyKind",
    "ReplySpec",
    "Scenario",
    "Script",
    "ScriptSpec",
]


class ReplyKind(StrEnum):
    """Every answer a fake provider can give. 200-with-a-problem kinds come after the errors,
    and the stream faults (a 200 stream that goes wrong on cue) last."""

    OK = "ok"  # 200 with text, tool calls or a JSON object
    DELAY = "delay"  # wait ``seconds``, then answer like ``ok``
    HANG = "hang"  # never answer; ends only when the client goes away
    RATE_LIMIT = "rate_limit"  # 429 with retry-after / retry-after-ms (Gemini: RetryInfo)
    QUOTA = "quota"  # OpenAI 429 insufficient_quota; Anthropic 400 credit balance; Gemini 429 per-day quota
    OVERLOADED = "overloaded"  # Anthropic 529 overloaded_error; OpenAI 503; Gemini 503 UNAVAILABLE
    SERVER_ERROR = "server_error"  # 500
    UNAUTHORIZED = "unauthorized"  # 401; Gemini 400 API_KEY_INVALID
    NOT_FOUND = "not_found"  # 404 for the model
    CONTEXT_OVERFLOW = "context_overflow"  # 400 with the dialect's real "too long" message
    INVALID = "invalid"  # 400 invalid request
    RESET = "reset"  # the server closes the connection without answering
    CONNECT_ERROR = "connect_error"  # the connection is never made (in-process: phase "connect")
    TRUNCATE = "truncate"  # 200, finish_reason length / stop_reason max_tokens / MAX_TOKENS
    REFUSE = "refuse"  # 200, OpenAI message.refusal / Anthropic refusal / Gemini SAFETY
    CONTENT_FILTER = "content_filter"  # 200, OpenAI content_filter / Anthropic refusal / Gemini prompt block
    MALFORMED_TOOL_ARGS = "malformed_tool_args"  # 200, a tool call whose arguments are not JSON
    SCHEMA_INVALID = "schema_invalid"  # 200, JSON that does not match the requested schema
    # Stream faults. "events" are the stream's own events (heartbeats are not counted); a request
    # that did not ask for a stream gets its body as ONE event. ``seconds`` None means forever.
    STALL_BEFORE_FIRST = "stall_before_first"  # headers, then nothing for ``seconds``, then the stream
    STALL_AFTER = "stall_after"  # ``after`` events, then nothing for ``seconds``, then the rest
    HEARTBEATS_ONLY = "heartbeats_only"  # headers, then only keep-alives for ``seconds``, then the stream
    DROP_AFTER = "drop_after"  # ``after`` events, then the connection closes: no terminal event
    MALFORMED_AFTER = "malformed_after"  # ``after`` events, then one whose data is not JSON, then the rest
    ERROR_EVENT_AFTER = "error_event_after"  # ``after`` events, then the dialect's error event (``cause``)


class Outcome(StrEnum):
    """What became of one received call."""

    PENDING = "pending"  # still being answered (a delay, a hang)
    COMPLETED = "completed"  # the whole answer was delivered
    CLIENT_DISCONNECTED = "client_disconnected"  # the client went away (timeout, cancel, close) first
    RESET = "reset"  # the fake closed the connection without answering, as scripted
    CONNECT_FAILED = "connect_failed"  # a scripted connect_error: the request never arrived
    ABORTED = "aborted"  # the fake server itself shut down mid-answer


STREAM_FAULT_KINDS = frozenset(
    {
        ReplyKind.STALL_BEFORE_FIRST,
        ReplyKind.STALL_AFTER,
        ReplyKind.HEARTBEATS_ONLY,
        ReplyKind.DROP_AFTER,
        ReplyKind.MALFORMED_AFTER,
        ReplyKind.ERROR_EVENT_AFTER,
    }
)

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
    usage: tuple[int, int] | None = None  # (input_tokens, output_tokens); default: estimated
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
        kind: object = self.kind
        if not isinstance(kind, ReplyKind):
            object.__setattr__(self, "kind", ReplyKind(str(kind)))
        for name in (
            "latency",
            "seconds",
            "retry_after",
            "retry_after_ms",
            "retry_after_date",
            "chunk_interval",
            "heartbeat_interval",
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0
            ):
                raise ValueError(f"Reply.{name} must be a finite number >= 0, got {value!r}")
        if self.kind is ReplyKind.DELAY and self.seconds is None:
            raise ValueError("Reply.delay needs a number of seconds")
        if self.heartbeat_interval is not None and self.heartbeat_interval <= 0:
            raise ValueError(f"Reply.heartbeat_interval must be > 0, got {self.heartbeat_interval!r}")
        for name, low in (("after", 0), ("split_bytes", 1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ValueError(f"Reply.{name} must be an integer >= {low}, got {value!r}")
        if self.kind in STREAM_FAULT_KINDS and self.kind.value.endswith("_after") and self.after is None:
            raise ValueError(f"Reply.{self.kind.value} needs the number of events to send first")
        if self.usage is not None:
            usage = tuple(self.usage)
            if len(usage) != 2 or not all(isinstance(n, int) and n >= 0 for n in usage):
                raise ValueError(f"Reply.usage is (input_tokens, output_tokens), got {self.usage!r}")
            object.__setattr__(self, "usage", usage)
        calls: object = self.tool_calls
        if not isinstance(calls, tuple) or not all(isinstance(t, FakeToolCall) for t in calls):
            object.__setattr__(self, "tool_calls", _tool_calls(self.tool_calls))
        reasoning: object = self.reasoning
        if reasoning is not None and not isinstance(reasoning, str):
            raise ValueError(f"Reply.reasoning must be a string, got {reasoning!r}")
        for name in ("plain", "redacted_thinking", "interleave"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Reply.{name} must be True or False, got {getattr(self, name)!r}")
        if self.cause is not None or self.kind is ReplyKind.ERROR_EVENT_AFTER:
            object.__setattr__(self, "cause", _cause(self.cause))

    # -- constructors, one per kind -----------------------------------------------------------

    @classmethod
    def ok(
        cls,
        text: str | None = None,
        *,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
        plain: bool = False,
    ) -> Reply:
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
        servers send them; other dialects send calls one after the other, as their APIs do."""
        return cls(
            kind=ReplyKind.OK,
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
            plain=plain,
        )

    @classmethod
    def delay(
        cls,
        seconds: float,
        *,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
        plain: bool = False,
    ) -> Reply:
        """Wait ``seconds`` (on the loop clock), then answer like :meth:`ok`."""
        return cls(
            kind=ReplyKind.DELAY,
            seconds=seconds,
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
            plain=plain,
        )

    @classmethod
    def hang(cls, *, latency: float = 0.0) -> Reply:
        """Never answer. The call ends when the client times out, is cancelled or disconnects."""
        return cls(kind=ReplyKind.HANG, latency=latency)

    @classmethod
    def rate_limit(
        cls,
        retry_after: float | None = None,
        *,
        retry_after_ms: float | None = None,
        retry_after_date: float | None = None,
        message: str | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """429. ``retry_after`` becomes ``retry-after`` in seconds (Gemini: ``RetryInfo.retryDelay``),
        ``retry_after_ms`` becomes ``retry-after-ms``, ``retry_after_date`` (seconds from now)
        becomes ``retry-after`` as an HTTP-date beside the response's ``date``. None given: no
        hint at all."""
        return cls(
            kind=ReplyKind.RATE_LIMIT,
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
            retry_after_date=retry_after_date,
            message=message,
            latency=latency,
        )

    @classmethod
    def quota(cls, *, message: str | None = None, latency: float = 0.0) -> Reply:
        """Out of money: OpenAI 429 ``insufficient_quota``; Anthropic 400 "credit balance is too
        low"; Gemini 429 ``RESOURCE_EXHAUSTED`` on a per-day quota, without ``RetryInfo``."""
        return cls(kind=ReplyKind.QUOTA, message=message, latency=latency)

    @classmethod
    def overloaded(
        cls,
        retry_after: float | None = None,
        *,
        retry_after_ms: float | None = None,
        retry_after_date: float | None = None,
        message: str | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """Anthropic 529 ``overloaded_error``; OpenAI 503 ``server_is_overloaded``; Gemini 503
        ``UNAVAILABLE``. The wait hints as for :meth:`rate_limit`."""
        return cls(
            kind=ReplyKind.OVERLOADED,
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
            retry_after_date=retry_after_date,
            message=message,
            latency=latency,
        )

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
        return cls(
            kind=ReplyKind.CONTEXT_OVERFLOW,
            prompt_tokens=prompt_tokens,
            limit=limit,
            message=message,
            latency=latency,
        )

    @classmethod
    def invalid(cls, message: str | None = None, *, latency: float = 0.0) -> Reply:
        """400: the request itself is wrong (resending it cannot help)."""
        return cls(kind=ReplyKind.INVALID, message=message, latency=latency)

    @classmethod
    def truncate(
        cls,
        text: str | None = None,
        *,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """200 cut off by the output limit: ``length`` / ``max_tokens`` / ``MAX_TOKENS``."""
        return cls(
            kind=ReplyKind.TRUNCATE,
            text=text,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def refuse(
        cls,
        text: str | None = None,
        *,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """200 refusal: OpenAI ``message.refusal``; Anthropic ``stop_reason: refusal``; Gemini
        ``finishReason: SAFETY``. ``text`` is the refusal message where the dialect has one."""
        return cls(
            kind=ReplyKind.REFUSE,
            text=text,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def content_filter(
        cls,
        *,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """200 blocked by a filter: OpenAI ``finish_reason: content_filter``; Anthropic
        ``stop_reason: refusal``; Gemini ``promptFeedback.blockReason`` with no candidates."""
        return cls(
            kind=ReplyKind.CONTENT_FILTER,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def malformed_tool_args(
        cls,
        name: str | None = None,
        *,
        arguments: str | None = None,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """200 with a tool call whose arguments are not valid JSON.

        OpenAI: ``function.arguments`` is the broken text. Anthropic: ``tool_use.input`` is that
        text as a JSON string instead of an object (streamed: ``input_json_delta`` fragments
        that never close). Gemini cannot carry broken JSON (``args`` is a Struct): it answers
        ``finishReason: MALFORMED_FUNCTION_CALL`` with a ``finishMessage``, as the real API does.
        ``name`` defaults to the request's forced or first tool.
        """
        calls = (FakeToolCall(name, {}),) if name else ()
        return cls(
            kind=ReplyKind.MALFORMED_TOOL_ARGS,
            tool_calls=calls,
            arguments=arguments,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def schema_invalid(
        cls,
        json: Mapping[str, Any] | None = None,
        *,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """200 whose JSON does not match the requested schema (default ``{"wrong": 1}``)."""
        return cls(
            kind=ReplyKind.SCHEMA_INVALID,
            json=json,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

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
    def stall_before_first(
        cls,
        seconds: float | Forever | None = None,
        *,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """The status and headers, then nothing for ``seconds`` (default: forever), then the
        stream. The first-event timeout's fault."""
        return cls(
            kind=ReplyKind.STALL_BEFORE_FIRST,
            seconds=_duration(seconds),
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def stall_after(
        cls,
        after: int,
        seconds: float | Forever | None = None,
        *,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """``after`` events, then nothing for ``seconds`` (default: forever), then the rest of the
        stream. The idle timeout's fault; with ``heartbeat_interval``, keep-alives flow while
        the stream makes no progress."""
        return cls(
            kind=ReplyKind.STALL_AFTER,
            after=after,
            seconds=_duration(seconds),
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def heartbeats_only(
        cls,
        heartbeat_interval: float,
        seconds: float | Forever | None = None,
        *,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """The headers, then only keep-alives (``: keep-alive`` comments; Anthropic ``event:
        ping``), one every ``heartbeat_interval`` seconds, for ``seconds`` (default: forever),
        then the stream: a request queued the way DeepSeek documents it. Bytes arrive, but no
        event ever does while it lasts. The keep-alives go on between later events too."""
        return cls(
            kind=ReplyKind.HEARTBEATS_ONLY,
            heartbeat_interval=heartbeat_interval,
            seconds=_duration(seconds),
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def drop_after(
        cls,
        after: int,
        *,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """``after`` events, then the connection closes (when the next event was due) with no
        terminal event: ``FakeNetwork`` raises ``TransportError("read")`` from the body, an
        HTTP client sees an incomplete chunked body. Recorded ``reset``."""
        return cls(
            kind=ReplyKind.DROP_AFTER,
            after=after,
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def malformed_after(
        cls,
        after: int,
        *,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
    ) -> Reply:
        """``after`` good events, then one whose ``data:`` is cut in half (not JSON, framing
        intact), then the rest of the stream. Anthropic pings are not chosen (clients skip
        them unread)."""
        return cls(
            kind=ReplyKind.MALFORMED_AFTER,
            after=after,
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    @classmethod
    def error_event_after(
        cls,
        after: int,
        *,
        cause: ReplyKind | str = ReplyKind.OVERLOADED,
        message: str | None = None,
        text: str | None = None,
        tool_calls: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]] = (),
        json: Mapping[str, Any] | None = None,
        usage: tuple[int, int] | None = None,
        reasoning: str | None = None,
        redacted_thinking: bool = False,
        interleave: bool = False,
        chunk_interval: float = 0.0,
        heartbeat_interval: float | None = None,
        split_bytes: int | None = None,
        latency: float = 0.0,
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
        return cls(
            kind=ReplyKind.ERROR_EVENT_AFTER,
            after=after,
            cause=_cause(cause),
            message=message,
            text=text,
            tool_calls=_tool_calls(tool_calls),
            json=json,
            usage=usage,
            reasoning=reasoning,
            redacted_thinking=redacted_thinking,
            interleave=interleave,
            chunk_interval=chunk_interval,
            heartbeat_interval=heartbeat_interval,
            split_bytes=split_bytes,
            latency=latency,
        )

    # -- data forms ---------------------------------------------------------------------------

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

    @classmethod
    def parse(cls, spec: ReplySpec, *, where: str = "reply") -> Reply:
        """A Reply from its data form: a Reply, ``"name(kw=value, ...)"``, ``"name"``,
        ``{"kind": name, **kw}`` or ``{name: {**kw}}``. Raises ValueError naming ``where``."""
        if isinstance(spec, Reply):
            return spec
        if isinstance(spec, str):
            name, args, kwargs = _parse_call(spec, where)
        elif isinstance(spec, Mapping):
            name, args, kwargs = _parse_mapping(spec, where)
        else:
            raise ValueError(f"{where}: expected a reply string, mapping or Reply, got {spec!r}")
        make = _CONSTRUCTORS.get(name)
        if make is None:
            raise ValueError(f"{where}: {spec!r}: unknown reply kind {name!r}; expected one of {_KIND_NAMES}")
        try:
            return make(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {spec!r}: {exc}") from None

    def to_string(self) -> str:
        """The string form, which :meth:`parse` reads back to an equal Reply."""
        parts: list[str] = []
        used: set[str] = set()
        for positional in _POSITIONAL.get(self.kind, ()):
            value = getattr(self, positional)
            if value is None:
                break
            parts.append(repr(_plain(value)))
            used.add(positional)
        if self.kind == ReplyKind.MALFORMED_TOOL_ARGS and self.tool_calls:
            parts.append(repr(self.tool_calls[0].name))
            used.add("tool_calls")
        for name in _KEYWORDS[self.kind]:
            if name in used:
                continue
            value = getattr(self, name)
            if name == "tool_calls":
                if value:
                    parts.append(f"tool_calls={[{'name': t.name, 'args': dict(t.args)} for t in value]!r}")
                continue
            if value is None or value is False or (name in ("latency", "chunk_interval") and value == 0.0):
                continue
            if name == "cause" and value is ReplyKind.OVERLOADED:
                continue  # the default
            parts.append(f"{name}={_plain(value)!r}")
        return f"{self.kind.value}({', '.join(parts)})" if parts else self.kind.value

    def __repr__(self) -> str:
        return f"Reply.{self.to_string()}"


ReplySpec: TypeAlias = "Reply | str | Mapping[str, Any]"
ScriptSpec: TypeAlias = "Script | Reply | str | Sequence[ReplySpec] | Mapping[str, Any]"


def _tool_calls(
    values: Iterable[FakeToolCall | Mapping[str, Any] | Sequence[Any]],
) -> tuple[FakeToolCall, ...]:
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


def _plain(value: Any) -> Any:
    """Floats that are whole numbers print as ints: ``retry_after=2``, not ``2.0``."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


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
    "malformed_after": Reply.malformed_after,
    "error_event_after": Reply.error_event_after,
}
assert set(_CONSTRUCTORS) == {k.value for k in ReplyKind}
_KIND_NAMES = ", ".join(_CONSTRUCTORS)

# The fields each constructor takes, for to_string(): positional first, then keywords.
_POSITIONAL: dict[ReplyKind, tuple[str, ...]] = {
    ReplyKind.OK: ("text",),
    ReplyKind.DELAY: ("seconds",),
    ReplyKind.INVALID: ("message",),
    ReplyKind.TRUNCATE: ("text",),
    ReplyKind.REFUSE: ("text",),
    ReplyKind.SCHEMA_INVALID: ("json",),
    ReplyKind.STALL_BEFORE_FIRST: ("seconds",),
    ReplyKind.STALL_AFTER: ("after", "seconds"),
    ReplyKind.HEARTBEATS_ONLY: ("heartbeat_interval", "seconds"),
    ReplyKind.DROP_AFTER: ("after",),
    ReplyKind.MALFORMED_AFTER: ("after",),
    ReplyKind.ERROR_EVENT_AFTER: ("after",),
}
_TIMING = ("chunk_interval", "heartbeat_interval", "split_bytes", "latency")
_CONTENT = ("text", "tool_calls", "json", "usage", "reasoning", "redacted_thinking", "interleave")
_KEYWORDS: dict[ReplyKind, tuple[str, ...]] = {
    ReplyKind.OK: (*_CONTENT, *_TIMING, "plain"),
    ReplyKind.DELAY: (*_CONTENT, *_TIMING, "plain"),
    ReplyKind.HANG: ("latency",),
    ReplyKind.RATE_LIMIT: ("retry_after", "retry_after_ms", "retry_after_date", "message", "latency"),
    ReplyKind.QUOTA: ("message", "latency"),
    ReplyKind.OVERLOADED: ("retry_after", "retry_after_ms", "retry_after_date", "message", "latency"),
    ReplyKind.SERVER_ERROR: ("message", "latency"),
    ReplyKind.UNAUTHORIZED: ("message", "latency"),
    ReplyKind.NOT_FOUND: ("message", "latency"),
    ReplyKind.CONTEXT_OVERFLOW: ("prompt_tokens", "limit", "message", "latency"),
    ReplyKind.INVALID: ("message", "latency"),
    ReplyKind.TRUNCATE: ("text", "usage", "reasoning", "redacted_thinking", *_TIMING),
    ReplyKind.REFUSE: ("text", *_TIMING),
    ReplyKind.CONTENT_FILTER: _TIMING,
    ReplyKind.MALFORMED_TOOL_ARGS: ("tool_calls", "arguments", *_TIMING),
    ReplyKind.SCHEMA_INVALID: ("json", *_TIMING),
    ReplyKind.RESET: ("latency",),
    ReplyKind.CONNECT_ERROR: ("latency",),
    ReplyKind.STALL_BEFORE_FIRST: (*_CONTENT, *_TIMING),
    ReplyKind.STALL_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.HEARTBEATS_ONLY: (*_CONTENT, "chunk_interval", "split_bytes", "latency"),
    ReplyKind.DROP_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.MALFORMED_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.ERROR_EVENT_AFTER: ("cause", "message", *_CONTENT, *_TIMING),
}


def _parse_call(text: str, where: str) -> tuple[str, list[Any], dict[str, Any]]:
    source = text.strip()
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        raise ValueError(f"{where}: {text!r} is not of the form name(kw=value, ...)") from None
    if isinstance(node, ast.Name):
        return node.id, [], {}
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"{where}: {text!r} is not of the form name(kw=value, ...)")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    try:
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise ValueError("*args")
            args.append(ast.literal_eval(arg))
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        raise ValueError(
            f"{where}: {text!r}: arguments must be literals (numbers, strings, lists, dicts, True/False/None)"
        ) from None
    return node.func.id, args, kwargs


def _parse_mapping(spec: Mapping[str, Any], where: str) -> tuple[str, list[Any], dict[str, Any]]:
    if "kind" in spec:
        kwargs = {str(k): v for k, v in spec.items() if k != "kind"}
        return str(spec["kind"]), [], kwargs
    if len(spec) == 1:
        ((name, value),) = spec.items()
        if value is None:
            return str(name), [], {}
        if isinstance(value, Mapping):
            return str(name), [], {str(k): v for k, v in value.items()}
        return str(name), [value], {}
    raise ValueError(f"{where}: {dict(spec)!r}: a reply mapping needs a 'kind' key, or one key naming the kind")


@dataclass(frozen=True, slots=True)
class Script:
    """What one provider answers: ``replies[0]`` to its first call, ``replies[1]`` to the
    second, ..., then ``default`` to every later call.

    >>> s = Script.of("rate_limit(retry_after=2)", "ok", default="server_error")
    >>> [s.reply_for(i).kind.value for i in range(4)]
    ['rate_limit', 'ok', 'server_error', 'server_error']
    """

    replies: tuple[Reply, ...] = ()
    default: Reply = Reply()

    def __post_init__(self) -> None:
        replies: object = self.replies
        if not isinstance(replies, tuple):
            object.__setattr__(self, "replies", tuple(self.replies))
        for i, reply in enumerate(self.replies):
            item: object = reply
            if not isinstance(item, Reply):
                raise ValueError(f"Script.replies[{i}] is not a Reply: {reply!r} (use Script.of for strings)")

    @classmethod
    def of(cls, *replies: ReplySpec, default: ReplySpec = "ok") -> Script:
        """A script from replies in any data form."""
        parsed = tuple(Reply.parse(r, where=f"reply #{i + 1}") for i, r in enumerate(replies))
        return cls(parsed, Reply.parse(default, where="default"))

    @classmethod
    def always(cls, reply: ReplySpec) -> Script:
        """The same reply to every call."""
        return cls((), Reply.parse(reply, where="default"))

    @classmethod
    def parse(cls, spec: ScriptSpec | None, *, where: str = "script") -> Script:
        """A Script from its data form.

        * a list: the replies in order, then ok for every later call;
        * a mapping ``{"replies": [...], "default": ...}`` (both optional);
        * a single reply (string, Reply or reply mapping): that reply to EVERY call;
        * None: ok to every call.
        """
        if spec is None:
            return cls()
        if isinstance(spec, Script):
            return spec
        if isinstance(spec, Reply | str):
            return cls((), Reply.parse(spec, where=f"{where}: default"))
        if isinstance(spec, Mapping):
            if "replies" in spec or "default" in spec:
                unknown = set(spec) - {"replies", "default"}
                if unknown:
                    raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; expected 'replies', 'default'")
                return cls._from_parts(spec.get("replies", ()), spec.get("default", "ok"), where)
            return cls((), Reply.parse(spec, where=f"{where}: default"))
        if isinstance(spec, Sequence):
            return cls._from_parts(spec, "ok", where)
        raise ValueError(f"{where}: expected a list of replies or {{'replies': [...], 'default': ...}}, got {spec!r}")

    @classmethod
    def _from_parts(cls, replies: object, default: object, where: str) -> Script:
        if isinstance(replies, str | Mapping) or not isinstance(replies, Sequence):
            raise ValueError(f"{where}: 'replies' must be a list, got {replies!r}")
        parsed = tuple(Reply.parse(r, where=f"{where}, reply #{i + 1}") for i, r in enumerate(replies))
        return cls(parsed, Reply.parse(default, where=f"{where}, default"))  # type: ignore[arg-type]

    def reply_for(self, index: int) -> Reply:
        """The reply to the call number ``index`` (0-based)."""
        return self.replies[index] if 0 <= index < len(self.replies) else self.default

    def __len__(self) -> int:
        return len(self.replies)

    def __repr__(self) -> str:
        shown = ", ".join(repr(r.to_string()) for r in self.replies)
        return f"Script.of({shown}{', ' if shown else ''}default={self.default.to_string()!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderPlan:
    """One provider of a scenario: its name, script and (optionally) dialect, model, latency."""

    name: str
    script: Script = Script()
    dialect: Dialect | None = None
    model: str | None = None
    latency: float = 0.0
    connect: float = 0.0  # seconds to connect (FakeProvider.connect_latency)


_PLAN_KEYS = frozenset({"replies", "default", "dialect", "model", "latency", "connect"})


@dataclass(frozen=True, slots=True)
class Scenario:
    """The scripts of several providers, by name. Build it from data with :meth:`from_dict`.

    >>> sc = Scenario.from_dict({
    ...     "a": ["rate_limit(retry_after=2)", "ok"],
    ...     "b": {"replies": ["hang"], "default": "server_error", "dialect": "anthropic"},
    ... })
    >>> sc["a"].reply_for(0)
    Reply.rate_limit(retry_after=2)
    >>> a, b = sc.providers()          # FakeProvider objects, b speaks Anthropic
    >>> net = sc.network()             # or a FakeNetwork of all of them

    A provider's entry is a list of replies, a single reply (given to every call) or a
    mapping with ``replies``, ``default``, ``dialect``, ``model``, ``latency`` and ``connect``
    (seconds to connect).
    """

    plans: tuple[ProviderPlan, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        if not isinstance(data, Mapping):
            raise ValueError(f"a scenario is a mapping of provider name to script, got {type(data).__name__}")
        plans: list[ProviderPlan] = []
        for name, spec in data.items():
            where = f"scenario provider {name!r}"
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where}: a provider name must be a non-empty string")
            if isinstance(spec, Mapping) and ("replies" in spec or "default" in spec or set(spec) & _PLAN_KEYS):
                unknown = set(spec) - _PLAN_KEYS
                if unknown:
                    raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(_PLAN_KEYS)}")
                script = Script.parse(
                    {k: v for k, v in spec.items() if k in ("replies", "default")} or None, where=where
                )
                dialect = spec.get("dialect")
                try:
                    dialect_value = Dialect(dialect) if dialect is not None else None
                except ValueError:
                    choices = ", ".join(d.value for d in Dialect)
                    raise ValueError(f"{where}: unknown dialect {dialect!r}; expected one of {choices}") from None
                latency = spec.get("latency", 0.0)
                if not isinstance(latency, int | float) or latency < 0:
                    raise ValueError(f"{where}: latency must be a number >= 0, got {latency!r}")
                model = spec.get("model")
                connect = spec.get("connect", 0.0)
                if isinstance(connect, bool) or not isinstance(connect, int | float) or not 0 <= connect < math.inf:
                    raise ValueError(f"{where}: connect must be a number of seconds >= 0, got {connect!r}")
                plans.append(
                    ProviderPlan(
                        name=name,
                        script=script,
                        dialect=dialect_value,
                        model=str(model) if model is not None else None,
                        latency=float(latency),
                        connect=float(connect),
                    )
                )
            else:
                plans.append(ProviderPlan(name=name, script=Script.parse(spec, where=where)))
        return cls(tuple(plans))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.plans)

    def __getitem__(self, name: str) -> Script:
        return self.plan(name).script

    def plan(self, name: str) -> ProviderPlan:
        for p in self.plans:
            if p.name == name:
                return p
        raise KeyError(f"no provider {name!r} in this scenario (has: {', '.join(self.names) or 'none'})")

    def providers(self, *, dialect: Dialect | str = Dialect.OPENAI) -> tuple[FakeProvider, ...]:
        """A fresh FakeProvider per plan; ``dialect`` is used where a plan names none."""
        from ._provider import FakeProvider

        return tuple(
            FakeProvider(
                p.name,
                p.dialect or Dialect(dialect),
                p.script,
                model=p.model,
                latency=p.latency,
                connect_latency=p.connect,
            )
            for p in self.plans
        )

    def network(self, *, dialect: Dialect | str = Dialect.OPENAI) -> FakeNetwork:
        """A FakeNetwork of :meth:`providers`."""
        from ._provider import FakeNetwork

        return FakeNetwork(*self.providers(dialect=dialect))
