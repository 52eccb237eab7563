"""The fault kit's Vertex paths: which path is which operation, Vertex's request rules (a
bearer token, never an API key; Claude's body), and a router that asks Claude on Vertex for
an exact count near the window through the same credential chain."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from failover import Envelope, Request, Route, Router, Target
from failover.auth import Authorizers
from failover.model import Auth, AuthKind, Dialect, Vertex
from failover.policy import NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider
from failover.testing._dialects import endpoint_for
from failover.tokens import counter_for
from failover.transport import HttpRequest
from failover.transport._types import HttpResponse

pytestmark = pytest.mark.looptime

ROOT = "/v1/projects/my-project/locations/us-east5/publishers"
G, A = Dialect.GEMINI, Dialect.ANTHROPIC


@pytest.mark.parametrize(
    ("dialect", "path", "expected"),
    [
        (G, f"{ROOT}/google/models/gemini-2.5-pro:generateContent", ("generate", False, "gemini-2.5-pro")),
        (
            G,
            f"/x/v1beta1{ROOT[3:]}/google/models/gemini-2.5-pro:streamGenerateContent",
            ("generate", True, "gemini-2.5-pro"),
        ),
        (G, f"{ROOT}/google/models/gemini-2.5-pro:countTokens", ("count_tokens", False, "gemini-2.5-pro")),
        (
            A,
            f"{ROOT}/anthropic/models/claude-sonnet-4@20250514:rawPredict",
            ("generate", False, "claude-sonnet-4@20250514"),
        ),
        (
            A,
            f"{ROOT}/anthropic/models/claude-sonnet-4@20250514:streamRawPredict",
            ("generate", True, "claude-sonnet-4@20250514"),
        ),
        (A, f"{ROOT}/anthropic/models/count-tokens:rawPredict", ("count_tokens", False, None)),
        (A, f"{ROOT}/anthropic/models/count-tokens:streamRawPredict", None),
        (A, f"{ROOT}/anthropic/models/claude-sonnet-4@20250514:predict", None),
        (A, f"{ROOT}/google/models/gemini-2.5-pro:generateContent", None),  # not this fake's publisher
        (G, f"{ROOT}/anthropic/models/claude-sonnet-4@20250514:rawPredict", None),
    ],
)
def test_vertex_paths(dialect: Dialect, path: str, expected: tuple[str, bool, str | None] | None) -> None:
    endpoint = endpoint_for(dialect, path)
    if expected is None:
        assert endpoint is None or not endpoint.vertex
        return
    assert endpoint is not None and endpoint.vertex
    assert (endpoint.operation, endpoint.stream_path, endpoint.model) == expected


async def send(p: FakeProvider, path: str, headers: dict[str, str], body: dict[str, object]) -> HttpResponse:
    http = HttpRequest(method="POST", url=f"http://{p.host}{path}", headers=headers, json=body)
    return await FakeNetwork(p).send(http, connect_timeout=1.0, total_timeout=5.0)


CLAUDE = f"{ROOT}/anthropic/models/claude-haiku-4-5@20251001:rawPredict"
BODY = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "CREDENTIALS_MISSING"),
        ({"x-api-key": "tok"}, "CREDENTIALS_MISSING"),  # an API key is not a Vertex credential
        ({"authorization": "Bearer other"}, "ACCESS_TOKEN_TYPE_UNSUPPORTED"),
    ],
)
async def test_vertex_wants_its_bearer_token_and_says_so_in_googles_envelope(
    headers: dict[str, str], reason: str
) -> None:
    p = FakeProvider("c", "anthropic", api_key="tok")
    resp = await send(p, CLAUDE, headers, BODY)
    error = json.loads(resp.body)["error"]
    assert resp.status == 401 and error["status"] == "UNAUTHENTICATED"
    assert error["details"][0]["reason"] == reason
    assert p.position == 0 and p.calls[0].scripted is False
    ok = await send(p, CLAUDE, {"authorization": "Bearer tok"}, BODY)
    assert ok.status == 200 and json.loads(ok.body)["model"] == "claude-haiku-4-5@20251001"


async def test_claude_on_vertex_needs_its_version_in_the_body_not_a_header() -> None:
    p = FakeProvider("c", "anthropic")
    body = {k: v for k, v in BODY.items() if k != "anthropic_version"}
    resp = await send(p, CLAUDE, {"anthropic-version": "2023-06-01"}, body)
    assert resp.status == 400
    assert json.loads(resp.body)["error"] == {
        "type": "invalid_request_error",
        "message": "anthropic_version: Field required",
    }
    assert (await send(p, CLAUDE, {}, BODY)).status == 200  # no anthropic-version header needed


async def test_an_unknown_vertex_method_is_googles_404() -> None:
    p = FakeProvider("c", "anthropic")
    resp = await send(p, CLAUDE.replace(":rawPredict", ":predict"), {}, BODY)
    assert resp.status == 404 and json.loads(resp.body)["error"]["status"] == "NOT_FOUND"


class Token:
    def __init__(self, auth: Auth) -> None:
        pass

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        return replace(request, headers={**request.headers, "authorization": "Bearer tok"})

    async def aclose(self) -> None:
        pass


async def test_near_the_window_claude_on_vertex_counts_exactly_with_the_same_token() -> None:
    p = FakeProvider("c", "anthropic", api_key="tok", model="claude-haiku-4-5@20251001")
    request = Request.simple("word " * 8_000, max_tokens=1_000)
    base = p.target(vertex=Vertex(project="my-project", location="us-east5"), api_key=None)
    est = counter_for(base).count(request)
    t = replace(base, context_window=est, max_output_tokens=2_000)  # locally it does not fit
    router = Router(
        [Route(name="r", primary=(t,))],
        transport=FakeNetwork(p),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        auth=Authorizers({AuthKind.GOOGLE: Token}),
    )
    resp = await router.complete("r", request, Envelope(budget=10))
    assert resp.text
    assert [c.path.rpartition("/")[2] for c in p.calls] == [
        "count-tokens:rawPredict",
        "claude-haiku-4-5@20251001:rawPredict",
    ]
    count = p.calls[0]
    assert count.json is not None and count.json["model"] == "claude-haiku-4-5@20251001"
    assert count.headers["authorization"] == "***"
    await router.aclose()
