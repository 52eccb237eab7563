"""What one request may hold (``gateway.limits``: max_tools, max_messages, max_blocks,
max_embedding_inputs, max_embedding_values), on every endpoint: over a limit is a 400
``too_many_items`` naming the field and the setting, at the limit is answered. And a request
the gateway checked is not checked again by the router (schemas, text, token counts)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import failover.gateway._sizes as sizes
import failover.router._router as router_module
from failover import Route, Secret, Timeouts
from failover.gateway import GatewaySettings, create_app, hash_key
from failover.gateway._settings import Tenant, settings_from_dict
from failover.inbound.embeddings import embeddings_body, embeddings_json
from failover.model import Embeddings, Message, Request, Tool, Usage
from failover.model._json import dumps
from failover.router import Vetted
from failover.testing import FakeNetwork, FakeProvider
from failover.tokens import counter_for
from failover.validation import InvalidSchema
from tests._sdk import quiet_router

from ._kit import Kit

LIMITS = {"max_tools": 3, "max_messages": 4, "max_blocks": 6}
BAD_SCHEMA = {"type": 12}


def _kit(**limits: int) -> Kit:
    kit = Kit()
    kit.settings = dataclasses.replace(kit.settings, max_body_bytes=1024 * 1024, **{**LIMITS, **limits})
    kit.app = create_app(kit.router, kit.settings)
    return kit


def _hi(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(n)]


def _parts(messages: int, per: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": "hi"}] * per}
        for i in range(messages)
    ]


def _chat_tools(n: int) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}} for i in range(n)]


def _claude_tools(n: int) -> list[dict[str, Any]]:
    return [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(n)]


def _resp_tools(n: int) -> list[dict[str, Any]]:
    return [{"type": "function", "name": f"t{i}", "parameters": {"type": "object"}} for i in range(n)]


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "messages": _hi(1), **extra}


def _claude(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "max_tokens": 16, "messages": _hi(1), **extra}


# (path, body at the limit, body one over it, the field the refusal names, the setting)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any], str, str]] = {
    "chat tools": (
        "/v1/chat/completions",
        _chat(tools=_chat_tools(3)),
        _chat(tools=_chat_tools(4)),
        "tools",
        "max_tools",
    ),
    "chat messages": (
        "/v1/chat/completions",
        {"model": "chat", "messages": _hi(3)},  # odd: it ends on the user's turn
        {"model": "chat", "messages": _hi(5)},
        "messages",
        "max_messages",
    ),
    "chat blocks": (
        "/v1/chat/completions",
        {"model": "chat", "messages": _parts(3, 2)},
        {"model": "chat", "messages": _parts(3, 2)[:-1] + _parts(1, 3)},
        "messages",
        "max_blocks",
    ),
    "messages tools": (
        "/v1/messages",
        _claude(tools=_claude_tools(3)),
        _claude(tools=_claude_tools(4)),
        "tools",
        "max_tools",
    ),
    "messages system blocks": (
        "/v1/messages",
        _claude(system=[{"type": "text", "text": "be brief"}] * 6),
        _claude(system=[{"type": "text", "text": "be brief"}] * 7),
        "messages",
        "max_blocks",
    ),
    "messages tool result blocks": (
        "/v1/messages",
        _claude(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}] * 6}]),
        _claude(
            messages=[
                {"role": "user", "content": [{"type": "text", "text": "hi"}] * 4},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "t0", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "x"}]}
                    ],
                },
            ],
            tools=_claude_tools(1),
        ),
        "messages",
        "max_blocks",
    ),
    "count_tokens tools": (
        "/v1/messages/count_tokens",
        {"model": "chat", "messages": _hi(1), "tools": _claude_tools(3)},
        {"model": "chat", "messages": _hi(1), "tools": _claude_tools(4)},
        "tools",
        "max_tools",
    ),
    "count_tokens messages": (
        "/v1/messages/count_tokens",
        {"model": "chat", "messages": _hi(3)},
        {"model": "chat", "messages": _hi(5)},
        "messages",
        "max_messages",
    ),
    "responses tools": (
        "/v1/responses",
        {"model": "chat", "input": "hi", "tools": _resp_tools(3)},
        {"model": "chat", "input": "hi", "tools": _resp_tools(4)},
        "tools",
        "max_tools",
    ),
    "responses input items": (
        "/v1/responses",
        {"model": "chat", "input": _hi(3)},
        {"model": "chat", "input": _hi(5)},
        "input",
        "max_messages",
    ),
}


def _refused(r: httpx.Response, param: str, setting: str) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    error = body["error"]
    if isinstance(error, dict) and "details" in error:  # Anthropic's envelope
        assert error["details"]["error_code"] == "too_many_items", body
    else:
        assert error["code"] == "too_many_items" and error["param"] == param, body
    assert f"gateway.limits.{setting}" in error["message"], body
    assert error["message"].startswith(f"{param}: "), body


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_count_over_its_limit_is_refused_and_one_at_it_answered(name: str) -> None:
    path, at, over, param, setting = CASES[name]
    kit = _kit()
    async with kit.client() as c:
        r = await c.post(path, json=at)
        assert r.status_code == 200, r.text
        r = await c.post(path, json=over)
    _refused(r, param, setting)


@pytest.mark.parametrize("name", ["chat tools", "chat messages", "messages tools", "responses tools"])
async def test_a_large_body_is_counted_in_the_worker_thread_too(name: str) -> None:
    """A body over 64 KiB of many values takes the other path (decoded, counted and translated
    in a worker thread): the same limits, the same refusal."""
    path, at, over, param, setting = CASES[name]
    kit = _kit()
    async with kit.client() as c:
        r = await c.post(path, json=_heavy(at))
        assert r.status_code == 200, r.text
        r = await c.post(path, json=_heavy(over))
    _refused(r, param, setting)


def _heavy(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a first message of 70,000 commas: over 64 KiB and, by the byte count that
    decides it, of many JSON values (see failover.gateway._body.heavy_json)."""
    commas = "," * 70_000
    if isinstance(body.get("input"), str):
        return {**body, "input": commas}
    key = "messages" if "messages" in body else "input"
    first = {**body[key][0], "content": commas}
    return {**body, key: [first, *body[key][1:]]}


async def test_raised_limits_take_more() -> None:
    kit = _kit(max_tools=10, max_messages=10, max_blocks=100)
    async with kit.client() as c:
        for path, _, over, _, _ in CASES.values():
            r = await c.post(path, json=over)
            assert r.status_code == 200, (path, r.text)


def test_the_limits_are_read_from_the_config_with_their_defaults() -> None:
    default = settings_from_dict({})
    assert (default.max_tools, default.max_messages, default.max_blocks) == (2_000, 20_000, 20_000)
    assert (default.max_embedding_inputs, default.max_embedding_values) == (2_048, 8_388_608)
    assert GatewaySettings().max_tools == default.max_tools
    s = settings_from_dict(
        {
            "limits": {
                "max_tools": 5,
                "max_messages": 6,
                "max_blocks": 7,
                "max_embedding_inputs": 8,
                "max_embedding_values": 4096,
            }
        }
    )
    assert (s.max_tools, s.max_messages, s.max_blocks, s.max_embedding_inputs, s.max_embedding_values) == (
        5,
        6,
        7,
        8,
        4096,
    )


# -- embeddings -------------------------------------------------------------------------------


def _embed_app(**limits: int) -> Callable[[], httpx.AsyncClient]:
    p = FakeProvider("e", "openai", model="text-embedding-3-small", api_key="sk-embed")
    target = p.target(api_key=Secret("sk-embed"), timeouts=Timeouts(connect=2, total=5), tokenizer="estimate")
    router = quiet_router([Route(name="search", primary=(target,))], FakeNetwork(p))
    settings = GatewaySettings(tenants=(Tenant(name="acme", key_hashes=(hash_key("k"),)),), **limits)
    app = create_app(router, settings)
    return lambda: httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gateway", headers={"authorization": "Bearer k"}
    )


async def test_embedding_inputs_and_values_have_limits() -> None:
    client = _embed_app(max_embedding_inputs=3, max_embedding_values=3 * 64)
    async with client() as c:
        r = await c.post("/v1/embeddings", json={"model": "search", "input": ["a", "b", "c"], "dimensions": 64})
        assert r.status_code == 200, r.text
        assert len(r.json()["data"]) == 3
        r = await c.post("/v1/embeddings", json={"model": "search", "input": ["a", "b", "c", "d"]})
        _refused(r, "input", "max_embedding_inputs")
        r = await c.post("/v1/embeddings", json={"model": "search", "input": ["a", "b", "c"], "dimensions": 65})
        _refused(r, "dimensions", "max_embedding_values")


async def test_more_embedding_inputs_than_openai_takes_when_raised() -> None:
    client = _embed_app(max_embedding_inputs=2_100)
    async with client() as c:
        r = await c.post(
            "/v1/embeddings", json={"model": "search", "input": [f"t{i}" for i in range(2_050)], "dimensions": 4}
        )
    assert r.status_code == 200, r.text
    assert len(r.json()["data"]) == 2_050


@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_the_sliced_embeddings_answer_is_the_same_bytes(encoding_format: str) -> None:
    import array

    result = Embeddings(
        vectors=(array.array("d", [0.25, -1.5, 3.0]), [1e-7, 2.0, float(7)]),
        model="m",
        usage=Usage(input_tokens=9),
    )
    whole = dumps(embeddings_body(result, model="text-embedding-3-small", encoding_format=encoding_format))
    assert b"".join(embeddings_json(result, model="text-embedding-3-small", encoding_format=encoding_format)) == whole


def test_a_large_embeddings_answer_is_sent_in_slices_never_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    import array

    import failover.inbound.embeddings as inbound

    monkeypatch.setattr(inbound, "SLICE_BYTES", 100)
    result = Embeddings(
        vectors=tuple(array.array("d", [0.5] * 20) for _ in range(6)), model="m", usage=Usage(input_tokens=6)
    )
    slices = embeddings_json(result, model="m")
    assert len(slices) == 7 and all(len(s) < 250 for s in slices), [len(s) for s in slices]
    assert b"".join(slices) == dumps(embeddings_body(result, model="m"))


async def test_a_large_embeddings_answer_is_written_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import failover.gateway._embeddings as endpoint

    written: list[bool] = []
    real = endpoint.embeddings_json

    def spy(*args: Any, **kw: Any) -> list[bytes]:
        written.append(True)
        return real(*args, **kw)

    monkeypatch.setattr(endpoint, "embeddings_json", spy)
    monkeypatch.setattr(endpoint, "HEAVY_ANSWER_VALUES", 100)
    client = _embed_app()
    async with client() as c:
        small = await c.post("/v1/embeddings", json={"model": "search", "input": ["a"], "dimensions": 64})
        assert written == []
        big = await c.post("/v1/embeddings", json={"model": "search", "input": ["a", "b"], "dimensions": 64})
    assert written == [True]
    assert big.json()["data"][0]["embedding"] == small.json()["data"][0]["embedding"]


# -- checked once -----------------------------------------------------------------------------


class _Calls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.router_schemas = 0
        self.router_text = 0
        self.gateway_schemas = 0
        self.counted = 0
        real_schemas, real_text, real_gateway = (
            router_module.check_request_schemas,
            router_module.check_text,
            sizes.check_schemas,
        )

        def router_schemas(*a: Any, **k: Any) -> None:
            self.router_schemas += 1
            real_schemas(*a, **k)

        def router_text(*a: Any, **k: Any) -> None:
            self.router_text += 1
            real_text(*a, **k)

        def gateway_schemas(*a: Any, **k: Any) -> None:
            self.gateway_schemas += 1
            real_gateway(*a, **k)

        monkeypatch.setattr(router_module, "check_request_schemas", router_schemas)
        monkeypatch.setattr(router_module, "check_text", router_text)
        monkeypatch.setattr(sizes, "check_schemas", gateway_schemas)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("heavy", [False, True])
async def test_the_router_does_not_check_again_what_the_gateway_checked(
    monkeypatch: pytest.MonkeyPatch, stream: bool, heavy: bool
) -> None:
    calls = _Calls(monkeypatch)
    kit = _kit()
    counter = counter_for(kit.router.routes["chat"].primary[0])
    real_count = type(counter).count

    on_loop: list[bool] = []

    def count(self: Any, request: Request) -> int:
        calls.counted += 1
        on_loop.append(threading.current_thread() is threading.main_thread())
        return real_count(self, request)

    monkeypatch.setattr(type(counter), "count", count)
    text = "x" * (70 * 1024 if heavy else 10)  # over 64 KiB: translated, checked and counted in a worker thread
    body = _chat(tools=_chat_tools(2), messages=[{"role": "user", "content": text}], stream=stream)
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert calls.gateway_schemas == 1
    assert (calls.router_schemas, calls.router_text) == (0, 0)
    assert calls.counted == 1  # the route's targets share one counter: counted once, by whoever counts first
    assert on_loop == [not heavy]  # a large body's tokens are counted in a worker thread, by the gateway
    async with kit.client() as c:  # a refusal is still the gateway's 400 naming the field
        r = await c.post(
            "/v1/chat/completions",
            json=_chat(tools=[{"type": "function", "function": {"name": "f", "parameters": BAD_SCHEMA}}]),
        )
    assert r.status_code == 400 and "tools[0]" in r.text, r.text


async def test_the_library_still_checks_what_came_in_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _Calls(monkeypatch)
    kit = Kit()
    bad = Request(messages=(Message.user("hi"),), tools=(Tool(name="f", parameters=BAD_SCHEMA),))
    with pytest.raises(InvalidSchema):
        await kit.router.complete("chat", bad)
    with pytest.raises(InvalidSchema):  # a Vetted of another request is no proof for this one
        await kit.router.complete("chat", bad, vetted=Vetted(Request(messages=(Message.user("hi"),))))
    with pytest.raises(InvalidSchema):
        kit.router.stream("chat", bad, vetted=Vetted(dataclasses.replace(bad)))
    assert (calls.router_schemas, calls.router_text) == (3, 3)
    good = Request(messages=(Message.user("hi"),))
    out = await kit.router.complete("chat", good, vetted=Vetted(good, {"estimate": 1}))
    assert out.text and (calls.router_schemas, calls.router_text) == (3, 3)
