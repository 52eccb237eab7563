"""Shared set-up for the tests that call failover through the official SDKs (tests/gateway,
tests/integrations, tests/testing): fake-provider targets and routes, the request bits
every such test sends, and the "client walks away mid-stream" steps.

Only set-up and waiting live here; every assertion stays in the test that makes it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Protocol

from failover import Capability, Price, Route, Router, Secret, Target, Timeouts
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Outcome, ReceivedCall

C = Capability
ALL = frozenset({C.CHAT, C.VISION, C.TOOLS, C.STRUCTURED_OUTPUT, C.STREAMING})

HELLO: Any = [{"role": "user", "content": "Hello"}]
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
"""The same tool in the OpenAI and (below) the Anthropic request shape."""
WEATHER_TOOL_ANTHROPIC: Any = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": WEATHER_TOOL["function"]["parameters"],
}

RouteTable = Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]
"""route name -> (primary provider names, fallback provider names)"""


def fake_target(provider: FakeProvider, api_key: str) -> Target:
    """A target on ``provider`` with every capability and short, generous-enough timeouts."""
    return provider.target(
        api_key=Secret(api_key),
        capabilities=ALL,
        timeouts=Timeouts(connect=2, first_event=5, idle=5, total=10, min_useful=0.05),
        max_attempts=2,
        price=Price(input_per_mtok=1.0, output_per_mtok=2.0),
        tokenizer="estimate",
    )


def table_routes(table: RouteTable, targets: Mapping[str, Target]) -> list[Route]:
    return [
        Route(name=name, primary=tuple(targets[t] for t in prim), fallbacks=tuple(targets[t] for t in fb))
        for name, (prim, fb) in table.items()
    ]


def quiet_router(routes: list[Route], net: FakeNetwork) -> Router:
    """A router whose policies stay out of the way (no budget, no breakers, tiny back-off,
    seeded jitter), so a test sees only what it scripts into the fake providers."""
    return Router(
        routes,
        transport=net,
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.01, cap=0.05),
        rng=random.Random(1),
        breakers=NoBreakers(),
    )


class ClosableStream(Protocol):
    """What the openai and anthropic SDKs' async streams have in common."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


async def leave_after(stream: ClosableStream, events: int) -> None:
    """Read ``events`` events, then close the stream: a client that walks away mid-answer."""
    seen = 0
    async for _ in stream:
        seen += 1
        if seen == events:
            break
    await stream.close()


async def collect_text(stream: AsyncIterable[Any], into: list[str]) -> None:
    """Read an openai SDK chat stream to its end, appending each delta's text to ``into`` (so
    a test that expects the stream to raise still sees what arrived before it did)."""
    async for chunk in stream:
        into.extend(ch.delta.content or "" for ch in chunk.choices)


async def disconnected_call(provider: FakeProvider, before: int = 0, tries: int = 200) -> ReceivedCall:
    """The one call ``provider`` got after its first ``before`` calls, once it has ended as
    CLIENT_DISCONNECTED (polled ``tries`` times, 10 ms apart: the server notices the client
    leave on its own schedule). The caller asserts on what it gets back."""
    for _ in range(tries):
        calls = provider.calls[before:]
        if calls and calls[-1].outcome is Outcome.CLIENT_DISCONNECTED:
            break
        await asyncio.sleep(0.01)
    (call,) = provider.calls[before:]
    return call
