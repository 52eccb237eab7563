"""Gemini and Claude on Google Vertex AI: the URLs, the bodies, and both error envelopes.

URLs and fields as Google documents them (REST v1 projects.locations.publishers.models:
generateContent, streamGenerateContent, countTokens, rawPredict, streamRawPredict; Claude's
count-tokens:rawPredict) and as google-genai and anthropic's AnthropicVertex build them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from failover import Envelope, Route, Router, Unavailable
from failover.auth import Authorizers
from failover.model import (
    AuthKind,
    Dialect,
    Failure,
    FailureKind,
    Message,
    Request,
    ResponseFormat,
    Secret,
    Target,
    Tool,
    ToolChoice,
    Vertex,
)
from failover.policy import NoBreakers, Unlimited
from failover.providers import AnthropicDialect, GeminiDialect
from failover.providers._google import google_envelope
from failover.transport import HttpRequest
from failover.transport._types import HttpResponse

from .test_samples_router import served, upstream

G, A = GeminiDialect(), AnthropicDialect()
K = FailureKind
REQ = Request(
    messages=(Message.system("Be brief."), Message.user("Weather in Paris?")),
    tools=(Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}}),),
    tool_choice=ToolChoice(mode="auto"),
    max_tokens=100,
)


def vertex_target(dialect: Dialect, location: str = "us-east5", base_url: str = "", **kw: Any) -> Target:
    model = "claude-sonnet-4@20250514" if dialect is Dialect.ANTHROPIC else "gemini-2.5-pro"
    return Target(
        name="v",
        dialect=dialect,
        model=model,
        base_url=base_url,
        api_key=Secret("sk-must-not-be-sent"),
        vertex=Vertex(project="my-project", location=location),
        **kw,
    )


RESOURCE = "/v1/projects/my-project/locations/{loc}/publishers/{pub}/models/{model}"


@pytest.mark.parametrize(
    ("location", "root"),
    [
        ("us-east5", "https://us-east5-aiplatform.googleapis.com"),
        ("europe-west1", "https://europe-west1-aiplatform.googleapis.com"),
        ("global", "https://aiplatform.googleapis.com"),
        ("us", "https://aiplatform.us.rep.googleapis.com"),
        ("eu", "https://aiplatform.eu.rep.googleapis.com"),
    ],
)
def test_the_location_chooses_the_endpoint(location: str, root: str) -> None:
    g, a = vertex_target(Dialect.GEMINI, location), vertex_target(Dialect.ANTHROPIC, location)
    gemini = root + RESOURCE.format(loc=location, pub="google", model="gemini-2.5-pro")
    claude = root + RESOURCE.format(loc=location, pub="anthropic", model="claude-sonnet-4@20250514")
    assert G.build(g, REQ).url == f"{gemini}:generateContent"
    assert G.build(g, REQ, stream=True).url == f"{gemini}:streamGenerateContent?alt=sse"
    assert G.build_count(g, REQ).url == f"{gemini}:countTokens"
    assert A.build(a, REQ).url == f"{claude}:rawPredict"
    assert A.build(a, REQ, stream=True).url == f"{claude}:streamRawPredict"
    count = root + RESOURCE.format(loc=location, pub="anthropic", model="count-tokens")
    assert A.build_count(a, REQ).url == f"{count}:rawPredict"


@pytest.mark.parametrize(
    ("base_url", "prefix"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/proxy/", "http://127.0.0.1:8080/proxy/v1"),
        ("https://vertex.example.com/v1", "https://vertex.example.com/v1"),  # a version given is kept
        ("https://vertex.example.com/v1beta1", "https://vertex.example.com/v1beta1"),
    ],
)
def test_a_base_url_replaces_the_host(base_url: str, prefix: str) -> None:
    t = vertex_target(Dialect.GEMINI, base_url=base_url)
    path = "/projects/my-project/locations/us-east5/publishers/google/models/gemini-2.5-pro:generateContent"
    assert G.build(t, REQ).url == prefix + path


def test_target_query_is_kept_after_alt_sse() -> None:
    t = vertex_target(Dialect.GEMINI, query=(("x", "1"),))
    assert G.build(t, REQ, stream=True).url.endswith(":streamGenerateContent?alt=sse&x=1")


def test_gemini_on_vertex_sends_the_same_body_and_no_api_key() -> None:
    studio = Target(
        name="s",
        dialect=Dialect.GEMINI,
        model="gemini-2.5-pro",
        base_url="https://generativelanguage.googleapis.com/v1beta",
        api_key=Secret("sk-must-not-be-sent"),
    )
    on_vertex = G.build(vertex_target(Dialect.GEMINI), REQ)
    assert on_vertex.json == G.build(studio, REQ).json
    assert "x-goog-api-key" not in on_vertex.headers
    assert "sk-must-not-be-sent" not in json.dumps([on_vertex.url, dict(on_vertex.headers)])
    assert "key=" not in on_vertex.url


def test_gemini_count_on_vertex_takes_the_prompt_fields_side_by_side() -> None:
    req = replace(REQ, response_format=ResponseFormat.json_schema({"type": "object"}))
    body = G.build_count(vertex_target(Dialect.GEMINI), req).json or {}
    full = G.build(vertex_target(Dialect.GEMINI), req).json or {}
    assert "generateContentRequest" not in body  # the Gemini API's shape; Vertex has no such field
    assert set(body) == {"contents", "systemInstruction", "tools", "generationConfig"}
    assert body["contents"] == full["contents"] and body["tools"] == full["tools"]
    assert "toolConfig" in full and "toolConfig" not in body  # not a CountTokensRequest field


def test_claude_on_vertex_puts_the_model_in_the_url_and_the_version_in_the_body() -> None:
    direct = Target(
        name="d",
        dialect=Dialect.ANTHROPIC,
        model="claude-sonnet-4@20250514",
        base_url="https://api.anthropic.com/v1",
        api_key=Secret("sk-must-not-be-sent"),
    )
    for stream in (False, True):
        http = A.build(vertex_target(Dialect.ANTHROPIC), REQ, stream=stream)
        body = dict(http.json or {})
        assert "model" not in body
        assert body.pop("anthropic_version") == "vertex-2023-10-16"
        expected = dict(A.build(direct, REQ, stream=stream).json or {})
        expected.pop("model")
        assert body == expected  # everything else is the Messages body, stream flag included
        assert body.get("stream") is (True if stream else None)
        assert "anthropic-version" not in http.headers and "x-api-key" not in http.headers
        assert "sk-must-not-be-sent" not in json.dumps([http.url, dict(http.headers), http.json])


def test_claude_count_on_vertex_names_the_model_in_the_body() -> None:
    http = A.build_count(vertex_target(Dialect.ANTHROPIC), REQ)
    body = http.json or {}
    assert body["model"] == "claude-sonnet-4@20250514"
    assert body["anthropic_version"] == "vertex-2023-10-16"
    assert "max_tokens" not in body and "stream" not in body
    assert body["system"] == "Be brief." and body["messages"][0]["content"] == "Weather in Paris?"


# -- errors -------------------------------------------------------------------------------------


def google_body(status: int, grpc: str, message: str, *details: dict[str, Any], wrap: bool = False) -> bytes:
    error: dict[str, Any] = {"code": status, "message": message, "status": grpc}
    if details:
        error["details"] = list(details)
    body: Any = [{"error": error}] if wrap else {"error": error}
    return json.dumps(body).encode()


def info(reason: str) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com"}


QUOTA_429 = (
    "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: "
    "anthropic-claude-3-5-sonnet-v2. Please submit a quota increase request. "
    "https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai."
)
BILLING = "This API method requires billing to be enabled. Please enable billing on project #my-project."


@pytest.mark.parametrize(
    ("status", "body", "kind", "code"),
    [
        # as Claude Code and Cline users report them: a one-element list around Google's envelope
        (429, google_body(429, "RESOURCE_EXHAUSTED", QUOTA_429, wrap=True), K.RATE_LIMITED, "RESOURCE_EXHAUSTED"),
        (429, google_body(429, "RESOURCE_EXHAUSTED", QUOTA_429), K.RATE_LIMITED, "RESOURCE_EXHAUSTED"),
        # read by the status alone, a 403 is a permission problem; Google's reason says money
        (403, google_body(403, "PERMISSION_DENIED", BILLING, info("BILLING_DISABLED")), K.QUOTA_EXHAUSTED, None),
        (403, google_body(403, "PERMISSION_DENIED", "Permission denied", info("IAM_PERMISSION_DENIED")), None, None),
        (401, google_body(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."), None, None),
        (404, google_body(404, "NOT_FOUND", "Publisher Model `x` was not found"), K.MODEL_NOT_FOUND, "NOT_FOUND"),
        (503, google_body(503, "UNAVAILABLE", "The service is currently unavailable."), K.PROVIDER_OVERLOADED, None),
        # a 400 whose status says the location: another target may serve it
        (400, google_body(400, "FAILED_PRECONDITION", "User location is not supported"), None, None),
    ],
)
def test_claude_on_vertex_reads_googles_envelope(status: int, body: bytes, kind: K | None, code: str | None) -> None:
    f = A.parse(vertex_target(Dialect.ANTHROPIC), HttpResponse(status=status, headers={}, body=body))
    assert isinstance(f, Failure)
    assert f.kind is (kind or K.AUTHENTICATION_OR_PERMISSION)
    if code is not None:
        assert f.provider_code == code
    assert f.message.startswith(f"anthropic {status}")


def test_googles_retry_delay_is_the_wait() -> None:
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
    body = google_body(429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later.", retry)
    f = A.parse(vertex_target(Dialect.ANTHROPIC), HttpResponse(status=429, headers={}, body=body))
    assert isinstance(f, Failure) and f.kind is K.RATE_LIMITED and f.retry_after == 7.0


@pytest.mark.parametrize(
    ("status", "type_", "message", "kind"),
    [
        (529, "overloaded_error", "Overloaded", K.PROVIDER_OVERLOADED),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", K.CONTEXT_OVERFLOW),
        (400, "invalid_request_error", "messages.0.content: text content blocks must be non-empty", K.INVALID_REQUEST),
        (500, "api_error", "Internal server error", K.PROVIDER_SERVER_ERROR),
    ],
)
def test_claude_on_vertex_still_reads_anthropics_envelope(status: int, type_: str, message: str, kind: K) -> None:
    body = json.dumps({"type": "error", "error": {"type": type_, "message": message}}).encode()
    f = A.parse(vertex_target(Dialect.ANTHROPIC), HttpResponse(status=status, headers={}, body=body))
    assert isinstance(f, Failure) and f.kind is kind and f.provider_code == type_


def test_which_body_is_googles_envelope() -> None:
    google = {"error": {"code": 429, "message": "m", "status": "RESOURCE_EXHAUSTED"}}
    assert google_envelope(google) is google
    assert google_envelope([google]) is google
    assert google_envelope({"error": {"code": 500, "message": "m"}}) is not None  # a code alone will do
    assert google_envelope({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}) is None
    assert google_envelope({"error": {"type": "rate_limit_error", "code": 429}}) is None
    assert google_envelope({"error": "text"}) is None
    assert google_envelope({"error": {"code": True}}) is None
    assert google_envelope([]) is None and google_envelope("x") is None


# -- captured answers, served over loopback to Vertex targets -----------------------------------


class _Token:
    def __init__(self, auth: object) -> None:
        pass

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        return replace(request, headers={**request.headers, "authorization": "Bearer ya29.t"})

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(
    ("dialect", "name", "kind"),
    [
        (Dialect.GEMINI, "gemini/05-max-tokens-no-parts-vertex.json", K.TRUNCATED),  # captured from Vertex
        (Dialect.GEMINI, "gemini/01-generate-content-stop-usage.json", None),
        (Dialect.ANTHROPIC, "anthropic/01-nonstream-text-usage.json", None),
        (Dialect.ANTHROPIC, "anthropic/09-error-529-overloaded.json", K.PROVIDER_OVERLOADED),
    ],
)
async def test_captured_answers_through_the_router_to_a_vertex_target(
    wire: Path, dialect: Dialect, name: str, kind: K | None
) -> None:
    async with upstream(served(wire / name)) as base:
        t = replace(vertex_target(dialect, base_url=base), api_key=None, max_attempts=1, tokenizer="estimate")
        async with Router(
            [Route(name="r", primary=(t,))],
            retry_budget=Unlimited(),
            breakers=NoBreakers(),
            auth=Authorizers({AuthKind.GOOGLE: _Token}),
        ) as router:
            if kind is None:
                resp = await router.complete("r", Request.simple("hi"), Envelope(max_attempts=1))
                assert resp.text
            else:
                with pytest.raises(Unavailable) as ei:
                    await router.complete("r", Request.simple("hi"), Envelope(max_attempts=1))
                failure = ei.value.record.attempts[-1].failure
                assert failure is not None and failure.kind is kind
