"""The ``model`` of every answer is the upstream model that answered, not the route.

Measured from outside: after a 503 on the primary the fallback answered and the gateway's
``model`` said the route's name, so usage and cost tools that read ``response.model`` billed
the wrong model. These run the gateway over real loopback HTTP (served by uvicorn in the
test's loop, fake upstreams behind a FakeServer) with the official ``openai`` and
``anthropic`` SDKs at their DEFAULT settings, plain and streamed, on Chat Completions,
Responses and Messages: ``model`` is the answering target's ``model``, the route the caller
named is in ``x-failover-route``, the target in ``x-failover-target`` (a plain answer) and in
the stream's closing ``x_failover`` summary.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from failover import Route
from failover.testing import FakeProvider, FakeServer, Reply, Script

from ._recovery import CAPS, gateway, make_router, upstreams

pytestmark = [pytest.mark.looptime(noop_cycles=200), pytest.mark.e2e]

HI = [{"role": "user", "content": "hi"}]

# primary's script -> (the target that answers, its model)
CASES = {
    "fallback": (Script.always(Reply.overloaded()), "b", "model-b"),  # a 503 on A: B answers
    "direct": (Script.always(Reply.ok("hello there")), "a", "model-a"),  # A answers
}


def _extra(obj: Any) -> dict[str, Any]:
    return dict(obj.model_extra or {})


async def _chat(gw: Any, stream: bool) -> tuple[set[str], dict[str, str], str | None]:
    """The models the answer named, its headers, and the target its summary names (streams)."""
    async with gw.openai() as client:
        if not stream:
            raw = await client.chat.completions.with_raw_response.create(model="r", messages=HI)
            return {raw.parse().model}, dict(raw.headers), None
        async with client.chat.completions.with_streaming_response.create(model="r", messages=HI, stream=True) as r:
            chunks = [c async for c in await r.parse()]
            headers = dict(r.headers)
    assert len(chunks) >= 2
    summary = next(_extra(c)["x_failover"] for c in chunks if "x_failover" in _extra(c))
    return {c.model for c in chunks}, headers, summary["target"]


async def _responses(gw: Any, stream: bool) -> tuple[set[str], dict[str, str], str | None]:
    async with gw.openai() as client:
        if not stream:
            raw = await client.responses.with_raw_response.create(model="r", input="hi")
            return {raw.parse().model}, dict(raw.headers), None
        async with client.responses.with_streaming_response.create(model="r", input="hi", stream=True) as r:
            events = [e async for e in await r.parse()]
            headers = dict(r.headers)
    named = [e for e in events if getattr(e, "response", None) is not None]
    # response.created, response.in_progress and response.completed each carry the model
    assert [e.type for e in named] == ["response.created", "response.in_progress", "response.completed"]
    return {e.response.model for e in named}, headers, _extra(events[-1])["x_failover"]["target"]


async def _messages(gw: Any, stream: bool) -> tuple[set[str], dict[str, str], str | None]:
    client = anthropic.AsyncAnthropic(base_url=gw.base_url.removesuffix("/v1"), api_key="unused")
    try:
        if not stream:
            raw = await client.messages.with_raw_response.create(model="r", max_tokens=64, messages=HI)
            return {(await raw.parse()).model}, dict(raw.headers), None
        async with client.messages.stream(model="r", max_tokens=64, messages=HI) as s:
            events = [e async for e in s]
            final = await s.get_final_message()
            headers = dict(s.response.headers)
    finally:
        await client.close()
    start = [e for e in events if e.type == "message_start"]
    assert len(start) == 1
    delta = next(e for e in events if e.type == "message_delta")
    return {start[0].message.model, final.model}, headers, _extra(delta)["x_failover"]["target"]


ENDPOINTS = {"chat": _chat, "responses": _responses, "messages": _messages}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("case", list(CASES))
async def test_model_is_the_model_that_answered_and_the_route_is_in_the_header(
    case: str, endpoint: str, stream: bool
) -> None:
    script, target, model = CASES[case]
    async with upstreams(script, attempts_a=1) as up:
        router = make_router(up.route("a->b"))
        async with gateway(router) as gw:
            models, headers, summary_target = await ENDPOINTS[endpoint](gw, stream)
        await router.aclose()
    assert models == {model}  # never the route "r", in any body, chunk or event
    assert headers["x-failover-route"] == "r"
    if stream:
        assert summary_target == target
    assert headers["x-failover-target"] == target  # on a stream too: its head goes out at the commit point
    assert up.request_calls(target) == 1


@pytest.mark.parametrize("case", ["failover", "direct"])
async def test_embeddings_model_is_the_model_that_answered(case: str) -> None:
    """``/v1/embeddings``: an equivalent may serve the same model under its own name (a
    deployment's); after a 503 on the primary, ``model`` is the equivalent's."""
    first = Script.always(Reply.overloaded()) if case == "failover" else Script.always(Reply.ok())
    providers = (FakeProvider("e1", "openai", first), FakeProvider("e2", "openai", Script.always(Reply.ok())))
    async with FakeServer(*providers) as srv:
        e1, e2 = (
            srv.target_for(p, model=m, equivalence_key="E", max_attempts=1, tokenizer="estimate")
            for p, m in zip(providers, ("text-embedding-3-small", "small-deployment-eu"), strict=True)
        )
        router = make_router(Route(name="search", primary=(e1, e2)))
        async with gateway(router) as gw, gw.openai() as client:
            raw = await client.embeddings.with_raw_response.create(model="search", input=["one", "two"])
            out = raw.parse()
        await router.aclose()
    answered, model = ("e2", "small-deployment-eu") if case == "failover" else ("e1", "text-embedding-3-small")
    assert out.model == model and len(out.data) == 2
    assert raw.headers["x-failover-route"] == "search"
    assert raw.headers["x-failover-target"] == answered


STREAMS = {
    "chat": ("/v1/chat/completions", {"messages": HI, "stream": True}),
    "responses": ("/v1/responses", {"input": "hi", "stream": True}),
    "messages": ("/v1/messages", {"messages": HI, "max_tokens": 64, "stream": True}),
}


def _named_models(sse: str) -> list[str]:
    """Every ``model`` an SSE answer names: a chunk's own, a Responses event's ``response``,
    an Anthropic ``message_start``'s ``message``."""
    out: list[str] = []
    for line in sse.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        data = json.loads(line[len("data: ") :])
        for holder in (data, data.get("response") or {}, data.get("message") or {}):
            if isinstance(holder, dict) and "model" in holder:
                out.append(holder["model"])
    return out


@pytest.mark.parametrize("endpoint", list(STREAMS))
async def test_a_stream_cut_after_output_names_the_model_whose_output_was_shown(endpoint: str) -> None:
    """A 503 on A, then B's stream is cut after its first events: the stream ends with an error
    (``response.failed`` on Responses), and every event that names a model names B's."""
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()))
    b = FakeProvider("b", "openai", Script.always(Reply.drop_after(4, text="one two three four five six")))
    async with FakeServer(a, b) as srv:
        ta, tb = (
            srv.target_for(p, model=f"model-{p.name}", max_attempts=1, capabilities=CAPS, tokenizer="estimate")
            for p in (a, b)
        )
        # hold_tokens=0: B's first text commits, so the cut comes after output began
        router = make_router(Route(name="r", primary=(ta,), fallbacks=(tb,), hold_tokens=0))
        path, body = STREAMS[endpoint]
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url.removesuffix("/v1")) as http:
            r = await http.post(path, json={"model": "r", **body})
        await router.aclose()
    assert r.status_code == 200 and r.headers["x-failover-route"] == "r"
    assert "partial_output" in r.text  # the cut was told, not hidden
    named = _named_models(r.text)
    assert named and set(named) == {"model-b"}
    if endpoint == "responses":
        assert '"response.failed"' in r.text
