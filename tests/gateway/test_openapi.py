"""The published OpenAPI schema, and a schemathesis fuzz of the app: no 5xx caused by the gateway."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from failover.gateway import GatewaySettings, create_app, embedded_router

# Failure kinds that are the upstream's (or the caller's deadline), not a gateway bug. With
# the embedded fake providers, a 5xx can only come from a deadline the fuzzer chose too short.
_UPSTREAM_CODES = {"deadline_exhausted", "timeout", "provider_overloaded", "provider_server_error", "rate_limited"}


def _app() -> Starlette:
    router, _ = embedded_router(latency=0.0, chunk_interval=0.0)
    return create_app(router, GatewaySettings())


APP = _app()
ROUTES = sorted(embedded_router(latency=0.0, chunk_interval=0.0)[0].routes)  # chat, flaky, claude, embed
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
# FAILOVER_FUZZ_EXAMPLES=2000 for a longer run; the suite's budget is fixed and derandomized.
EXAMPLES = int(os.environ.get("FAILOVER_FUZZ_EXAMPLES", "25"))


@schema.hook
def flatmap_body(context: Any, body: Any) -> Any:
    """Most bodies name a real route, so the fuzz reaches the parsers, the router and the fake
    upstreams instead of stopping at a 404 for an unknown ``model``."""
    if not isinstance(body, dict) or "model" not in body:
        return st.just(body)
    return st.sampled_from([*ROUTES, body["model"]]).map(lambda model: {**body, "model": model})


async def test_openapi_json_describes_the_endpoints() -> None:
    import httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app()), base_url="http://gateway") as c:
        r = await c.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) >= {"/v1/chat/completions", "/v1/models", "/readyz", "/metrics", "/healthz"}
    body = doc["components"]["schemas"]["ChatCompletionRequest"]
    assert {"model", "messages"} <= set(body["required"])
    params = {p["name"] for p in doc["paths"]["/v1/chat/completions"]["post"]["parameters"]}
    assert "x-failover-deadline-ms" in params
    messages = doc["components"]["schemas"]["MessagesRequest"]
    assert {"model", "max_tokens", "messages"} <= set(messages["required"])
    assert "/v1/messages" in doc["paths"]
    embeddings = doc["components"]["schemas"]["EmbeddingsRequest"]
    assert {"model", "input"} <= set(embeddings["required"])
    assert set(embeddings["properties"]["encoding_format"]["enum"]) == {"float", "base64"}
    assert "/v1/embeddings" in doc["paths"]
    responses = doc["components"]["schemas"]["ResponsesRequest"]
    assert {"model", "input"} <= set(responses["required"])
    assert {"/v1/responses", "/v1/responses/{id}"} <= set(doc["paths"])


def _check(response: Any) -> None:
    status = response.status_code
    if status < 500:
        return
    assert status != 500, f"the gateway failed: {response.text[:500]}"
    try:
        error = json.loads(response.text)["error"]
        # OpenAI's body carries the code in error.code; Anthropic's (/v1/messages) in error.details.error_code
        code = error["details"]["error_code"] if "details" in error else error["code"]
    except (ValueError, KeyError, TypeError):
        pytest.fail(f"a {status} without an OpenAI or Anthropic error body: {response.text[:300]}")
    assert code in _UPSTREAM_CODES, f"{status} {code}: {response.text[:300]}"


REACHED: set[str] = set()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_fuzz_no_gateway_5xx(case: Any) -> None:
    response = case.call()
    _check(response)
    if response.status_code == 200 and isinstance(case.body, dict) and case.body.get("model") in ROUTES:
        REACHED.add(case.path)


def test_the_fuzz_reached_the_router() -> None:
    """Runs after the fuzz (file order): a real route answered on every endpoint that calls one."""
    assert {"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/embeddings"} <= REACHED, REACHED
