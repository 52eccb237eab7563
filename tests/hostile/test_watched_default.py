"""The embedded default (``failover serve`` with no config: an open gateway on loopback over the
built-in fake providers) under the hostile cases that reach its fake providers, watched as in
test_watched.py: /healthz within 100 ms while each runs, RSS back within 20 MiB after."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._harness import Served, serve

pytestmark = pytest.mark.e2e

SECRET = "EMBEDDED-SECRET-41c7"


@pytest.fixture(scope="module")
def gw() -> Iterator[Served]:
    with serve() as served:
        with httpx.Client(base_url=served.base, timeout=30) as c:
            for _ in range(3):  # warm the ordinary paths before the baseline
                r = c.post("/v1/chat/completions", json=_chat(response_format=_format({"type": "object"})))
                assert r.status_code == 200, r.text
        yield served


@pytest.fixture(scope="module")
def baseline(gw: Served) -> float:
    return gw.settled_rss_mib()


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "messages": [{"role": "user", "content": "hi"}], **extra}


def _format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}


def test_refs_are_never_fetched_nor_read(gw: Served, baseline: float, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "string", "const": SECRET}))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # and never answer: a tarpit
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/s.json"
    try:
        with gw.watchdog(), httpx.Client(base_url=gw.base, timeout=30) as c:
            for ref in (url, secret.as_uri()):
                r = c.post("/v1/chat/completions", json=_chat(response_format=_format({"$ref": ref})))
                assert r.status_code == 400, r.text[:300]
                assert "response_format" in r.text and SECRET not in r.text
    finally:
        stop.set()
        thread.join()
        for s in accepted:
            s.close()
        listener.close()
    assert accepted == [], "the gateway connected to a $ref's URL"
    assert gw.settled_rss_mib() - baseline <= 20


def test_a_huge_min_items_does_not_make_the_fake_allocate(gw: Served, baseline: float) -> None:
    """``minItems: 1e8``: the fake providers' example answer is bounded, whatever the schema asks."""
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "string"}, "minItems": 100_000_000}},
        "required": ["xs"],
    }
    with gw.watchdog(), httpx.Client(base_url=gw.base, timeout=30) as c:
        r = c.post("/v1/chat/completions", json=_chat(response_format=_format(schema)))
    assert r.status_code < 500 or r.status_code in (502, 503), r.text[:300]
    assert gw.settled_rss_mib() - baseline <= 20
