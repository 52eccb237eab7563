"""The embedded default: routes over the built-in fake providers, no network, in-memory state.

``failover serve`` without ``--config`` runs this, so the gateway can be tried with any
OpenAI client and no provider account. The fake providers sit behind an in-process
:class:`~failover.testing.FakeNetwork` transport (no extra ports):

* route ``chat``: primary ``a`` (OpenAI dialect), approved fallbacks ``b`` (Anthropic
  dialect, no vision) and ``c`` (Gemini dialect). Every answer comes from ``a``.
* route ``flaky``: primary ``x`` (OpenAI dialect) always answers 503 overloaded, so every
  request recovers by cross-model fallback to ``c``: the ``x-failover-*`` headers show it.
* route ``claude``: one Claude model on three clouds, one equivalence class. The Anthropic
  API (``anthropic``) is in an outage (529 overloaded), AWS Bedrock (``bedrock``) throttles
  (ThrottlingException), Google Vertex AI (``vertex``) answers: every request is recovered by
  equivalent failover, the same model on another cloud, never by another model. The fake
  clouds' credentials are fixed test values (:func:`failover.testing.fake_authorizers`).
* route ``embed``: ``POST /v1/embeddings`` from ``e``, an OpenAI embedding model
  (``text-embedding-3-small``). The chat routes' models do not embed: embeddings there are
  refused (400 ``embeddings_unsupported``).

Every chat target can chat, read images, call tools, give structured output and stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..model import Capability, Dialect, Price, Route, Target, Timeouts, Vertex
from ..router import Router
from ..testing import FakeNetwork, FakeProvider, Reply, Script, fake_authorizers
from ..transport import HttpRequest, HttpResponse, StreamingResponse

C = Capability
# one Claude model as each cloud names it
CLAUDE = {
    "anthropic": "claude-sonnet-4-5",
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "claude-sonnet-4-5@20250929",
}
_ALL = frozenset({C.CHAT, C.VISION, C.TOOLS, C.STRUCTURED_OUTPUT, C.STREAMING})


class _BoundedNetwork:
    """A FakeNetwork whose call records are forgotten every ``keep`` calls (a server runs for long)."""

    enforces_total = True

    def __init__(self, net: FakeNetwork, keep: int = 10_000) -> None:
        self.net = net
        self.keep = keep
        self._count = 0

    def _tick(self) -> None:
        self._count += 1
        if self._count >= self.keep:
            self._count = 0
            self.net.clear()  # every script here is Script.always: restarting it changes nothing

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        self._tick()
        return await self.net.send(request, connect_timeout=connect_timeout, total_timeout=total_timeout)

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[StreamingResponse]:
        self._tick()
        async with self.net.stream(request, connect_timeout=connect_timeout) as resp:
            yield resp

    async def aclose(self) -> None:
        await self.net.aclose()


def embedded_providers(*, latency: float = 0.02, chunk_interval: float = 0.01) -> dict[str, FakeProvider]:
    ok = Reply.ok(chunk_interval=chunk_interval)
    return {
        "a": FakeProvider("a", Dialect.OPENAI, Script.always(ok), latency=latency),
        "b": FakeProvider("b", Dialect.ANTHROPIC, Script.always(ok), latency=latency),
        "c": FakeProvider("c", Dialect.GEMINI, Script.always(ok), latency=latency),
        "x": FakeProvider("x", Dialect.OPENAI, Script.always(Reply.overloaded()), latency=latency),
        # Claude on three clouds
        "anthropic": FakeProvider(
            "anthropic",
            Dialect.ANTHROPIC,
            Script.always(Reply.overloaded()),
            model=CLAUDE["anthropic"],
            latency=latency,
        ),
        "bedrock": FakeProvider(
            "bedrock",
            Dialect.BEDROCK,
            Script.always(Reply.rate_limit()),
            model=CLAUDE["bedrock"],
            latency=latency,
        ),
        "vertex": FakeProvider("vertex", Dialect.ANTHROPIC, Script.always(ok), model=CLAUDE["vertex"], latency=latency),
        "e": FakeProvider("e", Dialect.OPENAI, Script.always(ok), model="text-embedding-3-small", latency=latency),
    }


def embedded_routes(providers: dict[str, FakeProvider]) -> list[Route]:
    def target(name: str, caps: frozenset[Capability] = _ALL, **cloud: Any) -> Target:
        return providers[name].target(
            **cloud,
            capabilities=caps,
            timeouts=Timeouts(connect=2.0, first_event=10.0, idle=10.0, total=30.0),
            max_attempts=2 if name == "a" else 1,
            price=Price(input_per_mtok=1.0, output_per_mtok=4.0),
            tokenizer="estimate",
        )

    return [
        Route(name="chat", primary=(target("a"),), fallbacks=(target("b", _ALL - {C.VISION}), target("c"))),
        Route(name="flaky", primary=(target("x"),), fallbacks=(target("c"),)),
        Route(
            name="claude",
            primary=(
                target("anthropic", equivalence_key="claude-sonnet-4-5"),
                target("bedrock", equivalence_key="claude-sonnet-4-5"),
                target(
                    "vertex", equivalence_key="claude-sonnet-4-5", vertex=Vertex(project="demo", location="us-east5")
                ),
            ),
        ),
        Route(name="embed", primary=(target("e", frozenset()),)),
    ]


def embedded_router(*, latency: float = 0.02, chunk_interval: float = 0.01) -> tuple[Router, FakeNetwork]:
    """A Router over the embedded default routes, and the FakeNetwork behind it."""
    providers = embedded_providers(latency=latency, chunk_interval=chunk_interval)
    net = FakeNetwork(*providers.values())
    router = Router(embedded_routes(providers), transport=_BoundedNetwork(net), auth=fake_authorizers())
    return router, net
