"""An open circuit is answered as temporary: 503 with Retry-After, whatever kind opened it.

The kind that opened the breaker may map to a final status elsewhere (rejected credentials
are a 502 at the gateway, a 401 in the in-process httpx client): turned away by the open
circuit, the request is retryable, so the caller gets 503 and when to come back.
"""

from __future__ import annotations

import httpx
import pytest

from failover import Envelope, FailureKind, Request, Route, Router, Unavailable
from failover.gateway import EnvelopeDefaults, GatewaySettings, create_app
from failover.inbound._failures import CHAT, Scrubber, status_for, unavailable
from failover.integrations._httpx import status_for as client_status_for
from failover.policy import Backoff, BreakerBoard, BreakerConfig, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

pytestmark = pytest.mark.looptime


async def turned_away_by(reply: Reply) -> Unavailable:
    a = FakeProvider("a", "openai", Script.always(reply))
    board = BreakerBoard(BreakerConfig(window_size=4, min_calls=4, open_duration=30.0))
    r = Router(
        [Route(name="r", primary=(a.target(),))],
        transport=FakeNetwork(a),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=board,
    )
    for _ in range(4):
        with pytest.raises(Unavailable):
            await r.complete("r", Request.simple("x"), Envelope(budget=10))
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
    return ei.value


@pytest.mark.parametrize(
    "reply", [Reply.unauthorized(), Reply.not_found(), Reply.server_error()], ids=["401", "404", "500"]
)
async def test_a_request_turned_away_by_an_open_circuit_is_503_with_retry_after(reply: Reply) -> None:
    exc = await turned_away_by(reply)
    assert exc.retryable and exc.retry_after_ms == 30_000
    err = unavailable(exc, CHAT, Scrubber([]))
    assert status_for(exc, CHAT) == err.status == 503
    assert err.headers["retry-after"] == "30" and err.headers["x-should-retry"] == "false"
    assert err.headers["x-failover-retryable"] == "true"
    assert err.code == exc.reason.value
    assert client_status_for(exc, "openai") == 503
    assert client_status_for(exc, "anthropic") == 503


async def test_the_same_kind_from_an_attempt_stays_final() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.unauthorized()))
    r = Router([Route(name="r", primary=(a.target(),))], transport=FakeNetwork(a), retry_budget=Unlimited())
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
    exc = ei.value
    assert exc.reason is FailureKind.AUTHENTICATION_OR_PERMISSION and not exc.retryable
    assert status_for(exc, CHAT) == 502 and client_status_for(exc, "openai") == 401


async def test_the_gateway_answers_503_with_retry_after_on_both_endpoints() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    board = BreakerBoard(BreakerConfig(window_size=4, min_calls=4, open_duration=30.0))
    router = Router(
        [Route(name="chat", primary=(a.target(max_attempts=1),))],
        transport=FakeNetwork(a),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=board,
    )
    app = create_app(router, GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=5_000)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        chat = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(4):  # 500s from the provider: answered as what they are, and they trip the breaker
            r = await c.post("/v1/chat/completions", json=chat)
            assert r.status_code == 503 and r.headers["x-failover-attempts"] == "1", r.text
        assert len(a.calls) == 4
        r = await c.post("/v1/chat/completions", json=chat)
        assert r.status_code == 503 and r.headers["x-failover-attempts"] == "0", r.text
        assert r.json()["error"]["code"] == "provider_server_error" and "circuit open" in r.json()["error"]["message"]
        assert 29 <= int(r.headers["retry-after"]) <= 30 and r.headers["x-should-retry"] == "false"
        msg = {"model": "chat", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        r = await c.post("/v1/messages", json=msg, headers={"anthropic-version": "2023-06-01"})
        assert r.status_code == 503, r.text
        assert r.json()["type"] == "error" and 29 <= int(r.headers["retry-after"]) <= 30
        assert len(a.calls) == 4
