"""Strict JSON out: a provider that answers NaN or Infinity (as Python's json writes them by
default) fails over as a provider_server_error, and the client never sees a body or a stream
event that is not strict JSON, on every endpoint."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest

from failover import Route, Router, Secret, Timeouts
from failover.gateway import GatewaySettings, create_app
from failover.policy import NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider
from failover.transport._types import HttpRequest, HttpResponse
from tests._sdk import ALL

BAD = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
DIALECTS = ("openai", "openai-responses", "anthropic", "gemini")


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise AssertionError(f"the client was sent {token}: {text[:300]}")

    return json.loads(text, parse_constant=refuse)


def _poison(value: Any, bad: float) -> tuple[Any, bool]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return bad, True
    pairs = (
        list(value.items()) if isinstance(value, dict) else list(enumerate(value)) if isinstance(value, list) else []
    )
    for k, v in pairs:
        new, done = _poison(v, bad)
        if done:
            out = dict(value) if isinstance(value, dict) else list(value)
            out[k] = new
            return out, True
    return value, False


def poison_body(body: bytes, bad: float) -> bytes:
    """The first number of a JSON body, or of the first SSE event that has one, made ``bad``."""
    try:
        value, done = _poison(json.loads(body), bad)
        return json.dumps(value).encode() if done else body
    except ValueError:
        pass
    lines = body.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data:"):
            try:
                value, done = _poison(json.loads(line[5:]), bad)
            except ValueError:
                continue
            if done:
                lines[i] = b"data: " + json.dumps(value).encode()
                return b"\n".join(lines)
    return body


@dataclass
class _Whole:
    status: int
    headers: Mapping[str, str]
    body: bytes

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self.body

    async def aread(self) -> bytes:
        return self.body


class Poisoning:
    """A FakeNetwork whose providers' 200 answers carry one non-finite number."""

    def __init__(self, net: FakeNetwork, bad: float) -> None:
        self.net, self.bad = net, bad

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        r = await self.net.send(request, connect_timeout=connect_timeout, total_timeout=total_timeout)
        return replace(r, body=poison_body(r.body, self.bad)) if r.status == 200 else r

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[_Whole]:
        async with self.net.stream(request, connect_timeout=connect_timeout) as r:
            body = await r.aread()
            yield _Whole(r.status, r.headers, poison_body(body, self.bad) if r.status == 200 else body)

    async def aclose(self) -> None:
        pass


def _app(bad: float) -> tuple[Any, FakeNetwork]:
    providers = [FakeProvider(d, d) for d in DIALECTS]
    providers.append(FakeProvider("emb", "openai", model="text-embedding-3-small"))
    net = FakeNetwork(*providers)
    timeouts = Timeouts(connect=2, first_event=5, idle=5, total=10, min_useful=0.05)
    routes = [
        Route(
            name=p.name,
            primary=(
                p.target(api_key=Secret("sk-up-1234"), timeouts=timeouts, capabilities=ALL, tokenizer="estimate"),
            ),
        )
        for p in providers
    ]
    router = Router(routes, transport=Poisoning(net, bad), retry_budget=Unlimited(), breakers=NoBreakers())  # type: ignore[arg-type]
    return create_app(router, GatewaySettings()), net


@pytest.fixture(params=list(BAD))
def token(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def _assert_upstream_failure(r: httpx.Response) -> None:
    body = _strict(r.text)
    assert r.status_code in (502, 503), r.text
    assert isinstance(body.get("error"), dict), body


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_non_finite_answer_is_an_upstream_failure_in_strict_json(dialect: str, token: str) -> None:
    app, net = _app(BAD[token])
    async with _client(app) as c:
        r = await c.post(
            "/v1/chat/completions",
            json={"model": dialect, "messages": [{"role": "user", "content": "hi"}]},
        )
    _assert_upstream_failure(r)
    assert net.calls, "the provider was asked"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_non_finite_stream_event_never_reaches_the_client(dialect: str, token: str) -> None:
    app, _ = _app(BAD[token])
    body = {"model": dialect, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json=body)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        events = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:")]
        assert events
        for data in events:
            if data != "[DONE]":
                _strict(data)
        assert "error" in events[-1] or "error" in events[-2], events[-2:]
    else:
        _assert_upstream_failure(r)


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/v1/messages", {"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"input": "hi"}),
    ],
)
async def test_every_endpoint_answers_strict_json(path: str, payload: dict[str, Any], token: str) -> None:
    app, _ = _app(BAD[token])
    async with _client(app) as c:
        r = await c.post(path, json={"model": "openai", **payload})
    _strict(r.text)
    assert r.status_code >= 500, r.text


async def test_a_non_finite_embedding_is_an_upstream_failure_in_strict_json(token: str) -> None:
    app, _ = _app(BAD[token])
    async with _client(app) as c:
        r = await c.post("/v1/embeddings", json={"model": "emb", "input": ["a", "b"]})
    _assert_upstream_failure(r)


async def test_a_client_body_with_nan_is_refused_as_invalid_json(token: str) -> None:
    app, net = _app(math.nan)
    raw = '{"model": "openai", "temperature": ' + token + ', "messages": [{"role": "user", "content": "hi"}]}'
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and _strict(r.text)["error"]["code"] == "invalid_json"
    assert token in r.text
    assert not net.calls


@pytest.mark.parametrize("number", ["1e999", "-1E+400", "2e308"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
async def test_a_client_number_no_float_holds_is_refused_as_invalid_json(number: str, path: str) -> None:
    """``1e999`` is valid JSON grammar but no float: Python reads it as infinity, which must not
    reach a provider (no strict JSON carries it) nor come back as a 500. It sits in a tool's
    schema here, where nothing bounds a number."""
    app, net = _app(math.nan)
    schema = '{"type": "object", "properties": {"n": {"type": "number", "maximum": ' + number + "}}}"
    if path == "/v1/chat/completions":
        tool = '{"type": "function", "function": {"name": "f", "parameters": ' + schema + "}}"
        raw = '{"model": "openai", "tools": [' + tool + '], "messages": [{"role": "user", "content": "hi"}]}'
    elif path == "/v1/messages":
        tool = '{"name": "f", "input_schema": ' + schema + "}"
        raw = (
            '{"model": "openai", "max_tokens": 5, "tools": ['
            + tool
            + '], "messages": [{"role": "user", "content": "hi"}]}'
        )
    else:
        tool = '{"type": "function", "name": "f", "parameters": ' + schema + "}"
        raw = '{"model": "openai", "tools": [' + tool + '], "input": "hi"}'
    async with _client(app) as c:
        r = await c.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    body = _strict(r.text)
    error = body["error"]
    code = error["details"]["error_code"] if "details" in error else error.get("code")
    assert code == "invalid_json", body
    assert "properties.n.maximum: a number too large for a double" in error["message"], error
    assert not net.calls
