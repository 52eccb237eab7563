"""The fault kit's embedding endpoints: the official SDKs read them (openai at its defaults,
google-genai, boto3's bedrock-runtime), and failover's own adapters classify every fault
reply as the kind it imitates, in each dialect."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from failover.model import Dialect, Embeddings, EmbedInput, EmbedRequest, Failure, FailureKind, Target, Vertex
from failover.providers.embeddings import embed_adapter_for
from failover.testing import FakeNetwork, FakeProvider, FakeServer
from failover.testing._fake_embeddings import fake_vector
from failover.transport._types import TransportError

TEXTS = ["the first text", "the second text"]

# (name, dialect, model, vertex): every embeddings endpoint the kit speaks
ENDPOINTS = [
    ("openai", "openai", "text-embedding-3-small", False),
    ("gemini", "gemini", "gemini-embedding-001", False),
    ("vertex", "gemini", "text-embedding-005", True),
    ("titan", "bedrock", "amazon.titan-embed-text-v2:0", False),
    ("cohere", "bedrock", "cohere.embed-multilingual-v3", False),
]

ERRORS: list[tuple[str, FailureKind]] = [
    ("rate_limit(retry_after=2)", FailureKind.RATE_LIMITED),
    ("quota", FailureKind.QUOTA_EXHAUSTED),
    ("overloaded", FailureKind.PROVIDER_OVERLOADED),
    ("server_error", FailureKind.PROVIDER_SERVER_ERROR),
    ("unauthorized", FailureKind.AUTHENTICATION_OR_PERMISSION),
    ("not_found", FailureKind.MODEL_NOT_FOUND),
    ("context_overflow", FailureKind.CONTEXT_OVERFLOW),
    ("invalid", FailureKind.INVALID_REQUEST),
]


def _target(p: FakeProvider, vertex: bool) -> Target:
    if vertex:
        return p.target(base_url=p.root_url, api_key=None, vertex=Vertex(project="p", location="us-central1"))
    return p.target()


async def _embed(name: str, reply: str, request: EmbedRequest | None = None) -> Embeddings | Failure:
    _, dialect, model, vertex = next(e for e in ENDPOINTS if e[0] == name)
    p = FakeProvider("p", dialect, [reply], model=model)
    target = _target(p, vertex)
    adapter = embed_adapter_for(target.dialect)
    assert adapter is not None
    req = request or EmbedRequest(inputs=(TEXTS[0],), dimensions=16)
    http = adapter.build_embed(target, req)
    resp = await FakeNetwork(p).send(http, connect_timeout=1, total_timeout=5)
    assert p.calls[0].scripted, f"the fake rejected the adapter's request: {resp.body!r}"
    return adapter.parse_embed(target, req, resp)


@pytest.mark.parametrize("name", [e[0] for e in ENDPOINTS])
@pytest.mark.parametrize(("reply", "kind"), ERRORS)
async def test_each_fault_is_classified_as_its_kind(name: str, reply: str, kind: FailureKind) -> None:
    outcome = await _embed(name, reply)
    assert isinstance(outcome, Failure), outcome
    assert outcome.kind is kind, outcome


@pytest.mark.parametrize("name", [e[0] for e in ENDPOINTS])
@pytest.mark.parametrize("reply", ["ok", "delay(0.01)", "truncate", "refuse"])
async def test_answers_are_the_deterministic_vectors(name: str, reply: str) -> None:
    outcome = await _embed(name, reply)
    assert isinstance(outcome, Embeddings), outcome
    assert [list(v) for v in outcome.vectors] == [fake_vector(TEXTS[0], 16)]


@pytest.mark.parametrize("name", [e[0] for e in ENDPOINTS])
async def test_reset_is_a_read_transport_error(name: str) -> None:
    with pytest.raises(TransportError) as info:
        await _embed(name, "reset")
    assert info.value.phase == "read"


async def test_retry_hints_reach_the_failure() -> None:
    for name, wait in (("openai", 2), ("gemini", 2), ("vertex", 2)):
        outcome = await _embed(name, f"rate_limit(retry_after={wait})")
        assert isinstance(outcome, Failure) and outcome.retry_after == wait, name


async def test_a_request_the_real_api_refuses_is_refused_unscripted() -> None:
    p = FakeProvider("p", "openai", ["ok"], model="text-embedding-3-small")
    net = FakeNetwork(p)
    target = p.target()
    adapter = embed_adapter_for(Dialect.OPENAI)
    assert adapter is not None
    too_big = adapter.build_embed(target, EmbedRequest(inputs=("a",), dimensions=4096))  # 1536 at most
    resp = await net.send(too_big, connect_timeout=1, total_timeout=5)
    failure = adapter.parse_embed(target, EmbedRequest(inputs=("a",)), resp)
    assert isinstance(failure, Failure) and failure.kind is FailureKind.INVALID_REQUEST
    assert "at most 1536" in failure.message
    assert not p.calls[0].scripted and p.position == 0  # the scripted reply is still there


# -- the official SDKs ------------------------------------------------------------------------------


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeServer, dict[str, FakeProvider]]]:
    fakes = {
        "openai": FakeProvider("oa", "openai", model="text-embedding-3-small"),
        "gemini": FakeProvider("gm", "gemini", model="gemini-embedding-001"),
        "titan": FakeProvider("ti", "bedrock", model="amazon.titan-embed-text-v2:0"),
        "cohere": FakeProvider("co", "bedrock", model="cohere.embed-english-v3"),
    }
    async with FakeServer(*fakes.values()) as srv:
        yield srv, fakes


@pytest.mark.e2e
async def test_openai_sdk_at_its_defaults_reads_base64_vectors(served: tuple[FakeServer, Any]) -> None:
    srv, fakes = served
    p = fakes["openai"]
    async with openai.AsyncOpenAI(base_url=srv.base_url_for(p), api_key="sk-test") as client:
        out = await client.embeddings.create(model="text-embedding-3-small", input=TEXTS, dimensions=32)
        floats = await client.embeddings.create(model="text-embedding-3-small", input="x", encoding_format="float")
    assert p.calls[0].json is not None and p.calls[0].json["encoding_format"] == "base64"  # the SDK's default
    for e, text in zip(out.data, TEXTS, strict=True):
        assert e.embedding == pytest.approx(fake_vector(text, 32), abs=1e-6)
    assert out.usage.prompt_tokens == 8 and out.model == "text-embedding-3-small"
    assert floats.data[0].embedding == fake_vector("x", 1536)


@pytest.mark.e2e
async def test_openai_sdk_sees_the_faults_as_its_errors(served: tuple[FakeServer, Any]) -> None:
    srv, fakes = served
    p = fakes["openai"]
    p.load(["rate_limit(retry_after=0.01)", "quota", "context_overflow", "ok"])
    async with openai.AsyncOpenAI(base_url=srv.base_url_for(p), api_key="sk-test", max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as rate:
            await client.embeddings.create(model="text-embedding-3-small", input="x")
        assert rate.value.code == "rate_limit_exceeded"
        with pytest.raises(openai.RateLimitError) as quota:
            await client.embeddings.create(model="text-embedding-3-small", input="x")
        assert quota.value.code == "insufficient_quota"
        with pytest.raises(openai.BadRequestError) as long:
            await client.embeddings.create(model="text-embedding-3-small", input="x")
        assert long.value.code == "context_length_exceeded"
        assert (await client.embeddings.create(model="text-embedding-3-small", input="x")).data


@pytest.mark.e2e
async def test_google_genai_embed_content(served: tuple[FakeServer, Any]) -> None:
    from google import genai
    from google.genai import types

    srv, fakes = served
    g = fakes["gemini"]
    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=srv.base_url_for(g)))
    out = await client.aio.models.embed_content(
        model="gemini-embedding-001",
        contents=TEXTS,
        config=types.EmbedContentConfig(output_dimensionality=24, task_type="RETRIEVAL_QUERY"),
    )
    assert out.embeddings is not None
    assert [e.values for e in out.embeddings] == [fake_vector(t, 24) for t in TEXTS]
    (call,) = g.calls
    assert call.path.endswith("/models/gemini-embedding-001:batchEmbedContents")
    assert call.json is not None and call.json["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    # failover's own request for the same texts says the same as the SDK's
    adapter = embed_adapter_for(Dialect.GEMINI)
    assert adapter is not None
    ours = adapter.build_embed(
        g.target(), EmbedRequest(inputs=tuple(TEXTS), dimensions=24, input_type=EmbedInput.QUERY)
    ).json
    sdk = [{**r, "content": {k: v for k, v in r["content"].items() if k != "role"}} for r in call.json["requests"]]
    assert ours == {"requests": sdk}  # the SDK also says role: user, which embeddings ignore


@pytest.mark.e2e
async def test_boto3_invoke_model_reads_titan_cohere_and_their_errors(served: tuple[FakeServer, Any]) -> None:
    import boto3
    from botocore.config import Config

    srv, fakes = served

    def client(p: FakeProvider) -> Any:
        return boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=srv.url_for(p),
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="secret",
            config=Config(retries={"total_max_attempts": 1}),  # the throttle reaches us, not a retry
        )

    def titan() -> tuple[dict[str, Any], dict[str, Any], str]:
        c = client(fakes["titan"])
        r = c.invoke_model(
            modelId="amazon.titan-embed-text-v2:0", body=json.dumps({"inputText": "hello", "dimensions": 256})
        )
        body = json.loads(r["body"].read())
        try:
            c.invoke_model(modelId="amazon.titan-embed-text-v2:0", body=json.dumps({"inputText": "hello"}))
        except c.exceptions.ThrottlingException as exc:
            return body, r["ResponseMetadata"]["HTTPHeaders"], exc.response["Error"]["Message"]
        raise AssertionError("no ThrottlingException")

    fakes["titan"].load(["ok", "rate_limit"])
    body, headers, throttled = await asyncio.to_thread(titan)
    assert body["embedding"] == fake_vector("hello", 256) and body["inputTextTokenCount"] == 2
    assert headers["x-amzn-bedrock-input-token-count"] == "2"
    assert throttled == "Too many requests, please wait before trying again."
    assert fakes["titan"].calls[0].path.endswith("/model/amazon.titan-embed-text-v2%3A0/invoke")

    def cohere() -> dict[str, Any]:
        c = client(fakes["cohere"])
        body = {"texts": TEXTS, "input_type": "search_document", "embedding_types": ["float"]}
        r = c.invoke_model(modelId="cohere.embed-english-v3", body=json.dumps(body))
        out: dict[str, Any] = json.loads(r["body"].read())
        return out

    body = await asyncio.to_thread(cohere)
    assert body["embeddings"] == {"float": [fake_vector(t, 1024) for t in TEXTS]}
    assert body["response_type"] == "embeddings_by_type"
