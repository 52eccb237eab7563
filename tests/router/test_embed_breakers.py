"""Embeddings never open the breaker a route's chat requests use because of what was asked.

A route of chat models is refused before any call; a model that answers an embeddings call in
a way that shows it does not embed (404 ``model_not_found``, a 2xx that is no embeddings
answer) is marked ``not_target="cannot_embed"`` and counts against no breaker. A provider that
fails an embeddings call as a provider (a 500) still counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from failover import Capability, FailureKind, Route, Router, Target, Unavailable
from failover.model import Dialect
from failover.policy import BreakerBoard, BreakerConfig, Unlimited
from failover.router._embed import cannot_embed, route_cannot_embed
from failover.transport import HttpRequest, HttpResponse

CHAT_BODY = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "house-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()
NOT_FOUND = json.dumps(
    {"error": {"message": "The model does not exist", "type": "invalid_request_error", "code": "model_not_found"}}
).encode()
SERVER_ERROR = json.dumps({"error": {"message": "boom", "type": "server_error", "code": None}}).encode()


class Answering:
    """A transport that answers every embeddings call with one fixed response, and counts them."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body
        self.calls: list[str] = []

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        self.calls.append(request.url)
        return HttpResponse(status=self.status, headers={"content-type": "application/json"}, body=self.body)

    async def aclose(self) -> None:
        return None


def _target(model: str = "house-model", **kw: object) -> Target:
    return Target(name="t", dialect=Dialect.OPENAI, model=model, base_url="http://house.test/v1", **kw)  # type: ignore[arg-type]


def _router(transport: Answering, target: Target | None = None) -> Router:
    return Router(
        [Route(name="r", primary=(target or _target(),))],
        transport=transport,  # type: ignore[arg-type]
        retry_budget=Unlimited(),
        breakers=BreakerBoard(BreakerConfig(min_calls=2, failure_rate=0.5)),
    )


def _target_breaker(router: Router) -> tuple[int, int, str]:
    (snap,) = [b for b in router.breakers.snapshots(0.0) if b.layer == "target"]
    return snap.calls, snap.failures, snap.state.value


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [(404, NOT_FOUND, FailureKind.MODEL_NOT_FOUND), (200, CHAT_BODY, FailureKind.PROVIDER_SERVER_ERROR)],
    ids=["404-model-not-found", "2xx-chat-body"],
)
async def test_an_answer_that_shows_the_model_does_not_embed_opens_no_breaker(
    status: int, body: bytes, kind: FailureKind
) -> None:
    up = Answering(status, body)
    router = _router(up)
    for _ in range(6):
        with pytest.raises(Unavailable) as info:
            await router.embed("r", ["a text"])
        (attempt,) = info.value.record.attempts[-1:]
        assert attempt.failure is not None and attempt.failure.kind is kind
        assert attempt.failure.not_target == "cannot_embed"
    assert up.calls
    assert _target_breaker(router)[1:] == (0, "closed")
    assert router.health.of(router.routes["r"].primary[0]).success == 1.0
    await router.aclose()


async def test_a_provider_failing_an_embeddings_call_as_a_provider_still_counts() -> None:
    router = _router(Answering(500, SERVER_ERROR))
    for _ in range(3):
        with pytest.raises(Unavailable):
            await router.embed("r", ["a text"])
    assert _target_breaker(router)[2] == "open"
    await router.aclose()


async def test_a_route_of_chat_models_is_refused_before_any_call() -> None:
    up = Answering(200, CHAT_BODY)
    router = _router(up, _target("gpt-4o-mini"))
    with pytest.raises(Unavailable) as info:
        await router.embed("r", ["a text"])
    assert "embeddings_unsupported" in info.value.record.excluded[0].reason
    assert up.calls == []
    assert router.breakers.snapshots(0.0) == [] or _target_breaker(router) == (0, 0, "closed")
    await router.aclose()


C = Capability
RULES: list[tuple[str, Callable[[], Target], bool]] = [
    ("an embedding model", lambda: _target("text-embedding-3-small"), True),
    ("an embedding name wins over a chat family", lambda: _target("gemini-embedding-001"), True),
    ("a name that says nothing", lambda: _target("house-model"), True),
    ("gpt", lambda: _target("gpt-4o-mini"), False),
    ("o-series", lambda: _target("o3-mini"), False),
    ("claude behind an OpenAI-compatible server", lambda: _target("claude-sonnet-4-5"), False),
    ("gemini chat", lambda: _target("models/gemini-2.5-flash"), False),
    ("declares tools", lambda: _target("house-model", capabilities=frozenset({C.CHAT, C.TOOLS})), False),
    ("anthropic", lambda: Target(name="a", dialect=Dialect.ANTHROPIC, model="x-embed", base_url="http://a"), False),
]


@pytest.mark.parametrize(("what", "make", "embeds"), RULES, ids=[r[0] for r in RULES])
def test_which_targets_can_embed(what: str, make: Callable[[], Target], embeds: bool) -> None:
    target = make()
    assert (cannot_embed(target) is None) is embeds, what
    assert (route_cannot_embed(Route(name="r", primary=(target,))) is None) is embeds
