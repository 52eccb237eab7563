"""The embeddings adapters: the bodies each provider documents, their answers, their errors."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from failover.model import (
    Dialect,
    Embeddings,
    EmbedInput,
    EmbedRequest,
    Failure,
    FailureKind,
    InvalidRequest,
    Secret,
    Target,
    Vertex,
)
from failover.providers.embeddings import embed_adapter_for
from failover.transport._types import HttpResponse

OPENAI = Target(
    name="oa",
    dialect=Dialect.OPENAI,
    model="text-embedding-3-small",
    base_url="https://api.openai.com/v1",
    api_key=Secret("sk-KEY-1"),
)
GEMINI = Target(
    name="gm",
    dialect=Dialect.GEMINI,
    model="gemini-embedding-001",
    base_url="https://generativelanguage.googleapis.com/v1beta",
    api_key=Secret("AIza-KEY-2"),
)
VERTEX = Target(
    name="vx",
    dialect=Dialect.GEMINI,
    model="text-embedding-005",
    base_url="https://us-central1-aiplatform.googleapis.com",
    vertex=Vertex(project="my-proj", location="us-central1"),
)
TITAN = Target(
    name="ti",
    dialect=Dialect.BEDROCK,
    model="amazon.titan-embed-text-v2:0",
    base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
    region="us-east-1",
)
COHERE = Target(
    name="co",
    dialect=Dialect.BEDROCK,
    model="cohere.embed-english-v3",
    base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
    region="us-east-1",
)

TWO = EmbedRequest(inputs=("first text", "second text"), dimensions=4, input_type=EmbedInput.QUERY)


def _resp(status: int, body: Any, **headers: str) -> HttpResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HttpResponse(status=status, headers={"content-type": "application/json", **headers}, body=raw)


def _ok(outcome: Embeddings | Failure) -> Embeddings:
    assert isinstance(outcome, Embeddings), outcome
    return outcome


def _fail(outcome: Embeddings | Failure) -> Failure:
    assert isinstance(outcome, Failure), outcome
    return outcome


# -- requests: the documented bodies ------------------------------------------------------------------


def test_openai_body_and_url() -> None:
    http = embed_adapter_for(Dialect.OPENAI).build_embed(OPENAI, TWO)  # type: ignore[union-attr]
    assert http.url == "https://api.openai.com/v1/embeddings"
    assert http.headers["authorization"] == "Bearer sk-KEY-1"
    assert http.json == {
        "model": "text-embedding-3-small",
        "input": ["first text", "second text"],
        "encoding_format": "float",
        "dimensions": 4,
    }


def test_openai_azure_deployment_and_target_dimensions() -> None:
    azure = Target(
        name="az",
        dialect=Dialect.OPENAI,
        model="emb-deploy",
        base_url="https://x.openai.azure.com",
        api_key=Secret("az-KEY"),
        azure_deployment=True,
        query=(("api-version", "2024-10-21"),),
        dimensions=256,
    )
    http = embed_adapter_for(Dialect.OPENAI).build_embed(azure, EmbedRequest(inputs=("a",)))  # type: ignore[union-attr]
    assert http.url == "https://x.openai.azure.com/openai/deployments/emb-deploy/embeddings?api-version=2024-10-21"
    assert http.headers["api-key"] == "az-KEY" and "authorization" not in http.headers
    assert http.json is not None and http.json["dimensions"] == 256  # the target's size when the request names none


def test_gemini_api_batch_body() -> None:
    http = embed_adapter_for(Dialect.GEMINI).build_embed(GEMINI, TWO)  # type: ignore[union-attr]
    assert http.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-001:batchEmbedContents"
    )
    assert http.headers["x-goog-api-key"] == "AIza-KEY-2"
    assert http.json == {
        "requests": [
            {
                "model": "models/gemini-embedding-001",
                "content": {"parts": [{"text": t}]},
                "taskType": "RETRIEVAL_QUERY",
                "outputDimensionality": 4,
            }
            for t in ("first text", "second text")
        ]
    }


@pytest.mark.parametrize(
    ("location", "base", "host"),
    [
        (
            "us-central1",
            "https://us-central1-aiplatform.googleapis.com",
            "https://us-central1-aiplatform.googleapis.com",
        ),
        ("global", "https://aiplatform.googleapis.com", "https://aiplatform.googleapis.com"),
        ("europe-west4", "http://127.0.0.1:9/proxy", "http://127.0.0.1:9/proxy"),  # a base_url names the host
    ],
)
def test_vertex_predict_url_and_body(location: str, base: str, host: str) -> None:
    t = Target(
        name="vx",
        dialect=Dialect.GEMINI,
        model="text-embedding-005",
        base_url=base,
        vertex=Vertex(project="my-proj", location=location),
    )
    http = embed_adapter_for(Dialect.GEMINI).build_embed(t, TWO)  # type: ignore[union-attr]
    assert http.url == (
        f"{host}/v1/projects/my-proj/locations/{location}/publishers/google/models/text-embedding-005:predict"
    )
    assert "x-goog-api-key" not in http.headers  # a google-auth token, added by the credential chain
    assert http.json == {
        "instances": [
            {"content": "first text", "task_type": "RETRIEVAL_QUERY"},
            {"content": "second text", "task_type": "RETRIEVAL_QUERY"},
        ],
        "parameters": {"outputDimensionality": 4},
    }


def test_batch_sizes() -> None:
    def size(t: Target) -> int:
        adapter = embed_adapter_for(t.dialect)
        assert adapter is not None
        return adapter.batch_size(t)

    assert size(OPENAI) == 2048
    assert size(GEMINI) == 100
    assert size(VERTEX) == 250
    vertex_gemini = Target(
        name="vg", dialect=Dialect.GEMINI, model="gemini-embedding-001", base_url="https://x", vertex=VERTEX.vertex
    )
    assert size(vertex_gemini) == 1  # gemini-embedding on Vertex: one instance per request
    assert size(TITAN) == 1
    assert size(COHERE) == 96


def test_titan_v2_body_and_invoke_url() -> None:
    one = EmbedRequest(inputs=("hello",), dimensions=256)
    http = embed_adapter_for(Dialect.BEDROCK).build_embed(TITAN, one)  # type: ignore[union-attr]
    assert http.url == "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.titan-embed-text-v2%3A0/invoke"
    assert http.json == {"inputText": "hello", "dimensions": 256, "normalize": True}
    assert http.content is not None and json.loads(http.content) == http.json  # the bytes SigV4 signs
    assert "authorization" not in http.headers


def test_cohere_body_maps_the_input_type() -> None:
    adapter = embed_adapter_for(Dialect.BEDROCK)
    assert adapter is not None
    http = adapter.build_embed(COHERE, EmbedRequest(inputs=("a", "b"), input_type=EmbedInput.QUERY))
    assert http.json == {"texts": ["a", "b"], "input_type": "search_query", "embedding_types": ["float"]}
    http = adapter.build_embed(COHERE, EmbedRequest(inputs=("a",)))
    assert http.json is not None and http.json["input_type"] == "search_document"  # Cohere requires one
    v4 = Target(name="c4", dialect=Dialect.BEDROCK, model="us.cohere.embed-v4:0", base_url="https://b")
    http = adapter.build_embed(v4, EmbedRequest(inputs=("a",), dimensions=512))
    assert http.json is not None and http.json["output_dimension"] == 512


def test_bedrock_names_the_models_it_cannot_embed_with() -> None:
    adapter = embed_adapter_for(Dialect.BEDROCK)
    assert adapter is not None
    chat = Target(name="cl", dialect=Dialect.BEDROCK, model="anthropic.claude-sonnet-4-5", base_url="https://b")
    assert "not an embedding model" in (adapter.unsupported(chat) or "")
    assert adapter.unsupported(TITAN) is None and adapter.unsupported(COHERE) is None
    assert embed_adapter_for(Dialect.ANTHROPIC) is None


def test_the_request_is_checked_before_anything_is_sent() -> None:
    for bad, field in [
        (EmbedRequest(inputs=()), "inputs"),
        (EmbedRequest(inputs=("a", "")), "inputs[1]"),
        (EmbedRequest(inputs=("ok", "\ud800")), "inputs[1]"),
        (EmbedRequest(inputs=("a",), dimensions=0), "dimensions"),
        (EmbedRequest(inputs=("a",), input_type="passage"), "input_type"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidRequest) as info:
            bad.check()
        assert info.value.field == field


# -- answers ----------------------------------------------------------------------------------------


def test_openai_answer_in_index_order_with_usage() -> None:
    body = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.5, 0.5, 0.5, 0.5]},
            {"object": "embedding", "index": 0, "embedding": [1, 0, 0, 0]},
        ],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
    out = _ok(embed_adapter_for(Dialect.OPENAI).parse_embed(OPENAI, TWO, _resp(200, body, **{"x-request-id": "r1"})))  # type: ignore[union-attr]
    assert [list(v) for v in out.vectors] == [[1.0, 0, 0, 0], [0.5] * 4]
    assert out.usage.input_tokens == 5 and out.provider_request_id == "r1" and out.model == "text-embedding-3-small"


def test_openai_base64_vectors_are_decoded() -> None:
    raw = base64.b64encode(struct.pack("<4f", 0.25, -0.5, 1.0, 0.0)).decode()
    body = {"data": [{"index": 0, "embedding": raw}], "usage": {"prompt_tokens": 1}}
    out = _ok(embed_adapter_for(Dialect.OPENAI).parse_embed(OPENAI, EmbedRequest(inputs=("a",)), _resp(200, body)))  # type: ignore[union-attr]
    assert list(out.vectors[0]) == [0.25, -0.5, 1.0, 0.0]


@pytest.mark.parametrize(
    "data",
    [
        [{"index": 0, "embedding": [1.0]}],  # one vector for two inputs
        [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}],  # the same index twice
        [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": ["x"]}],  # not numbers
    ],
)
def test_openai_answer_without_one_vector_per_input_is_the_providers_fault(data: list[Any]) -> None:
    f = _fail(embed_adapter_for(Dialect.OPENAI).parse_embed(OPENAI, TWO, _resp(200, {"data": data})))  # type: ignore[union-attr]
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (429, {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}, "rate_limited"),
        (429, {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}, "quota_exhausted"),
        (
            400,
            {
                "message": "This model's maximum context length is 8192 tokens",
                "type": "invalid_request_error",
                "code": None,
            },
            "context_overflow",
        ),
        (
            404,
            {"message": "The model does not exist", "type": "invalid_request_error", "code": "model_not_found"},
            "model_not_found",
        ),
        (
            401,
            {
                "message": "Incorrect API key provided: sk-KEY-1",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            },
            "authentication_or_permission",
        ),
        (
            503,
            {"message": "overloaded", "type": "service_unavailable_error", "code": "server_is_overloaded"},
            "provider_overloaded",
        ),
    ],
)
def test_openai_errors_use_the_chat_classification(status: int, error: dict[str, Any], kind: str) -> None:
    f = _fail(embed_adapter_for(Dialect.OPENAI).parse_embed(OPENAI, TWO, _resp(status, {"error": error})))  # type: ignore[union-attr]
    assert f.kind is FailureKind(kind)
    assert "sk-KEY-1" not in f.message and "sk-KEY-1" not in (f.detail or "")  # the key is never echoed


def test_gemini_api_answer() -> None:
    body = {"embeddings": [{"values": [0.1, 0.2, 0.3, 0.4]}, {"values": [0.4, 0.3, 0.2, 0.1]}]}
    out = _ok(embed_adapter_for(Dialect.GEMINI).parse_embed(GEMINI, TWO, _resp(200, body)))  # type: ignore[union-attr]
    assert [list(v) for v in out.vectors] == [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]
    assert out.usage.input_tokens == 0  # the API counts nothing: the router estimates, and says so


def test_vertex_predict_answer_counts_tokens() -> None:
    body = {
        "predictions": [
            {"embeddings": {"statistics": {"truncated": False, "token_count": 3}, "values": [0.0, 1.0, 0.0, 0.0]}},
            {"embeddings": {"statistics": {"truncated": False, "token_count": 4}, "values": [1.0, 0.0, 0.0, 0.0]}},
        ],
        "metadata": {"billableCharacterCount": 21},
    }
    out = _ok(embed_adapter_for(Dialect.GEMINI).parse_embed(VERTEX, TWO, _resp(200, body)))  # type: ignore[union-attr]
    assert out.usage.input_tokens == 7 and len(out.vectors) == 2


def test_gemini_errors_use_the_gemini_classification() -> None:
    err = {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    f = _fail(embed_adapter_for(Dialect.GEMINI).parse_embed(VERTEX, TWO, _resp(429, err)))  # type: ignore[union-attr]
    assert f.kind is FailureKind.RATE_LIMITED and f.retry_after == 7
    err = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    f = _fail(embed_adapter_for(Dialect.GEMINI).parse_embed(GEMINI, TWO, _resp(503, err)))  # type: ignore[union-attr]
    assert f.kind is FailureKind.PROVIDER_OVERLOADED


def test_titan_answer() -> None:
    body = {"embedding": [0.6, 0.8], "inputTextTokenCount": 2, "embeddingsByType": {"float": [0.6, 0.8]}}
    one = EmbedRequest(inputs=("hi",))
    out = _ok(
        embed_adapter_for(Dialect.BEDROCK).parse_embed(TITAN, one, _resp(200, body, **{"x-amzn-requestid": "aws-1"}))
    )  # type: ignore[union-attr]
    assert list(out.vectors[0]) == [0.6, 0.8] and out.usage.input_tokens == 2 and out.provider_request_id == "aws-1"


@pytest.mark.parametrize("by_type", [True, False])
def test_cohere_answer_in_both_shapes_with_the_header_count(by_type: bool) -> None:
    vectors = [[0.1, 0.2], [0.3, 0.4]]
    body = {"id": "x", "texts": ["a", "b"], "embeddings": {"float": vectors} if by_type else vectors}
    req = EmbedRequest(inputs=("a", "b"))
    out = _ok(
        embed_adapter_for(Dialect.BEDROCK).parse_embed(  # type: ignore[union-attr]
            COHERE, req, _resp(200, body, **{"x-amzn-bedrock-input-token-count": "6"})
        )
    )
    assert [list(v) for v in out.vectors] == vectors and out.usage.input_tokens == 6


@pytest.mark.parametrize(
    ("status", "error_type", "message", "kind"),
    [
        (429, "ThrottlingException", "Too many requests, please wait before trying again.", "rate_limited"),
        (429, "ModelNotReadyException", "Model is not ready for inference.", "transport_transient"),
        (503, "ServiceUnavailableException", "Bedrock is unable to process your request.", "provider_overloaded"),
        (500, "InternalServerException", "The system encountered an unexpected error.", "provider_server_error"),
        (424, "ModelErrorException", "The model failed to process the request.", "provider_server_error"),
        (408, "ModelTimeoutException", "Model has timed out.", "timeout"),
        (400, "ServiceQuotaExceededException", "Your request exceeds the service quota.", "quota_exhausted"),
        (403, "AccessDeniedException", "You don't have access to the model.", "authentication_or_permission"),
        (
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
            "authentication_or_permission",
        ),
        (404, "ResourceNotFoundException", "Model not found.", "model_not_found"),
        (400, "ValidationException", "Malformed input request: extraneous key [x]", "invalid_request"),
        (
            400,
            "ValidationException",
            "Too many input tokens. Max input tokens: 8192, request input token count: 9000",
            "context_overflow",
        ),
        (418, "", "", "invalid_request"),  # no error type: the status says
    ],
)
def test_bedrock_errors_by_status_and_error_type(status: int, error_type: str, message: str, kind: str) -> None:
    headers = {"x-amzn-errortype": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    f = _fail(
        embed_adapter_for(Dialect.BEDROCK).parse_embed(  # type: ignore[union-attr]
            TITAN, EmbedRequest(inputs=("a",)), _resp(status, {"message": message}, **headers)
        )
    )
    assert f.kind is FailureKind(kind), f
    assert f.provider_code == (error_type or None)
