"""Render scripted replies as the bytes each real provider sends: a request routed to its
dialect, and what every dialect does alike.

Each dialect's own shapes (bodies, streams, errors, headers) are its module's, a
:class:`~._exchange.FakeDialect`, as ``providers/`` has one per dialect:

* OpenAI Chat Completions: :mod:`._fake_openai`; the OpenAI Responses API: :mod:`._fake_responses`;
* Anthropic Messages: :mod:`._fake_anthropic`;
* Gemini generateContent: :mod:`._fake_gemini`;
* AWS Bedrock Converse: :mod:`._fake_bedrock`.

Every body, status and header follows a real capture or the vendor's documentation (see
``shared/wire/README.md`` for the corpus these shapes were checked against). Here is what
comes before and around them: the operation a path asks for (with Vertex AI's paths,
:mod:`._fake_vertex`, and the embeddings endpoints, :mod:`._fake_embeddings`), what is refused
before any model runs, the answer a reply stands for (:mod:`._answer`), and a reply delivered
over time: its :class:`~._stream.Timing`, and the stream faults' extra or altered events (an
error event, a cut ``data:`` line).

This module is pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..model import Dialect
from . import _fake_anthropic, _fake_bedrock, _fake_gemini, _fake_openai, _fake_responses, _wire
from ._answer import build_answer
from ._exchange import Credentials, Endpoint, Exchange, FakeDialect, Key, Rendered
from ._fake_embeddings import embed_answer, embed_model, embed_problem
from ._fake_vertex import SERVED, check_vertex, vertex_error, vertex_route
from ._kinds import ReplyKind
from ._reply import Reply
from ._stream import Timing

__all__ = [
    "SPOKEN",
    "check_request",
    "endpoint_for",
    "fake_for",
    "render",
    "render_unknown_path",
    "requested_model",
]

_FAKES: Mapping[Dialect, FakeDialect] = {
    Dialect.OPENAI: _fake_openai,
    Dialect.OPENAI_RESPONSES: _fake_responses,
    Dialect.ANTHROPIC: _fake_anthropic,
    Dialect.GEMINI: _fake_gemini,
    Dialect.BEDROCK: _fake_bedrock,
}

# The dialects the fault kit speaks (answers, streams and errors in each one's own shape).
SPOKEN = frozenset(_FAKES)

# The dialects with a token-count endpoint (also on Vertex AI).
_COUNTS = {Dialect.ANTHROPIC: _fake_anthropic.count_tokens, Dialect.GEMINI: _fake_gemini.count_tokens}


def fake_for(dialect: Dialect) -> FakeDialect:
    """The module that speaks ``dialect``, one of :data:`SPOKEN`."""
    return _FAKES[dialect]


# -- routing -----------------------------------------------------------------------------------


def endpoint_for(dialect: Dialect, path: str) -> Endpoint | None:
    """The operation a path asks of a provider of ``dialect``; None when it is not an API path.

    Only the END of the path matters, so any prefix works (``/v1``, ``/openai/deployments/x``,
    ``/<provider>/v1``...). Gemini and Anthropic fakes also serve their Vertex AI paths.
    """
    embeds = embed_model(dialect, path)  # embeddings: testing/_fake_embeddings.py
    if embeds is not None:
        return Endpoint("embed", model=embeds or None, vertex=dialect is Dialect.GEMINI and path.endswith(":predict"))
    route = vertex_route(dialect, path) if dialect in SERVED else None
    if route is not None:
        return Endpoint(route[0], stream_path=route[1], model=route[2], vertex=True)
    return _FAKES[dialect].endpoint(path)


def requested_model(dialect: Dialect, endpoint: Endpoint | None, body: Mapping[str, Any]) -> str | None:
    if dialect in (Dialect.GEMINI, Dialect.BEDROCK) or (endpoint is not None and endpoint.model is not None):
        return endpoint.model if endpoint is not None else None
    model = body.get("model")
    return model if isinstance(model, str) else None


def check_request(
    dialect: Dialect,
    endpoint: Endpoint,
    path: str,
    headers: Mapping[str, str],
    query: str,
    body: Mapping[str, Any],
    *,
    api_key: Key | None = None,
    secret_key: str | None = None,
    wire: tuple[str, str, bytes] | None = None,
) -> Reply | None:
    """The error the real API would send for a request it rejects before any model runs:
    a wrong or missing credential (only checked when ``api_key``, the key or a test of it, is
    given), or a required field missing. None when the request is acceptable. Bedrock:
    ``api_key`` is the access key id of the SigV4 signature; with ``secret_key`` and the
    request as received (``wire``: method, URL, body bytes) the signature itself is checked."""
    fake = _FAKES[dialect]
    if endpoint.vertex:
        refused = check_vertex(dialect, endpoint.operation, headers, body, api_key=api_key)
        if refused is not None or endpoint.operation != "embed":
            return refused
    else:
        refused = fake.credentials(Credentials(headers, query, api_key, secret_key, wire))
        if refused is not None:
            return refused
    if endpoint.operation == "embed":  # testing/_fake_embeddings.py
        problem = embed_problem(dialect, path, body)
        return Reply.invalid(problem) if problem is not None else None
    return fake.check(endpoint, path, headers, body)


# -- the entry point ---------------------------------------------------------------------------


def render(reply: Reply, ex: Exchange) -> Rendered:
    """The HTTP answer for ``reply`` in ``ex.dialect``. Only for replies that send one."""
    if ex.endpoint.operation == "count_tokens":
        return _COUNTS[ex.dialect](ex)
    kind = reply.kind
    if kind is ReplyKind.ERROR_EVENT_AFTER and not ex.stream:
        # No event to put the error in: the plain error a non-streaming client would get.
        reply = Reply(kind=reply.cause or ReplyKind.OVERLOADED, message=reply.message)
        kind = reply.kind
    if ex.endpoint.operation == "embed" and reply.has_ok_body:  # errors: each dialect's own, below
        return _embeddings(reply, ex)
    fake = _FAKES[ex.dialect]
    if reply.has_ok_body:
        if reply.plain and ex.stream:
            ex = replace(ex, plain=True)
        rendered = fake.ok(build_answer(reply, ex, fake), ex)
        return _timed(reply, rendered, ex) if reply.timed else rendered
    if not reply.is_http_answer:
        raise ValueError(f"a {kind.value} reply has no HTTP answer to render")
    if ex.endpoint.vertex and (google := vertex_error(reply, ex.path, ex.model, _wire.wait_hint(reply))) is not None:
        return _wire.json_answer(google[0], google[1], (), content_type=_wire.GOOGLE_JSON)
    return fake.error(reply, ex)


def _embeddings(reply: Reply, ex: Exchange) -> Rendered:
    """The 200 of an embeddings request (testing/_fake_embeddings.py)."""
    status, headers, body = embed_answer(
        ex.dialect, ex.path, ex.body, model=ex.model, request_id=ex.request_id, response_id=ex.response_id
    )
    rendered = Rendered(status, headers, body)
    return _timed(reply, rendered, ex) if reply.timed else rendered


def render_unknown_path(dialect: Dialect, method: str, path: str, request_id: str) -> Rendered:
    """The 404 each provider sends for a path it does not serve (Vertex's, Google's envelope)."""
    if dialect in SERVED and "/publishers/" in path:
        return _fake_gemini.unknown_path(method, path, request_id)
    return _FAKES[dialect].unknown_path(method, path, request_id)


# -- answers delivered over time, and stream faults ---------------------------------------------


def _timed(reply: Reply, rendered: Rendered, ex: Exchange) -> Rendered:
    """``rendered`` with the Timing (and the extra or altered events) ``reply`` scripts.

    The events are the stream's chunks, or the whole body as one event when the request did
    not ask for a stream. The first event goes out with the headers, each later one
    ``chunk_interval`` after the previous. A fault's ``after`` is capped at the number of
    events before the last, so the fault always comes before the stream's end.
    """
    fake = _FAKES[ex.dialect]
    chunked = rendered.chunks != ()
    events = list(rendered.chunks) if chunked else [rendered.body]
    gaps: list[float | None] = [0.0]
    gaps.extend([reply.chunk_interval] * (len(events) - 1))
    tail: float | None = 0.0
    drop = False
    kind = reply.kind
    n = min(reply.after or 0, len(events) - 1)
    if kind in (ReplyKind.STALL_BEFORE_FIRST, ReplyKind.HEARTBEATS_ONLY):
        gaps[0] = reply.seconds
    elif kind is ReplyKind.STALL_AFTER:
        gaps[n] = reply.seconds
    elif kind is ReplyKind.DROP_AFTER:
        tail = gaps[n]  # the connection closes when event n was due
        events, gaps, drop = events[:n], gaps[:n], True
    elif kind is ReplyKind.END_AFTER and chunked:  # a whole JSON body has no terminal event to leave out
        tail = gaps[n]  # the body ends when event n was due
        events, gaps = events[:n], gaps[:n]
    elif kind is ReplyKind.MALFORMED_AFTER:
        i = n
        while i < len(events) - 1 and events[i] == _fake_anthropic.PING:
            i += 1  # clients drop pings unread: corrupt an event they parse
        events[i] = fake.malformed(events[i]) if chunked else _wire.cut_data(events[i])
    elif kind is ReplyKind.ERROR_EVENT_AFTER:
        events, gaps = [*events[:n], fake.error_event(reply, ex, first=n == 0, at=n)], gaps[: n + 1]
    timing = Timing(
        gaps=tuple(gaps),
        tail=tail,
        drop=drop,
        heartbeat=fake.heartbeat(ex, chunked),
        heartbeat_interval=reply.heartbeat_interval,
        split_bytes=reply.split_bytes,
    )
    return replace(rendered, body=b"".join(events), chunks=tuple(events), timing=timing)
