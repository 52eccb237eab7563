"""What every fake dialect works with: the request being answered, and the HTTP answer.

An :class:`Exchange` is one request as the renderers see it (which :class:`Endpoint` its path
asks for, its body, the ids to report); a :class:`Rendered` is the complete HTTP answer, with
its :class:`~._stream.Timing` when it is delivered over time. :class:`FakeDialect` is what a
dialect module of the kit provides (``_fake_openai``, ``_fake_anthropic``...): each module is
one, and ``_dialects`` holds one per :class:`~failover.model.Dialect`.

Data and a protocol, no behaviour: what the dialects write an answer with is in :mod:`._wire`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeAlias

from ..model import Dialect
from ._parts import Answer
from ._reply import Reply
from ._stream import Timing

__all__ = ["Credentials", "Endpoint", "Exchange", "FakeDialect", "Headers", "Key", "Rendered"]

Headers: TypeAlias = tuple[tuple[str, str], ...]
Key: TypeAlias = "str | Callable[[str], bool]"  # a FakeProvider's api_key: the key, or a test of one


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What a request path asks for: ``generate`` (stream or not) or ``count_tokens``."""

    operation: str  # "generate" | "count_tokens" | "embed"
    stream_path: bool = False  # Gemini :streamGenerateContent, Bedrock /converse-stream, Vertex :streamRawPredict
    model: str | None = None  # Gemini, Bedrock and Vertex: the model named in the path
    vertex: bool = False  # a Vertex AI path (projects/.../publishers/.../models/...)


@dataclass(frozen=True, slots=True)
class Rendered:
    """A complete HTTP answer. ``chunks`` are the pieces a streaming answer is written in
    (one per event). With a ``timing``, the chunks are the events to deliver over time, by
    that schedule (``body`` is then their concatenation, without keep-alives)."""

    status: int
    headers: Headers
    body: bytes
    chunks: tuple[bytes, ...] = ()
    timing: Timing | None = None

    @property
    def streaming(self) -> bool:
        return bool(self.chunks)


@dataclass(slots=True, kw_only=True)
class Exchange:
    """What the renderer knows about the request being answered."""

    provider: str
    dialect: Dialect
    endpoint: Endpoint
    path: str
    method: str
    body: Mapping[str, Any]
    model: str  # the model to report
    request_id: str
    response_id: str
    sse: bool = False  # Gemini stream with alt=sse
    plain: bool = False  # answer with the JSON body even if a stream was asked for (Reply.plain)
    prompt_chars: Callable[[Mapping[str, Any]], int] = field(repr=False)  # the dialect's FakeDialect.prompt_chars
    _input_tokens: int | None = field(default=None, repr=False)

    @property
    def stream(self) -> bool:
        if self.plain:
            return False
        if self.dialect in (Dialect.GEMINI, Dialect.BEDROCK):
            return self.endpoint.stream_path
        return self.body.get("stream") is True

    @property
    def input_tokens(self) -> int:
        """A rough count of the prompt: characters / 4, at least 1."""
        if self._input_tokens is None:
            self._input_tokens = max(1, math.ceil(self.prompt_chars(self.body) / 4))
        return self._input_tokens


class Credentials(NamedTuple):
    """A request's credential as received, and the one the fake wants: ``api_key`` (the key, a
    test of one, or Bedrock's access key id; None: nothing is checked), Bedrock's
    ``secret_key`` and the request as received (``wire``: method, URL, body bytes), with which
    its signature is recomputed."""

    headers: Mapping[str, str]
    query: str
    api_key: Key | None
    secret_key: str | None = None
    wire: tuple[str, str, bytes] | None = None


class FakeDialect(Protocol):
    """What a dialect module of the kit provides: a request read in the dialect's terms, and
    every answer in its shapes. What is alike for every dialect is not here: the routing of
    Vertex AI and embeddings paths and the stream faults (``_dialects``), the answer a reply
    stands for before any dialect shapes it (``_answer``)."""

    @property
    def DEFAULT_MODEL(self) -> str:
        """The model a fake of this dialect serves when none is named."""

    @property
    def CALL_PREFIX(self) -> str:
        """How the dialect's tool call ids begin (``call_``, ``toolu_``...)."""

    @property
    def RESPONSE_ID(self) -> str:
        """The id of an answer, a :meth:`str.format` template of the fake's ``name`` and the
        answer's ``serial``."""

    def endpoint(self, path: str) -> Endpoint | None:
        """The operation a path of the dialect's own API asks for; None when it is not one."""

    def credentials(self, given: Credentials) -> Reply | None:
        """The refusal of a request without the credential the fake wants (None: it has it)."""

    def check(self, endpoint: Endpoint, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Reply | None:
        """The 400 the real API sends for a request it rejects before any model runs."""

    def tools(self, body: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """(name, parameter schema) of each declared tool."""

    def forced(self, body: Mapping[str, Any]) -> tuple[str | None, bool]:
        """(the tool the request names, whether any tool must be called)."""

    def structured(self, body: Mapping[str, Any]) -> tuple[bool, Any]:
        """(wants JSON, the schema if one was given)."""

    def max_tokens(self, body: Mapping[str, Any]) -> int | None:
        """The output budget the request sets, if a positive one."""

    def prompt_chars(self, body: Mapping[str, Any]) -> int:
        """The characters of the prompt, for the token estimate."""

    def ok(self, answer: Answer, ex: Exchange) -> Rendered:
        """The 200 carrying ``answer``: a body, or a stream when one was asked for."""

    def error(self, reply: Reply, ex: Exchange) -> Rendered:
        """The error answer of ``reply`` (a kind with no 200 body)."""

    def unknown_path(self, method: str, path: str, request_id: str) -> Rendered:
        """The 404 the API sends for a path it does not serve."""

    def error_event(self, reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
        """The error the API sends inside a 200 stream, as the stream's event number ``at``."""

    def heartbeat(self, ex: Exchange, chunked: bool) -> bytes:
        """What goes out in a long silence of the answer (``chunked``: written as events)."""

    def malformed(self, event: bytes) -> bytes:
        """A stream event whose data a client cannot read, its framing intact."""
