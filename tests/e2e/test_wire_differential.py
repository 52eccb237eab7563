"""failover reads every stream as the providers' own SDKs read it: a differential test.

For each dialect (OpenAI Chat Completions, Anthropic Messages, Gemini
``streamGenerateContent?alt=sse``), hypothesis draws a VALID stream (reasoning, text, one to
four parallel tool calls whose OpenAI argument fragments interleave, usage, refusals, errors
mid-stream) and writes it awkwardly (LF / CR / CRLF, comments, keep-alives, ``id:`` and
``retry:``, ``data:`` without its space, writes that cut UTF-8 characters); see
``_wire_streams``. A raw loopback server sends exactly those bytes, and four readers read them:

(a) the official SDK, directly: the oracle (openai: chunk objects and the ``.stream()``
    accumulator, which must agree with each other; anthropic: ``messages.stream()``;
    google-genai: ``generate_content_stream``);
(b) failover's ``Router.stream`` (a route with one target at the server), whose events must
    also agree with its own record;
(c) the gateway (``failover.gateway`` on loopback) with the openai and the anthropic SDK as
    clients;
(d) the same two SDKs through the in-process drop-in ``failover.httpx_client``.

All must agree with (a) on the text, the reasoning, the tool calls (names, arguments,
order) and the finish reason; (b) also on the reasoning blocks' signatures and redacted data
(Anthropic; Gemini's thought signatures) and on usage, and (c)/(d) on the reasoning blocks
when the client speaks the upstream's dialect (Anthropic). A refusal is ``content_filtered``
in (b); a client of (c)/(d) sees it as an error or as a refusal. A mid-stream error is an
error in all four, classified in (b) by its code, and the text that had arrived before it is
the same everywhere. (a) must also read what the generator meant (the story), or the
harness itself is wrong.

The suite runs a fixed number of examples per dialect from a fixed seed (derandomized). A
larger run::

    FAILOVER_WIRE_EXAMPLES=2000 pytest -q tests/e2e/test_wire_differential.py

``FAILOVER_WIRE_SEED=<n>`` draws other examples; ``FAILOVER_WIRE_OFF=reasoning,interleave``
leaves those features out of the streams drawn (also ``errors``, ``refusals``, ``framing``),
to see whether the rest reads alike.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from hypothesis import HealthCheck, example, given, seed, settings

import failover
from failover import Capability, Route, Router, Secret, Target, Timeouts
from failover.gateway import EnvelopeDefaults, GatewaySettings, create_app
from failover.model import Dialect
from failover.policy import Backoff, HealthBoard, NoBreakers, Unlimited
from tests.gateway._kit import ServerThread

from ._wire_readers import (
    ANTHROPIC_TOOLS,
    OPENAI_TOOLS,
    Seen,
    anthropic_stream,
    gemini_stream,
    openai_accumulated,
    openai_chunks,
    router_stream,
)
from ._wire_streams import AN, GE, OA, Case, Features, RawServer, Story, cases, known

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("FAILOVER_WIRE_EXAMPLES", "30"))
FEATURES = Features.parse(os.environ.get("FAILOVER_WIRE_OFF", ""))
_SEED = os.environ.get("FAILOVER_WIRE_SEED")
RUN = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=_SEED is None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _seeded(test: Any) -> Any:
    return seed(int(_SEED))(test) if _SEED is not None else test


ROUTES = {OA: "oa", AN: "an", GE: "ge"}
ALL = frozenset(Capability)


def _target(dialect: Dialect, raw: RawServer) -> Target:
    base = raw.url("fo") + ("/v1beta" if dialect is GE else "/v1")
    model = {OA: "gpt-x", AN: "claude-x", GE: "gemini-x"}[dialect]
    return Target(
        name=f"raw-{dialect.value}",
        dialect=dialect,
        model=model,
        base_url=base,
        api_key=Secret("sk-raw-upstream"),
        capabilities=ALL,
        timeouts=Timeouts(connect=5, first_event=20, idle=20, total=30),
        max_attempts=1,
        tokenizer="estimate",
    )


def _router(raw: RawServer) -> Router:
    # hold_tokens=0: every reader is shown each event as it comes, so they can be compared
    # event by event, and a failure after text is a partial answer in all of them
    routes = [Route(name=ROUTES[d], primary=(_target(d, raw),), hold_tokens=0) for d in (OA, AN, GE)]
    return Router(routes, retry_budget=Unlimited(), breakers=NoBreakers(), backoff=Backoff(base=0.01, cap=0.05))


@dataclass
class Env:
    """The servers and the clients every example uses: one raw server, one gateway over a
    Router at it, the SDK clients; one event loop (``runner``) for all the async reads."""

    runner: asyncio.Runner
    raw: RawServer
    gateway_router: Router
    gateway: ServerThread
    clients: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    with RawServer() as raw, asyncio.Runner() as runner:
        router = _router(raw)
        app = create_app(router, GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=30_000)))
        with ServerThread(app) as gateway:
            e = Env(runner, raw, router, gateway)
            runner.run(_open_clients(e))
            yield e
            runner.run(_close_clients(e))


async def _open_clients(e: Env) -> None:
    sdk = e.raw.url("sdk")
    gw = e.gateway.base_url  # .../v1
    e.clients = {
        "a/openai": openai.AsyncOpenAI(base_url=f"{sdk}/v1", api_key="sk-oracle"),
        "a/anthropic": anthropic.AsyncAnthropic(base_url=sdk, api_key="sk-oracle"),
        "a/gemini": genai.Client(api_key="k-oracle", http_options=genai_types.HttpOptions(base_url=sdk)),
        "c/openai": openai.AsyncOpenAI(base_url=gw, api_key="sk-gateway"),
        "c/anthropic": anthropic.AsyncAnthropic(base_url=gw.removesuffix("/v1"), api_key="sk-gateway"),
    }


async def _close_clients(e: Env) -> None:
    for name, client in e.clients.items():
        if name != "a/gemini":
            await client.close()


# -- one example -----------------------------------------------------------------------------------


async def _read_all(e: Env, case: Case) -> dict[str, Seen]:
    dialect = case.story.dialect
    route = ROUTES[dialect]
    e.raw.serve(sdk=case.wire.oracle, fo=case.wire.writes)
    c = e.clients
    seen: dict[str, Seen] = {}
    if dialect is OA:
        seen["a"] = await openai_accumulated(c["a/openai"], "gpt-x")
        seen["a/chunks"] = await openai_chunks(c["a/openai"], "gpt-x")
    elif dialect is AN:
        seen["a"] = await anthropic_stream(c["a/anthropic"], "claude-x")
    else:
        seen["a"] = await gemini_stream(c["a/gemini"], "gemini-x")
    async with _router(e.raw) as router:
        seen["b"] = await router_stream(router, route, dialect.value)
    e.gateway_router.health = HealthBoard()  # a 429 read before must not cool this key down
    seen["c/openai"] = await openai_accumulated(c["c/openai"], route, tools=OPENAI_TOOLS)
    seen["c/anthropic"] = await anthropic_stream(c["c/anthropic"], route, tools=ANTHROPIC_TOOLS)
    async with _router(e.raw) as router:
        async with openai.AsyncOpenAI(api_key="unused", http_client=failover.httpx_client(router, route=route)) as oa:
            seen["d/openai"] = await openai_accumulated(oa, route, tools=OPENAI_TOOLS)
        router.health = HealthBoard()
        async with anthropic.AsyncAnthropic(
            api_key="unused", http_client=failover.httpx_client(router, route=route)
        ) as an:
            seen["d/anthropic"] = await anthropic_stream(an, route, tools=ANTHROPIC_TOOLS)
    counts = {"sdk": sum(r.path.startswith("/sdk/") for r in e.raw.requests)}
    counts["fo"] = sum(r.path.startswith("/fo/") for r in e.raw.requests)
    want = {"sdk": 2 if dialect is OA else 1, "fo": 5}
    assert counts == want, f"requests to the raw server: {counts}, expected one per read {want}"
    return seen


def _story_view(story: Story) -> Seen:
    """What the oracle should read, from what the generator meant."""
    if story.error is not None:
        return Seen(f"error:{story.error}")
    if story.refusal is not None:
        return Seen("refused", reasoning=story.reasoning)
    calls = tuple((c.name, c.args) for c in story.calls)
    return Seen("tool_use" if calls else "end_turn", story.text, story.reasoning, calls)


def differences(case: Case, seen: dict[str, Seen]) -> list[str]:
    """Every way a reader disagrees with the oracle (a); empty when all agree."""
    story, a = case.story, seen["a"]
    out: list[str] = []

    def differ(reader: str, what: str, got: Any, want: Any) -> None:
        if got != want:
            out.append(f"{reader}: {what}: {got!r}\n{' ' * len(reader)}  oracle (a): {want!r}")

    meant = _story_view(story)
    if a.outcome != meant.outcome or (
        not a.failed and (a.text, a.calls, a.reasoning) != (meant.text, meant.calls, meant.reasoning)
    ):
        out.append(f"HARNESS: the oracle (a) did not read what the generator wrote: {a!r}\n  meant: {meant!r}")
    same = {"c/anthropic": AN, "d/anthropic": AN}
    for reader, s in seen.items():
        if reader == "a":
            continue
        if a.failed or a.outcome == "refused":
            if reader in ("b", "a/chunks"):
                differ(reader, "outcome", s.outcome, a.outcome)  # classified by its code
            elif not (s.failed or s.outcome == a.outcome):
                out.append(
                    f"{reader}: outcome: {s.outcome!r}, but the oracle (a) ended with {a.outcome!r} ({s.detail})"
                )
            differ(reader, "text before the end", s.text, a.text)
            continue
        differ(reader, "outcome", s.outcome, a.outcome)
        differ(reader, "text", s.text, a.text)
        differ(reader, "reasoning", s.reasoning, a.reasoning)
        differ(reader, "tool calls", s.calls, a.calls)
        if reader == "b" or same.get(reader) is story.dialect:
            differ(reader, "reasoning blocks", s.blocks, a.blocks)
        if reader in ("b", "a/chunks"):
            differ(reader, "usage", s.usage, a.usage)
    return out


def check(env: Env, case: Case) -> None:
    off = {name for name in case.uses() if not getattr(FEATURES, name)}
    if off:
        return  # an always-run case that needs what FAILOVER_WIRE_OFF switched off (never in CI)
    seen = env.runner.run(_read_all(env, case))
    problems = differences(case, seen)
    assert not problems, "the readers disagree:\n" + "\n".join(problems) + f"\n\n{case!r}"


# -- the tests: one per dialect, each with the cases that must always run ---------------------------


@_seeded
@RUN
@given(case=cases(OA, FEATURES))
@example(case=known("openai-interleaved-two-calls"))
@example(case=known("openai-reasoning"))
@example(case=known("openai-error-rate_limit"))
def test_openai_streams_read_alike(env: Env, case: Case) -> None:
    check(env, case)


@_seeded
@RUN
@given(case=cases(AN, FEATURES))
@example(case=known("anthropic-thinking-redacted-tools"))
@example(case=known("anthropic-error-rate_limit"))
def test_anthropic_streams_read_alike(env: Env, case: Case) -> None:
    check(env, case)


@_seeded
@RUN
@given(case=cases(GE, FEATURES))
@example(case=known("gemini-thought-signature-calls"))
@example(case=known("gemini-error-rate_limit"))
def test_gemini_streams_read_alike(env: Env, case: Case) -> None:
    check(env, case)


# -- parallel calls whose heads come out of index order --------------------------------------------


def test_calls_opened_out_of_index_order_are_listed_by_index(env: Env) -> None:
    """Index 1's head before index 0's (vLLM): every reader lists the calls by ``index``, as
    the openai SDK's chunk objects filed by ``index`` do. The SDK's own ``.stream()``
    accumulator cannot read these bytes (IndexError: it needs index 0's head first); through
    failover it can, since failover sends the calls in index order. Routes with the default
    hold (``hold_tokens``), a gateway of their own."""
    case = known("openai-index-1-first")
    e = env
    e.raw.serve(sdk=case.wire.oracle, fo=case.wire.writes)

    async def read_all() -> dict[str, Seen]:
        seen: dict[str, Seen] = {"a": await openai_chunks(e.clients["a/openai"], "gpt-x")}
        with pytest.raises(IndexError):
            await openai_accumulated(e.clients["a/openai"], "gpt-x")
        routes = [Route(name="oa", primary=(_target(OA, e.raw),))]

        def router() -> Router:
            return Router(routes, retry_budget=Unlimited(), breakers=NoBreakers(), backoff=Backoff(base=0.01, cap=0.05))

        async with router() as r:
            seen["b"] = await router_stream(r, "oa", "openai")
        app = create_app(router(), GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=30_000)))
        with ServerThread(app) as gateway:
            gw = gateway.base_url
            async with openai.AsyncOpenAI(base_url=gw, api_key="sk-gateway") as oa:
                seen["c/openai"] = await openai_accumulated(oa, "oa", tools=OPENAI_TOOLS)
            async with anthropic.AsyncAnthropic(base_url=gw.removesuffix("/v1"), api_key="sk-gateway") as an:
                seen["c/anthropic"] = await anthropic_stream(an, "oa", tools=ANTHROPIC_TOOLS)
        async with router() as r:
            async with openai.AsyncOpenAI(api_key="unused", http_client=failover.httpx_client(r, route="oa")) as oa:
                seen["d/openai"] = await openai_accumulated(oa, "oa", tools=OPENAI_TOOLS)
            async with anthropic.AsyncAnthropic(
                api_key="unused", http_client=failover.httpx_client(r, route="oa")
            ) as an:
                seen["d/anthropic"] = await anthropic_stream(an, "oa", tools=ANTHROPIC_TOOLS)
        return seen

    seen = e.runner.run(read_all())
    assert seen["a"].calls == (("get_weather", {"city": "Paris"}), ("search_web", {"q": "x"}))
    problems = differences(case, seen)
    assert not problems, "the readers disagree:\n" + "\n".join(problems)
