"""The first rung of the fallback ladder: one Claude model on three clouds, over real HTTP.

The Anthropic API is in an outage (529 overloaded). The same model on AWS Bedrock is
overloaded too (ServiceUnavailableException, 503), and on Google Vertex AI it answers. The
caller gets Claude's answer from Vertex, the record names each cloud in order as an
equivalent failover (never a cross-model fallback), each cloud received exactly one request,
Bedrock's was signed with SigV4 (the fake recomputes the signature) and Vertex's carried a
bearer token. Then the same route through ``failover serve``'s embedded default, with the
official anthropic SDK at its default settings as the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anthropic
import pytest

from failover import Capability, Message, Phase, Request, Route, Router, Timeouts
from failover.gateway import GatewaySettings, create_app, embedded_router
from failover.model import Completed, Secret, TextDelta, Vertex
from failover.policy import Backoff
from failover.testing import (
    FAKE_AWS_KEY_ID,
    FAKE_AWS_SECRET,
    FAKE_TOKEN,
    FakeProvider,
    FakeServer,
    Reply,
    Script,
    fake_authorizers,
)
from failover.transport import Http1Transport
from tests.gateway._kit import ServerThread

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

KEY = "claude-sonnet-4-5"
CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
LATENCY = 0.1


def clouds() -> tuple[FakeProvider, FakeProvider, FakeProvider]:
    outage = Script.always(Reply.overloaded(latency=LATENCY))
    return (
        FakeProvider("anthropic", "anthropic", outage, model="claude-sonnet-4-5", api_key="sk-ant-test"),
        FakeProvider(
            "bedrock",
            "bedrock",
            outage,
            model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            api_key=FAKE_AWS_KEY_ID,
            secret_key=FAKE_AWS_SECRET,
        ),
        FakeProvider(
            "vertex",
            "anthropic",
            Script.always(Reply.ok("Bonjour from Claude", latency=LATENCY, chunk_interval=0.01)),
            model="claude-sonnet-4-5@20250929",
            api_key=FAKE_TOKEN,
        ),
    )


@pytest.fixture
async def served() -> AsyncIterator[tuple[Router, tuple[FakeProvider, FakeProvider, FakeProvider]]]:
    a, b, v = clouds()
    async with FakeServer(a, b, v) as srv:
        timeouts = Timeouts(connect=2.0, first_event=5.0, idle=5.0, total=10.0)
        common = {"equivalence_key": KEY, "timeouts": timeouts, "max_attempts": 1, "capabilities": CAPS}
        route = Route(
            name="claude",
            primary=(
                srv.target_for(a, api_key=Secret("sk-ant-test"), **common),
                srv.target_for(b, **common),
                srv.target_for(
                    v,
                    api_key=None,
                    vertex=Vertex(project="acme", location="us-east5"),
                    **common,
                ),
            ),
        )
        transport = Http1Transport()
        router = Router([route], transport=transport, backoff=Backoff(base=0.2, cap=1.0), auth=fake_authorizers())
        try:
            yield router, (a, b, v)
        finally:
            await router.aclose()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_claude_recovers_on_the_same_model_across_three_clouds(
    served: tuple[Router, tuple[FakeProvider, FakeProvider, FakeProvider]], stream: bool
) -> None:
    router, (a, b, v) = served
    request = Request(messages=(Message.user("Say hello in French"),), max_tokens=100)
    loop = asyncio.get_running_loop()
    start = loop.time()
    if stream:
        pieces: list[str] = []
        async with router.stream("claude", request) as s:
            async for event in s:
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                elif isinstance(event, Completed):
                    response = event.response
        assert "".join(pieces) == "Bonjour from Claude"
    else:
        response = await router.complete("claude", request)
    elapsed = loop.time() - start

    assert response.text == "Bonjour from Claude"
    record = response.record
    assert [(x.target, x.phase, x.outcome) for x in record.attempts] == [
        ("anthropic", Phase.PRIMARY, "provider_overloaded"),
        ("bedrock", Phase.FAILOVER, "provider_overloaded"),
        ("vertex", Phase.FAILOVER, "ok"),
    ]
    assert [x.model for x in record.attempts] == [a.model, b.model, v.model]  # each cloud's own name for it
    assert record.attempts[0].status == 529 and record.attempts[1].status == 503
    assert record.attempts[1].failure is not None and record.attempts[1].failure.provider_code == (
        "ServiceUnavailableException"
    )
    assert record.target_used == "vertex" and record.recovered
    # one request per cloud: an overloaded equivalent is left at once while another may answer
    assert (len(a.calls), len(b.calls), len(v.calls)) == (1, 1, 1)
    assert all(c.scripted for c in (*a.calls, *b.calls, *v.calls))  # signature and token accepted
    assert "/publishers/anthropic/models/claude-sonnet-4-5@20250929:" in v.calls[0].path
    assert v.calls[0].path.endswith(":streamRawPredict" if stream else ":rawPredict")
    assert b.calls[0].path.endswith("/converse-stream" if stream else "/converse")
    # three answers of LATENCY each, on the loop clock; no backoff sleep between clouds
    assert 3 * LATENCY - 1e-6 <= elapsed < 3 * LATENCY + 0.1


def test_the_embedded_default_serves_claude_from_three_clouds() -> None:
    """``failover serve``'s embedded default: route ``claude`` is recovered on Vertex, and the
    anthropic SDK, at its defaults, sees an ordinary answer and the headers that say so."""
    router, net = embedded_router(latency=0.0, chunk_interval=0.0)
    app = create_app(router, GatewaySettings())
    with ServerThread(app) as server:
        client = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="unused")
        raw = client.messages.with_raw_response.create(
            model="claude", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
        message = raw.parse()
        assert message.content[0].type == "text" and message.content[0].text
        assert raw.headers["x-failover-target"] == "vertex"
        assert raw.headers["x-failover-recovered"] == "true"
        assert int(raw.headers["x-failover-attempts"]) == 3
        with client.messages.stream(
            model="claude", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            final = stream.get_final_message()
        assert final.content[0].type == "text" and final.content[0].text == message.content[0].text
    by_cloud = {name: len(net[name].calls) for name in ("anthropic", "bedrock", "vertex")}
    assert by_cloud == {"anthropic": 2, "bedrock": 2, "vertex": 2}
