"""Strict JSON from providers: NaN, Infinity, -Infinity (which Python's json reads and writes by
default) or a number too large for a float, in any dialect's answer, plain or streamed, or in
an embedding, is a provider_server_error naming it, never numbers to forward."""

from __future__ import annotations

import base64
import json
import math
import struct
from dataclasses import replace
from typing import Any

import pytest

from failover.model import Dialect, EmbedRequest, Failure, FailureKind, Message, Request, Response, Vertex
from failover.model._json import NonFiniteNumber, dumps, loads_strict
from failover.providers import dialect_for
from failover.providers._base import SSEEvent, StreamFailed
from failover.providers._sse import stream_decoder
from failover.providers.embeddings import embed_adapter_for
from failover.testing import FakeNetwork, FakeProvider, Reply
from failover.transport._types import HttpResponse

REQUEST = Request(messages=(Message.user("hi"),))
TOKENS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
GENERATION = [Dialect.OPENAI, Dialect.OPENAI_RESPONSES, Dialect.ANTHROPIC, Dialect.GEMINI, Dialect.BEDROCK]


def poison(value: Any, bad: float) -> tuple[Any, bool]:
    """``value`` with its first number (not a bool) replaced by ``bad``; whether one was."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        return bad, True
    if isinstance(value, dict):
        out = dict(value)
        for k, v in value.items():
            out[k], done = poison(v, bad)
            if done:
                return out, True
        return value, False
    if isinstance(value, list):
        items = list(value)
        for i, v in enumerate(value):
            items[i], done = poison(v, bad)
            if done:
                return items, True
    return value, False


def poisoned_text(text: str, bad: float) -> str:
    value, done = poison(json.loads(text), bad)
    assert done, text
    return json.dumps(value)  # allow_nan: writes NaN, Infinity, -Infinity as a buggy server would


async def fake_answer(dialect: Dialect, *, stream: bool) -> HttpResponse:
    provider = FakeProvider("p", dialect, [Reply.ok("one two three", usage=(12, 4))])
    request = dialect_for(dialect).build(provider.target(), REQUEST, stream=stream)
    response = await FakeNetwork(provider).send(request, connect_timeout=5.0, total_timeout=60.0)
    assert response.status == 200, response.body
    return response


def assert_named(failure: Failure, token: str) -> None:
    assert failure.kind is FailureKind.PROVIDER_SERVER_ERROR, failure
    assert token in failure.message
    assert "not a JSON number" in failure.message


@pytest.mark.parametrize("token", list(TOKENS))
@pytest.mark.parametrize("dialect", GENERATION)
async def test_a_non_finite_number_in_an_answer_is_a_server_error(dialect: Dialect, token: str) -> None:
    ok = await fake_answer(dialect, stream=False)
    adapter = dialect_for(dialect)
    assert isinstance(adapter.parse(FakeProvider("p", dialect).target(), ok), Response)  # the fake's, unharmed
    bad = replace(ok, body=poisoned_text(ok.body.decode(), TOKENS[token]).encode())
    out = adapter.parse(FakeProvider("p", dialect).target(), bad)
    assert isinstance(out, Failure)
    assert_named(out, token)


def _feed_all(parser: Any, events: list[SSEEvent]) -> None:
    for event in events:
        parser.feed(event)


@pytest.mark.parametrize("token", list(TOKENS))
@pytest.mark.parametrize("dialect", GENERATION)
async def test_a_non_finite_number_in_a_stream_event_is_a_server_error(dialect: Dialect, token: str) -> None:
    ok = await fake_answer(dialect, stream=True)
    adapter = dialect_for(dialect)
    events = [e for e in stream_decoder(adapter).feed(ok.body) if isinstance(e, SSEEvent)]
    parser = adapter.stream_parser(FakeProvider("p", dialect).target(), REQUEST, ok.headers)
    fed: list[SSEEvent] = []
    hit = False
    for event in events:
        data = event.data
        if not hit and data.startswith(("{", "[")) and poison(json.loads(data), 0.0)[1]:
            data, hit = poisoned_text(data, TOKENS[token]), True
        fed.append(replace(event, data=data))
    with pytest.raises(StreamFailed) as info:
        _feed_all(parser, fed)
    assert hit
    assert_named(info.value.failure, token)
    assert "malformed stream event" in info.value.failure.message


@pytest.mark.parametrize("dialect", [Dialect.GEMINI, Dialect.ANTHROPIC])
def test_vertex_answers_are_read_as_strictly(dialect: Dialect) -> None:
    target = FakeProvider("p", dialect).target(vertex=Vertex(project="p", location="us-east5"))
    body = b'{"candidates": [], "usageMetadata": {"promptTokenCount": NaN}}'
    if dialect is Dialect.ANTHROPIC:
        body = b'{"type": "message", "content": [], "usage": {"input_tokens": Infinity}}'
    out = dialect_for(dialect).parse(target, HttpResponse(status=200, headers={}, body=body))
    assert isinstance(out, Failure)
    assert out.kind is FailureKind.PROVIDER_SERVER_ERROR and "not a JSON number" in out.message


def test_an_error_status_with_nan_is_still_classified_by_its_status() -> None:
    target = FakeProvider("p", Dialect.OPENAI).target()
    body = b'{"error": {"message": "slow down", "retry": NaN}}'
    out = dialect_for(Dialect.OPENAI).parse(target, HttpResponse(status=429, headers={}, body=body))
    assert isinstance(out, Failure) and out.kind is FailureKind.RATE_LIMITED


def test_a_huge_number_is_as_non_finite_as_infinity() -> None:
    target = FakeProvider("p", Dialect.OPENAI).target()
    body = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "logprobs": 1e999}]}'
    out = dialect_for(Dialect.OPENAI).parse(target, HttpResponse(status=200, headers={}, body=body))
    assert isinstance(out, Failure) and "1e999, which is not a JSON number" in out.message


# ----------------------------------------------------------------------- embeddings

EMBED = EmbedRequest(inputs=("a",))


def _embed_targets() -> list[tuple[str, Any, bytes]]:
    vec = "[{bad}, 0.1, 0.2]"
    return [
        (
            "openai",
            FakeProvider("o", Dialect.OPENAI).target(),
            f'{{"data": [{{"index": 0, "embedding": {vec}}}]}}'.encode(),
        ),
        ("gemini", FakeProvider("g", Dialect.GEMINI).target(), f'{{"embeddings": [{{"values": {vec}}}]}}'.encode()),
        (
            "vertex",
            FakeProvider("v", Dialect.GEMINI).target(
                model="text-embedding-005", vertex=Vertex(project="p", location="us-central1")
            ),
            f'{{"predictions": [{{"embeddings": {{"values": {vec}}}}}]}}'.encode(),
        ),
        (
            "titan",
            FakeProvider("t", Dialect.BEDROCK).target(model="amazon.titan-embed-text-v2:0"),
            f'{{"embedding": {vec}, "inputTextTokenCount": 1}}'.encode(),
        ),
        (
            "cohere",
            FakeProvider("c", Dialect.BEDROCK).target(model="cohere.embed-english-v3"),
            f'{{"embeddings": {{"float": [{vec}]}}}}'.encode(),
        ),
    ]


@pytest.mark.parametrize("token", list(TOKENS))
@pytest.mark.parametrize(
    ("name", "target", "template"), _embed_targets(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_non_finite_number_in_an_embedding_is_a_server_error(
    name: str, target: Any, template: bytes, token: str
) -> None:
    adapter = embed_adapter_for(target.dialect)
    assert adapter is not None
    good = adapter.parse_embed(
        target, EMBED, HttpResponse(status=200, headers={}, body=template.replace(b"{bad}", b"0.5"))
    )
    assert not isinstance(good, Failure), (name, good)
    out = adapter.parse_embed(
        target, EMBED, HttpResponse(status=200, headers={}, body=template.replace(b"{bad}", token.encode()))
    )
    assert isinstance(out, Failure)
    assert_named(out, token)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_base64_embedding_is_a_server_error(bad: float) -> None:
    target = FakeProvider("o", Dialect.OPENAI).target()
    b64 = base64.b64encode(struct.pack("<3f", bad, 0.1, 0.2)).decode()
    body = json.dumps({"data": [{"index": 0, "embedding": b64}]}).encode()
    out = embed_adapter_for(Dialect.OPENAI).parse_embed(target, EMBED, HttpResponse(status=200, headers={}, body=body))  # type: ignore[union-attr]
    assert isinstance(out, Failure)
    assert out.kind is FailureKind.PROVIDER_SERVER_ERROR and "NaN or infinity" in out.message


# ----------------------------------------------------------------------- the codec itself


@pytest.mark.parametrize(
    "text", ["[NaN]", "[Infinity]", "[-Infinity]", "[1e999]", "[-1e400]", "[1" + "0" * 400 + ".0]"]
)
def test_loads_strict_refuses_non_finite_numbers(text: str) -> None:
    with pytest.raises(NonFiniteNumber):
        loads_strict(text.encode())


@pytest.mark.parametrize(
    "text", ['["NaN", "Infinity", "1e999"]', "[1e300, -1e-300, 12345678901234567890]", '{"a": "e999"}']
)
def test_loads_strict_reads_what_only_looks_non_finite(text: str) -> None:
    assert loads_strict(text) == json.loads(text)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"a": [1.0, math.nan]}, {"NaN": math.inf}])
def test_dumps_refuses_non_finite_numbers(value: Any) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        dumps(value)


def test_dumps_writes_the_words_nan_and_infinity_in_strings() -> None:
    assert json.loads(dumps({"NaN": "Infinity", "x": 1.5})) == {"NaN": "Infinity", "x": 1.5}
    with pytest.raises(ValueError):  # the standard library's fallback (a lone surrogate) refuses too
        dumps({"s": "\ud800", "n": math.nan})
