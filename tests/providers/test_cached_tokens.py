"""Prompt-cache reads (``Usage.cached_input_tokens``, part of ``input_tokens``) in every dialect.

Each provider names them its own way: OpenAI ``usage.prompt_tokens_details.cached_tokens``
(DeepSeek ``prompt_cache_hit_tokens``), Responses ``usage.input_tokens_details.cached_tokens``,
Anthropic ``cache_read_input_tokens`` (its ``input_tokens`` leaves reads and writes out),
Gemini ``usageMetadata.cachedContentTokenCount`` (part of ``promptTokenCount``), Bedrock
``usage.cacheReadInputTokens`` (its ``inputTokens`` leaves them out). The real captures of the
wire corpus all cached nothing, so each is read with its own cached field set; the fake
providers answer in each dialect's own field when a reply scripts the cached count.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failover import Capability, Message, Request, Route, Router, Timeouts
from failover.model import Completed, Dialect, Response, Usage
from failover.policy import NoBreakers, Unlimited
from failover.providers import dialect_for
from failover.testing import FAKE_AWS_KEY_ID, FAKE_AWS_SECRET, FakeNetwork, FakeProvider, Reply, fake_authorizers

from ._wire import load, target
from .test_stream_common import run, sample

# -- the wire corpus, with cache reads ------------------------------------------------------------


def _parsed(dialect: Dialect, body: dict[str, object]) -> Response:
    from failover.transport._types import HttpResponse

    got = dialect_for(dialect).parse(
        target(dialect),
        HttpResponse(status=200, headers={"content-type": "application/json"}, body=json.dumps(body).encode()),
    )
    assert isinstance(got, Response), got
    return got


def test_openai_body(wire: Path) -> None:
    body = json.loads(load(wire, "openai-chat/01-nonstream-text-usage.json").body)
    body["usage"]["prompt_tokens_details"]["cached_tokens"] = 9
    usage = _parsed(Dialect.OPENAI, body).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (16, 9)


def test_anthropic_body_counts_cache_reads_and_writes_as_input(wire: Path) -> None:
    body = json.loads(load(wire, "anthropic/01-nonstream-text-usage.json").body)
    body["usage"].update(cache_read_input_tokens=1000, cache_creation_input_tokens=30)
    usage = _parsed(Dialect.ANTHROPIC, body).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (12 + 1000 + 30, 1000)


def test_gemini_body(wire: Path) -> None:
    body = json.loads(load(wire, "gemini/01-generate-content-stop-usage.json").body)
    prompt = body["usageMetadata"]["promptTokenCount"]
    body["usageMetadata"]["cachedContentTokenCount"] = prompt - 1
    usage = _parsed(Dialect.GEMINI, body).usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (prompt, prompt - 1)


# (dialect, sample, the cached field's text as captured, what to put instead, input, cached)
STREAMS = [
    (
        Dialect.OPENAI,
        "openai-chat/07-stream-text-include-usage-obfuscation.jsonl",
        b'"cached_tokens":0',
        b'"cached_tokens":12',
        16,
        12,
    ),
    (
        Dialect.OPENAI,
        "deepseek/01-stream-usage-done.http",
        b'"prompt_cache_hit_tokens":0',
        b'"prompt_cache_hit_tokens":7',
        11,
        7,
    ),
    (
        Dialect.OPENAI_RESPONSES,
        "openai-responses/01-stream-text-completed-usage.http",
        b'"cached_tokens":0',
        b'"cached_tokens":10',
        14,
        10,
    ),
    (
        Dialect.OPENAI_RESPONSES,
        "openai-responses/02-stream-reasoning-function-call-args.jsonl",
        b'"cached_tokens":0',
        b'"cached_tokens":128',
        134,
        128,
    ),
    (
        Dialect.ANTHROPIC,
        "anthropic/02-stream-text-ratelimit-headers.http",
        b'"cache_read_input_tokens":0',
        b'"cache_read_input_tokens":2048',
        15 + 2048,
        2048,
    ),
    (
        Dialect.GEMINI,
        "gemini/03-stream-text-crlf.http",
        b'"promptTokenCount": 13,',
        b'"promptTokenCount": 13,"cachedContentTokenCount": 8,',
        13,
        8,
    ),
]


@pytest.mark.parametrize(
    ("dialect", "name", "was", "now", "input_tokens", "cached"), STREAMS, ids=[s[1] for s in STREAMS]
)
def test_streamed_sample(
    wire: Path, dialect: Dialect, name: str, was: bytes, now: bytes, input_tokens: int, cached: int
) -> None:
    headers, body = sample(wire, name)
    assert was in body
    headers.pop("content-length", None)
    r = run(dialect, body.replace(was, now), headers)
    usage = r.response().usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (input_tokens, cached)
    assert r.usages[-1].usage == usage


# -- the fake providers, every dialect, plain and streamed ------------------------------------------

SPOKEN = [Dialect.OPENAI, Dialect.OPENAI_RESPONSES, Dialect.ANTHROPIC, Dialect.GEMINI, Dialect.BEDROCK]


def _router(provider: FakeProvider) -> Router:
    t = provider.target(
        timeouts=Timeouts(connect=2.0, total=10.0),
        capabilities=frozenset({Capability.CHAT, Capability.STREAMING}),
        max_attempts=1,
    )
    return Router(
        [Route(name="r", primary=(t,))],
        transport=FakeNetwork(provider),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        auth=fake_authorizers(),
    )


def _provider(dialect: Dialect, reply: Reply) -> FakeProvider:
    if dialect is Dialect.BEDROCK:
        return FakeProvider("p", dialect, [reply], api_key=FAKE_AWS_KEY_ID, secret_key=FAKE_AWS_SECRET)
    return FakeProvider("p", dialect, [reply])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("dialect", SPOKEN)
async def test_a_fake_reports_the_cached_tokens_it_is_told_in_its_own_field(dialect: Dialect, stream: bool) -> None:
    provider = _provider(dialect, Reply.ok("cached answer", usage=(1200, 7, 1024)))
    router = _router(provider)
    request = Request(messages=(Message.user("hi"),), max_tokens=50)
    try:
        if stream:
            async with router.stream("r", request) as s:
                done = [e async for e in s if isinstance(e, Completed)]
            response = done[-1].response
        else:
            response = await router.complete("r", request)
    finally:
        await router.aclose()
    assert response.usage == Usage(input_tokens=1200, output_tokens=7, cached_input_tokens=1024)
    assert response.record is not None
    (attempt,) = response.record.attempts
    assert attempt.usage == response.usage
    assert response.record.to_dict()["attempts"][0]["usage"]["cached_input_tokens"] == 1024


def test_a_reply_scripts_cached_tokens_as_a_third_usage_number() -> None:
    assert Reply.ok(usage=(10, 2, 4)).usage == (10, 2, 4)
    assert Reply.parse("ok(usage=(10, 2, 4))") == Reply.ok(usage=(10, 2, 4))
    assert Reply.parse(Reply.ok(usage=(10, 2, 4)).to_string()).usage == (10, 2, 4)
    for bad in [(10, 2, 11), (10, 2, 4, 1), (10, -1), (10, 2, True)]:
        with pytest.raises(ValueError, match="cached_input_tokens"):
            Reply.ok(usage=bad)  # type: ignore[arg-type]
