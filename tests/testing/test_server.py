"""FakeServer: the same fakes over real HTTP/1.1 on loopback, observed with httpx."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from failover.model import Dialect
from failover.testing import FakeProvider, FakeServer, Outcome, Reply, ReplyKind

from ._helpers import body, headers

OPENAI_BODY = body(Dialect.OPENAI)
OPENAI_HEADERS = headers(Dialect.OPENAI)


async def _wait_for(predicate: object, *, steps: int = 200) -> None:
    """Let the server observe socket events (each step one trip around the loop)."""
    for _ in range(steps):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def test_ok_over_http() -> None:
    p = FakeProvider("a", "openai", [Reply.ok("hello over http")])
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        assert srv.base_url_for(p) == f"http://127.0.0.1:{srv.port}/a/v1"
        resp = await client.post(f"{srv.base_url_for(p)}/chat/completions", json=OPENAI_BODY, headers=OPENAI_HEADERS)
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "application/json"
        assert resp.headers["x-request-id"] == "req_a_1"
        assert resp.json()["choices"][0]["message"]["content"] == "hello over http"
        await _wait_for(lambda: p.calls[0].outcome is Outcome.COMPLETED)
    (call,) = p.calls
    assert (call.path, call.status, call.kind) == ("/v1/chat/completions", 200, ReplyKind.OK)
    assert call.headers["authorization"] == "***"
    assert call.json == OPENAI_BODY
    assert call.answered_at is not None and call.answered_at >= call.time


async def test_429_headers_over_http() -> None:
    p = FakeProvider("c", "anthropic", [Reply.rate_limit(retry_after=2, retry_after_ms=1500)])
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        resp = await client.post(
            f"{srv.api_url_for(p)}/messages", json=body(Dialect.ANTHROPIC), headers=headers(Dialect.ANTHROPIC)
        )
    assert resp.status_code == 429
    assert resp.reason_phrase == "Too Many Requests"
    assert resp.headers["retry-after"] == "2"
    assert resp.headers["retry-after-ms"] == "1500"
    assert resp.headers["x-should-retry"] == "true"
    assert resp.headers["request-id"] == "req_c_1"
    assert int(resp.headers["content-length"]) == len(resp.content)
    assert resp.json()["error"]["type"] == "rate_limit_error"


async def test_529_goes_out_with_its_status() -> None:
    p = FakeProvider("c", "anthropic", ["overloaded"])
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        resp = await client.post(
            f"{srv.api_url_for(p)}/messages", json=body(Dialect.ANTHROPIC), headers=headers(Dialect.ANTHROPIC)
        )
    assert resp.status_code == 529
    assert resp.json() == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_c_1",
    }


@pytest.mark.looptime
async def test_closing_the_client_mid_hang_is_a_disconnect_at_the_close_time() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("a", "openai", ["hang"])
    async with FakeServer(p) as srv:
        client = httpx.AsyncClient(timeout=None)
        task = asyncio.create_task(
            client.post(f"{srv.base_url_for(p)}/chat/completions", json=OPENAI_BODY, headers=OPENAI_HEADERS)
        )
        await _wait_for(lambda: len(p.calls) == 1)
        assert p.calls[0].outcome is Outcome.PENDING
        await asyncio.sleep(3)
        closed_at = loop.time()
        task.cancel()  # httpx drops the connection
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.aclose()
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    (call,) = p.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.disconnected_at is not None
    assert call.disconnected_at == pytest.approx(closed_at, abs=1e-6)
    assert call.disconnected_at - call.time == pytest.approx(3, abs=1e-6)


@pytest.mark.looptime
async def test_a_client_read_timeout_on_a_hang_is_seen_at_the_timeout() -> None:
    p = FakeProvider("a", "openai", ["hang", "ok"])
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=httpx.Timeout(5.0)) as client:
        url = f"{srv.base_url_for(p)}/chat/completions"
        with pytest.raises(httpx.ReadTimeout):
            await client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
        first = p.calls[0]
        assert first.outcome is Outcome.CLIENT_DISCONNECTED
        assert first.disconnected_at is not None
        assert first.disconnected_at - first.time == pytest.approx(5.0, abs=1e-3)
        assert (await client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)).status_code == 200


@pytest.mark.looptime
async def test_an_abandoned_delay_is_a_disconnect() -> None:
    p = FakeProvider("g", "gemini", ["delay(10)"])
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=httpx.Timeout(2.0)) as client:
        url = f"{srv.api_url_for(p)}/models/gemini-2.5-flash:generateContent"
        with pytest.raises(httpx.ReadTimeout):
            await client.post(url, json=body(Dialect.GEMINI), headers=headers(Dialect.GEMINI))
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    call = p.calls[0]
    assert (call.kind, call.outcome, call.status) == (ReplyKind.DELAY, Outcome.CLIENT_DISCONNECTED, None)
    assert call.disconnected_at is not None
    assert call.disconnected_at - call.time == pytest.approx(2.0, abs=1e-3)


async def test_keep_alive_serves_successive_requests_on_one_connection() -> None:
    p = FakeProvider("a", "openai", ["ok('one')", "server_error", "ok('three')"])
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        url = f"{srv.base_url_for(p)}/chat/completions"
        statuses = [(await client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)).status_code for _ in range(3)]
        assert statuses == [200, 500, 200]
        assert srv.connections_accepted == 1
    assert p.kinds == ["ok", "server_error", "ok"]


async def test_reset_closes_the_connection_without_an_answer() -> None:
    p = FakeProvider("a", "openai", ["reset", "ok"])
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        url = f"{srv.base_url_for(p)}/chat/completions"
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)
        assert (await client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)).status_code == 200
    assert [c.outcome for c in p.calls] == [Outcome.RESET, Outcome.COMPLETED]
    assert p.calls[0].status is None


async def test_streaming_is_chunked_sse() -> None:
    p = FakeProvider("g", "gemini", ["ok('alpha beta gamma')"])
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        url = f"{srv.api_url_for(p)}/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        async with client.stream("POST", url, json=body(Dialect.GEMINI), headers=headers(Dialect.GEMINI)) as resp:
            assert resp.headers["transfer-encoding"] == "chunked"
            assert resp.headers["content-type"].startswith("text/event-stream")
            lines = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
    texts = [json.loads(line[6:])["candidates"][0]["content"]["parts"][0]["text"] for line in lines]
    assert texts == ["alpha ", "beta ", "gamma"]
    assert p.calls[0].stream is True and p.calls[0].query == "alt=sse"


async def test_bad_json_and_unknown_provider() -> None:
    p = FakeProvider("a", "openai")
    async with FakeServer(p) as srv, httpx.AsyncClient() as client:
        bad = await client.post(f"{srv.base_url_for(p)}/chat/completions", content=b"{nope", headers=OPENAI_HEADERS)
        assert bad.status_code == 400
        assert bad.json()["error"]["message"] == "We could not parse the JSON body of your request."
        missing = await client.post(f"{srv.root_url}/zz/v1/chat/completions", json=OPENAI_BODY)
        assert missing.status_code == 404
        assert "no fake provider at /zz/ (serving: /a/)" in missing.json()["error"]
    assert p.calls[0].json is None and p.position == 0


async def test_shutdown_mid_hang_is_recorded_as_aborted() -> None:
    p = FakeProvider("a", "openai", ["hang"])
    srv = await FakeServer(p).start()
    client = httpx.AsyncClient(timeout=None)
    task = asyncio.create_task(
        client.post(f"{srv.base_url_for(p)}/chat/completions", json=OPENAI_BODY, headers=OPENAI_HEADERS)
    )
    await _wait_for(lambda: len(p.calls) == 1)
    await srv.aclose()
    with pytest.raises(httpx.HTTPError):
        await task
    await client.aclose()
    assert p.calls[0].outcome is Outcome.ABORTED


def test_run_in_thread_for_sync_code() -> None:
    p = FakeProvider("a", "openai", ["ok('from a thread')", "rate_limit(retry_after=1)"])
    with FakeServer(p).run_in_thread() as srv, httpx.Client() as client:
        url = f"{srv.base_url_for(p)}/chat/completions"
        first = client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)
        second = client.post(url, json=OPENAI_BODY, headers=OPENAI_HEADERS)
    assert first.json()["choices"][0]["message"]["content"] == "from a thread"
    assert (second.status_code, second.headers["retry-after"]) == (429, "1")
    assert p.kinds == ["ok", "rate_limit"]


async def test_urls_per_sdk_convention() -> None:
    o, c, g = FakeProvider("o"), FakeProvider("c", "anthropic"), FakeProvider("g", "gemini")
    async with FakeServer(o, c, g, port=0) as srv:
        root = srv.root_url
        assert root.startswith("http://127.0.0.1:")
        assert (srv.base_url_for(o), srv.base_url_for(c), srv.base_url_for("g")) == (
            f"{root}/o/v1",
            f"{root}/c",
            f"{root}/g",
        )
        assert (srv.api_url_for(c), srv.api_url_for(g)) == (f"{root}/c/v1", f"{root}/g/v1beta")
        assert srv.target_for(g).base_url == f"{root}/g/v1beta"
        assert repr(srv) == f"FakeServer('o', 'c', 'g', {root})"
        with pytest.raises(KeyError, match="serves no provider 'x'"):
            srv.url_for("x")
