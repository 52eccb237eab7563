"""``POST /v1/embeddings``: the official openai SDK at its defaults (base64 vectors), floats,
tenancy, refusals, and failover only to the same model, with the x-failover-* headers."""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette

from failover import Route, Secret, Timeouts
from failover.gateway import EnvelopeDefaults, GatewaySettings, Tenant, create_app, hash_key
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.testing._fake_embeddings import fake_vector
from tests._sdk import quiet_router

from ._kit import ServerThread

KEY = "gw-embed-key-0001"
LIMITED = "gw-embed-key-0002"  # a tenant that may not use the embeddings route
ADMIN = "gw-embed-admin-0003"
UPSTREAM = "sk-embed-upstream-SECRET-9a8b"
SMALL = "text-embedding-3-small"
TEXTS = ["what is failover?", "a second text"]


class EmbedKit:
    def __init__(self) -> None:
        names = {"us": SMALL, "eu": SMALL, "big": "text-embedding-3-large"}
        self.p = {n: FakeProvider(n, "openai", model=m, api_key=UPSTREAM) for n, m in names.items()}
        t = {
            n: p.target(api_key=Secret(UPSTREAM), timeouts=Timeouts(connect=2, total=5), tokenizer="estimate")
            for n, p in self.p.items()
        }
        t["eu"] = self.p["eu"].target(
            api_key=Secret(UPSTREAM), equivalence_key=f"openai:{SMALL}", region="eu", tokenizer="estimate"
        )
        routes = [
            Route(name="search", primary=(t["us"], t["eu"]), fallbacks=(t["big"],)),
            Route(name="other", primary=(t["big"],)),
        ]
        self.router = quiet_router(routes, FakeNetwork(*self.p.values()))
        settings = GatewaySettings(
            tenants=(
                Tenant(name="acme", key_hashes=(hash_key(KEY),), routes=frozenset({"search", "other"})),
                Tenant(name="small", key_hashes=(hash_key(LIMITED),), routes=frozenset({"other"})),
            ),
            envelope=EnvelopeDefaults(deadline_ms=5_000),
            admin_key_hashes=(hash_key(ADMIN),),
        )
        self.app: Starlette = create_app(self.router, settings)

    def reset(self) -> EmbedKit:
        for p in self.p.values():
            p.load("ok")
            p.clear()
        return self

    def client(self, key: str = KEY) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url="http://gateway",
            headers={"authorization": f"Bearer {key}"},
        )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[EmbedKit, ServerThread]]:
    kit = EmbedKit()
    with ServerThread(kit.app) as server:
        yield kit, server


@pytest.fixture
def kit(served: tuple[EmbedKit, ServerThread]) -> EmbedKit:
    return served[0].reset()


@pytest.mark.e2e
async def test_the_openai_sdk_at_its_defaults_gets_the_vectors(kit: EmbedKit, served: tuple[Any, ServerThread]) -> None:
    # default settings: encoding_format base64 (decoded by the SDK), its own retries and timeout
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key=KEY) as client:
        resp = await client.embeddings.with_raw_response.create(model="search", input=TEXTS)
        out = resp.parse()
        assert resp.headers["x-failover-target"] == "us"
        assert resp.headers["x-failover-route"] == "search"
        assert [e.index for e in out.data] == [0, 1]
        for e, text in zip(out.data, TEXTS, strict=True):
            assert e.embedding == pytest.approx(fake_vector(text, 1536), abs=1e-6)  # float32 on the wire
        assert out.model == kit.p["us"].model != "search"  # the model that answered; the route is in the header
        assert out.usage.prompt_tokens == sum(-(-len(t) // 4) for t in TEXTS)
        # one text and a smaller size
        one = await client.embeddings.create(model="search", input="just one", dimensions=64)
        assert one.data[0].embedding == pytest.approx(fake_vector("just one", 64), abs=1e-6)
    (call, call2) = kit.p["us"].calls
    assert call.json is not None and call.json["encoding_format"] == "float"  # what failover asks upstream
    assert call2.json is not None and call2.json["dimensions"] == 64
    assert call.headers["authorization"] == "***"  # our upstream key went upstream (the kit checked it)


@pytest.mark.e2e
async def test_failover_to_the_same_model_shows_in_the_headers(kit: EmbedKit, served: tuple[Any, ServerThread]) -> None:
    kit.p["us"].load(Script.always(Reply.overloaded()))
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key=KEY) as client:
        resp = await client.embeddings.with_raw_response.create(model="search", input=TEXTS, encoding_format="float")
    out = resp.parse()
    assert resp.headers["x-failover-target"] == "eu"
    assert resp.headers["x-failover-recovered"] == "true"
    assert resp.headers["x-failover-attempts"] == "3"  # us twice, then eu
    assert out.data[1].embedding == fake_vector(TEXTS[1], 1536)  # floats, exactly
    assert kit.p["big"].calls == []


async def test_floats_and_base64_say_the_same(kit: EmbedKit) -> None:
    async with kit.client() as c:
        floats = (await c.post("/v1/embeddings", json={"model": "search", "input": TEXTS[0], "dimensions": 8})).json()
        b64 = (
            await c.post(
                "/v1/embeddings",
                json={"model": "search", "input": TEXTS[0], "dimensions": 8, "encoding_format": "base64"},
            )
        ).json()
    assert floats["object"] == "list" and floats["data"][0]["object"] == "embedding"
    assert floats["data"][0]["embedding"] == fake_vector(TEXTS[0], 8)
    raw = base64.b64decode(b64["data"][0]["embedding"])
    assert list(struct.unpack("<8f", raw)) == pytest.approx(fake_vector(TEXTS[0], 8), abs=1e-6)
    assert floats["usage"] == b64["usage"] == {"prompt_tokens": 5, "total_tokens": 5}


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"model": "search", "input": [[1, 2, 3]]}, 400, "input", "unsupported_input"),
        ({"model": "search", "input": [101, 102]}, 400, "input", "unsupported_input"),
        ({"model": "search", "input": []}, 400, "input", None),
        ({"model": "search", "input": ["ok", ""]}, 400, "input[1]", None),
        ({"model": "search", "input": "x", "dimensions": 0}, 400, "dimensions", None),
        ({"model": "search", "input": "x", "encoding_format": "int8"}, 400, "encoding_format", None),
        ({"model": "search", "input": "x", "input_type": "passage"}, 400, "input_type", None),
        ({"model": "search"}, 400, "input", None),
        ({"model": "nope", "input": "x"}, 404, "model", "model_not_found"),
    ],
)
async def test_refusals_name_the_field(
    kit: EmbedKit, body: dict[str, Any], status: int, param: str, code: str | None
) -> None:
    async with kit.client() as c:
        r = await c.post("/v1/embeddings", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code
    if code == "unsupported_input":
        assert "send the text" in err["message"]
    assert all(p.calls == [] for p in kit.p.values())


async def test_tenancy_applies(kit: EmbedKit) -> None:
    async with kit.client(LIMITED) as c:
        r = await c.post("/v1/embeddings", json={"model": "search", "input": "x"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "route_not_allowed"
    async with kit.client("wrong") as c:
        r = await c.post("/v1/embeddings", json={"model": "search", "input": "x"})
    assert r.status_code == 401


async def test_an_outage_of_the_model_is_a_503_and_never_another_models_vectors(kit: EmbedKit) -> None:
    for name in ("us", "eu"):
        kit.p[name].load(Script.always(Reply.overloaded()))
    async with kit.client() as c:
        r = await c.post("/v1/embeddings", json={"model": "search", "input": TEXTS})
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "provider_overloaded"
    assert r.headers["x-should-retry"] == "false"
    assert r.headers["x-failover-target"] == ""
    assert kit.p["big"].calls == []
    assert UPSTREAM not in r.text
    async with kit.client(ADMIN) as c:
        metrics = (await c.get("/metrics")).text
    assert any('route="search"' in line and 'outcome="provider_overloaded"' in line for line in metrics.splitlines())
