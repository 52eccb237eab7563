"""``POST /v1/responses`` and ``POST /v1/chat/completions`` pass what failover does not read
through to a target of their own dialect, as ``/v1/messages`` does.

A top-level field the parser does not interpret reaches a Responses target (from
``/v1/responses``) or a Chat Completions target (from ``/v1/chat/completions``) byte for byte;
a target of another dialect goes without the hints (Codex's ``client_metadata`` and
``prompt_cache_key``...; the attempt records it) and is left out for any other field, and a
route with no target of the dialect answers 400 naming the field. The in-process gateway, with
fake upstreams that record what they receive.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from failover import Route
from failover.gateway import GatewaySettings, create_app
from failover.model import Phase, Response, RouteRecord
from failover.testing import FakeNetwork, FakeProvider
from tests._sdk import fake_target, quiet_router

from ._kit import PROVIDER_KEY

# values a re-encoding could change: key order, unicode, number forms, nesting, null
FUTURE: Any = {"z": 1.5, "a": ["\u00e9\u4e2d", {"nested": None, "n": -0.0, "big": 12345678901234567890}], "t": True}
CODEX: Any = {  # what Codex sends beside the conversation on every request
    "store": False,
    "parallel_tool_calls": True,
    "prompt_cache_key": "00000000-0000-4000-8000-000000000001",
    "client_metadata": {"session_id": "00000000-0000-4000-8000-000000000001", "x-codex-window-id": "w:0"},
}
ENDPOINTS = {"responses": "/v1/responses", "chat": "/v1/chat/completions"}


class Served:
    """One upstream per dialect (``r`` Responses, ``o`` Chat Completions, ``a`` Anthropic); a
    route with each alone, and two with both OpenAI dialects, either first."""

    def __init__(self) -> None:
        self.providers = {
            "r": FakeProvider("r", "openai-responses", api_key=PROVIDER_KEY),
            "o": FakeProvider("o", "openai", api_key=PROVIDER_KEY),
            "a": FakeProvider("a", "anthropic", api_key=PROVIDER_KEY),
        }
        t = {n: fake_target(p, PROVIDER_KEY) for n, p in self.providers.items()}
        routes = [
            Route(name="responses", primary=(t["r"],)),
            Route(name="chat", primary=(t["o"],)),
            Route(name="claude", primary=(t["a"],)),
            Route(name="o-then-r", primary=(t["o"],), fallbacks=(t["r"],)),
            Route(name="r-then-o", primary=(t["r"],), fallbacks=(t["o"],)),
        ]
        self.router = quiet_router(routes, FakeNetwork(*self.providers.values()))
        self.records: list[RouteRecord | None] = []
        complete = self.router.complete

        async def recorded(*args: Any, **kwargs: Any) -> Response:  # the RouteRecord of each answer
            resp = await complete(*args, **kwargs)
            self.records.append(resp.record)
            return resp

        self.router.complete = recorded  # type: ignore[method-assign]
        self.app = create_app(self.router, GatewaySettings())  # open: loopback only

    def sent(self, name: str) -> list[dict[str, Any]]:
        return [dict(c.json or {}) for c in self.providers[name].calls if c.json is not None]


@pytest.fixture
def served() -> Served:
    return Served()


@pytest.fixture
async def client(served: Served) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=served.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as c:
        yield c


def body(endpoint: str, route: str, **extra: Any) -> dict[str, Any]:
    if endpoint == "responses":
        return {"model": route, "input": "Hi", **extra}
    return {"model": route, "messages": [{"role": "user", "content": "Hi"}], **extra}


async def post(client: httpx.AsyncClient, endpoint: str, data: dict[str, Any]) -> httpx.Response:
    return await client.post(ENDPOINTS[endpoint], content=json.dumps(data, ensure_ascii=False).encode())


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize(("endpoint", "route", "upstream"), [("responses", "responses", "r"), ("chat", "chat", "o")])
@pytest.mark.parametrize("stream", [False, True])
async def test_an_unknown_field_reaches_an_upstream_of_the_same_dialect_byte_for_byte(
    served: Served, client: httpx.AsyncClient, endpoint: str, route: str, upstream: str, stream: bool
) -> None:
    extra = {"a_future_field": FUTURE, "prompt_cache_key": "k-1", "safety_identifier": "u-42", "service_tier": "flex"}
    resp = await post(client, endpoint, body(endpoint, route, stream=stream, **extra))
    assert resp.status_code == 200, resp.text
    (sent,) = served.sent(upstream)
    for name, value in extra.items():  # the same key, the same bytes
        assert _dumps(sent[name]) == _dumps(value)
    assert list(sent).index("a_future_field") > list(sent).index("model")  # after failover's own fields


async def test_responses_fields_failover_takes_reach_a_responses_upstream_without_overriding_its_own(
    served: Served, client: httpx.AsyncClient
) -> None:
    """metadata, user and parallel_tool_calls (read, echoed) go on too; ``store`` stays failover's
    false, and ``stream_options`` goes only with a streamed request (the API refuses it alone)."""
    extra = {**CODEX, "store": True, "metadata": {"k": "v"}, "user": "me", "stream_options": {"x": 1}}
    for stream in (False, True):
        resp = await post(client, "responses", body("responses", "responses", stream=stream, **extra))
        assert resp.status_code == 200, resp.text
    plain, streamed = served.sent("r")
    for sent in (plain, streamed):
        assert sent["store"] is False
        for name in ("metadata", "user", "parallel_tool_calls", "prompt_cache_key", "client_metadata"):
            assert _dumps(sent[name]) == _dumps(extra[name])
    assert "stream_options" not in plain and streamed["stream_options"] == {"x": 1}


@pytest.mark.parametrize(("route", "upstream"), [("chat", "o"), ("claude", "a")])
async def test_codex_hints_are_dropped_for_a_chat_or_anthropic_target_and_recorded(
    served: Served, client: httpx.AsyncClient, route: str, upstream: str
) -> None:
    resp = await post(client, "responses", body("responses", route, metadata={"k": "v"}, **CODEX))
    assert resp.status_code == 200, resp.text
    (sent,) = served.sent(upstream)
    assert not {*CODEX, "metadata"} & set(sent) and "client_metadata" not in repr(sent)
    (record,) = served.records
    assert record is not None and record.target_used == upstream and not record.excluded
    (attempt,) = record.attempts
    assert attempt.passthrough_dropped == tuple(sorted([*CODEX, "metadata"]))
    assert record.to_dict()["attempts"][0]["passthrough_dropped"] == list(attempt.passthrough_dropped)


@pytest.mark.parametrize("route", ["responses", "claude"])
async def test_chat_hints_are_dropped_for_another_dialect_and_recorded(
    served: Served, client: httpx.AsyncClient, route: str
) -> None:
    hints = {"user": "u-1", "metadata": {"k": "v"}, "prompt_cache_key": "k", "store": True, "seed_hint": None}
    resp = await post(client, "chat", body("chat", route, **hints))
    assert resp.status_code == 200, resp.text
    (record,) = served.records
    assert record is not None and not record.excluded
    assert record.attempts[0].passthrough_dropped == tuple(sorted(hints))  # a field sent as null asks nothing


@pytest.mark.parametrize(
    ("endpoint", "route", "answers", "left_out"),
    [("responses", "o-then-r", "r", "o"), ("chat", "r-then-o", "o", "r")],
)
async def test_an_unknown_field_leaves_a_candidate_of_another_dialect_out(
    served: Served, client: httpx.AsyncClient, endpoint: str, route: str, answers: str, left_out: str
) -> None:
    resp = await post(client, endpoint, body(endpoint, route, a_future_field=FUTURE, prompt_cache_key="k"))
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-failover-target"] == answers
    assert served.providers[left_out].calls == []  # never called
    (sent,) = served.sent(answers)
    assert _dumps(sent["a_future_field"]) == _dumps(FUTURE)
    (record,) = served.records
    assert record is not None and record.target_used == answers
    assert record.attempts[-1].phase is Phase.FALLBACK and record.attempts[-1].passthrough_dropped == ()
    (gone,) = record.excluded
    assert gone.target == left_out and not gone.temporary
    assert "a_future_field" in gone.reason and "prompt_cache_key" not in gone.reason  # a hint excludes nothing


@pytest.mark.parametrize(
    ("endpoint", "route", "field", "dialect"),
    [
        ("responses", "chat", "a_future_field", "OpenAI Responses"),
        ("responses", "claude", "prediction", "OpenAI Responses"),
        ("chat", "responses", "frequency_penalty", "OpenAI Chat Completions"),
        ("chat", "claude", "a_future_field", "OpenAI Chat Completions"),
    ],
)
async def test_a_field_no_candidate_can_honour_is_a_400_naming_it(
    served: Served, client: httpx.AsyncClient, endpoint: str, route: str, field: str, dialect: str
) -> None:
    resp = await post(client, endpoint, body(endpoint, route, prompt_cache_key="k", **{field: 1}))
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == field and error["code"] == "unsupported_parameter"
    assert field in error["message"] and dialect in error["message"] and "prompt_cache_key" not in error["message"]
    assert all(p.calls == [] for p in served.providers.values())


async def test_truncation_auto_binds_and_max_tool_calls_is_a_hint(served: Served, client: httpx.AsyncClient) -> None:
    # only a Responses target can cut a conversation to its window: a route without one refuses it
    resp = await post(client, "responses", body("responses", "claude", truncation="auto"))
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == "truncation" and error["code"] == "unsupported_parameter"
    # max_tool_calls caps hosted tool calls, which only a Responses target runs: a hint elsewhere
    resp = await post(client, "responses", body("responses", "claude", max_tool_calls=2, truncation="disabled"))
    assert resp.status_code == 200, resp.text
    (record,) = served.records[-1:]
    assert record is not None
    assert set(record.attempts[-1].passthrough_dropped) >= {"max_tool_calls", "truncation"}
    resp = await post(client, "responses", body("responses", "claude", max_tool_calls=0))
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "max_tool_calls", resp.text
