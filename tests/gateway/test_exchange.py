"""One gateway request is one Exchange: what the end of the request (``Gateway.finish``) reads,
filled in as the request goes, and how it ended kept on it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from failover.gateway._exchange import Exchange
from failover.gateway._gateway import Gateway
from failover.testing import Reply

from ._kit import Kit, chat_body


def _finished(monkeypatch: pytest.MonkeyPatch) -> list[Exchange]:
    ended: list[Exchange] = []
    finish = Gateway.finish

    def spy(self: Gateway, ex: Exchange, status: int, **kw: Any) -> None:
        finish(self, ex, status, **kw)
        ended.append(ex)

    monkeypatch.setattr(Gateway, "finish", spy)
    return ended


async def test_a_plain_answer_and_a_stream_end_with_what_their_exchange_knew(monkeypatch: pytest.MonkeyPatch) -> None:
    ended = _finished(monkeypatch)
    kit = Kit({"a": [Reply.ok("one"), Reply.ok("two")]})
    async with kit.client() as c:
        plain = await c.post("/v1/chat/completions", json=chat_body())
        streamed = await c.post("/v1/chat/completions", json=chat_body(stream=True))
    assert plain.status_code == streamed.status_code == 200
    first, second = ended
    assert (first.route, first.tenant and first.tenant.name, first.stream, first.status) == ("chat", "acme", False, 200)
    assert first.request_id == plain.headers["x-failover-request-id"]
    assert first.record is not None and first.record.request_id == first.request_id
    assert (second.stream, second.status, second.note) == (True, 200, "")
    assert second.request_id == streamed.headers["x-failover-request-id"]
    assert first.router is second.router is kit.router


async def test_a_refusal_before_admission_ends_with_no_request_id(monkeypatch: pytest.MonkeyPatch) -> None:
    ended = _finished(monkeypatch)
    kit = Kit()
    async with kit.client(key="not-a-key") as c:
        r = await c.post("/v1/chat/completions", json=chat_body())
    assert r.status_code == 401
    (ex,) = ended
    assert (ex.tenant, ex.route, ex.request_id, ex.envelope, ex.status, ex.code) == (
        None,
        None,
        None,
        None,
        401,
        "invalid_api_key",
    )


async def test_a_failure_keeps_its_kind_as_the_stop_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    ended = _finished(monkeypatch)
    kit = Kit({"s": Reply.rate_limit(retry_after=30)})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo"), headers={"x-failover-deadline-ms": "2000"})
    assert r.status_code == 503
    (ex,) = ended
    assert (ex.status, ex.note, ex.code) == (503, "rate_limited", "rate_limited")
    assert ex.request_id == r.headers["x-failover-request-id"]


def test_an_exchange_not_yet_admitted_says_so() -> None:
    ex = Exchange(Kit().router, time.perf_counter(), route="chat")
    with pytest.raises(RuntimeError, match="not been admitted"):
        ex.admitted()


def test_the_gateway_forwards_no_room_of_a_request() -> None:
    """Auth and body are the endpoints' to call (``_auth``, ``_body``), not the shared state's."""
    assert not {"authenticate", "authenticate_admin", "read_body", "decode_json", "read_json"} & set(dir(Gateway))
