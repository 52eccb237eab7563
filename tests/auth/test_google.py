"""google-auth tokens for Vertex AI, refreshed by google-auth's own code against a loopback
OAuth token endpoint, and a router whose Vertex targets keep working across refreshes.

The service account file is real (a fresh RSA key); the token endpoint verifies the signed
JWT grant google-auth posts, and issues tokens that expire. The fake Vertex providers accept
only a token the endpoint issued and that has not expired. google-auth reads the time with
``google.auth._helpers.utcnow``: it is pointed at the loop's virtual clock, as the
authorizer's own clock is, so hours of token lifetime pass in milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import google.auth._helpers
import google.auth.compute_engine._metadata
import google.auth.jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from failover import Capability, Envelope, FailureKind, Request, Route, Router
from failover.auth import AuthError, Authorizers
from failover.auth import _google as google_chain
from failover.model import Auth, AuthKind, Completed, Dialect, Target, TextDelta, Vertex
from failover.testing import FakeProvider, FakeServer, Reply
from failover.transport import HttpRequest

from ._token_server import Seen, token_server

pytestmark = pytest.mark.looptime

EPOCH = 1_800_000_000.0  # the virtual wall clock at loop time 0
CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
AUDIENCE = "https://oauth2.googleapis.com/token"  # what google-auth signs its grant for


@pytest.fixture(scope="module")
def rsa_key() -> tuple[str, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


@pytest.fixture
async def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[], float]:
    """Unix seconds on the test loop's clock (read from any thread); google-auth's utcnow reads it too."""
    loop = asyncio.get_running_loop()
    now = lambda: EPOCH + loop.time()  # noqa: E731
    monkeypatch.setattr(google.auth._helpers, "utcnow", lambda: datetime.fromtimestamp(now(), UTC).replace(tzinfo=None))
    return now


class OAuth:
    """Google's token endpoint, as much as a service account's grant needs: it checks the JWT
    (signature, audience, issuer, scope, times) and issues ``ya29.fake-N`` for ``life`` seconds."""

    def __init__(self, public: bytes, clock: Callable[[], float], life: int = 3600) -> None:
        self.public, self.clock, self.life = public, clock, life
        self.issued: dict[str, float] = {}
        self.refuse = False
        self.lock = threading.Lock()

    def handle(self, seen: Seen) -> tuple[int, dict[str, Any]]:
        if self.refuse:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        assert seen.form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
        claims = google.auth.jwt.decode(seen.form["assertion"][0], certs=self.public, audience=AUDIENCE)
        assert claims["iss"] == "failover-test@my-project.iam.gserviceaccount.com"
        assert claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
        with self.lock:
            token = f"ya29.fake-{len(self.issued) + 1}"
            self.issued[token] = self.clock()
        return 200, {"access_token": token, "expires_in": self.life, "token_type": "Bearer"}

    def valid(self, token: str) -> bool:
        """What Vertex would say of a bearer token: one we issued, not yet expired."""
        issued = self.issued.get(token)
        return issued is not None and self.clock() < issued + self.life


def service_account(tmp_path: Path, private: str, token_uri: str) -> Path:
    path = tmp_path / "sa.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-project",
                "private_key_id": "k1",
                "private_key": private,
                "client_email": "failover-test@my-project.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return path


HTTP = HttpRequest(method="POST", url="https://x/v1/projects/p", headers={"content-type": "application/json"})


async def test_a_service_account_file_gives_a_bearer_token_refreshed_before_it_expires(
    tmp_path: Path, rsa_key: tuple[str, bytes], clock: Callable[[], float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    oauth = OAuth(rsa_key[1], clock)
    with token_server(oauth.handle) as ts:
        sa = service_account(tmp_path, rsa_key[0], f"{ts.url}/token")
        chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE, credentials_file=str(sa)), clock=clock)
        target = Target(name="t", dialect=Dialect.GEMINI, model="m", base_url="")
        first = await chain.authorize(target, HTTP)
        assert first.headers["authorization"] == "Bearer ya29.fake-1"
        assert first.headers["content-type"] == "application/json" and HTTP.headers.keys() == {"content-type"}
        await asyncio.sleep(3299)  # 5 min 1 s left: the same token
        assert (await chain.authorize(target, HTTP)).headers["authorization"] == "Bearer ya29.fake-1"
        await asyncio.sleep(1)  # 5 min left: a new one, before the old one expires
        assert (await chain.authorize(target, HTTP)).headers["authorization"] == "Bearer ya29.fake-2"
        assert len(ts.seen) == 2 and ts.seen[0].path == "/token"
        assert "ya29" not in repr(chain) and "ya29" not in caplog.text
        await chain.aclose()


async def test_concurrent_requests_share_one_refresh(
    tmp_path: Path, rsa_key: tuple[str, bytes], clock: Callable[[], float]
) -> None:
    oauth = OAuth(rsa_key[1], clock)
    with token_server(oauth.handle) as ts:
        sa = service_account(tmp_path, rsa_key[0], f"{ts.url}/token")
        chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE, credentials_file=str(sa)), clock=clock)
        target = Target(name="t", dialect=Dialect.GEMINI, model="m", base_url="")
        signed = await asyncio.gather(*(chain.authorize(target, HTTP) for _ in range(16)))
        assert {s.headers["authorization"] for s in signed} == {"Bearer ya29.fake-1"}
        assert len(ts.seen) == 1
        await chain.aclose()


async def test_application_default_credentials_are_found_through_the_environment(
    tmp_path: Path, rsa_key: tuple[str, bytes], clock: Callable[[], float], monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = OAuth(rsa_key[1], clock)
    with token_server(oauth.handle) as ts:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account(tmp_path, rsa_key[0], ts.url)))
        chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE), clock=clock)
        signed = await chain.authorize(Target(name="t", dialect=Dialect.GEMINI, model="m", base_url=""), HTTP)
        assert signed.headers["authorization"] == "Bearer ya29.fake-1"
        await chain.aclose()


async def test_no_credentials_say_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud login here
    monkeypatch.setattr(google.auth.compute_engine._metadata, "_NO_GCE_CHECK", True)  # not on a VM
    chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE))
    target = Target(name="t", dialect=Dialect.GEMINI, model="m", base_url="")
    with pytest.raises(AuthError) as ei:
        await chain.authorize(target, HTTP)
    for hint in ("GOOGLE_APPLICATION_CREDENTIALS", "gcloud auth application-default login", "auth.credentials_file"):
        assert hint in str(ei.value)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE, credentials_file=str(bad)))
    with pytest.raises(AuthError, match=r"cannot use auth\.credentials_file .*bad\.json: it is not JSON"):
        await chain.authorize(target, HTTP)
    # a configuration google-auth would act on (run a command, fetch a URL) is not read here
    bad.write_text(json.dumps({"type": "external_account", "credential_source": {"executable": {"command": "x"}}}))
    chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE, credentials_file=str(bad)))
    with pytest.raises(AuthError, match="'external_account', not service_account") as ei:
        await chain.authorize(target, HTTP)
    assert "GOOGLE_APPLICATION_CREDENTIALS" in str(ei.value)
    await chain.aclose()


async def test_a_refused_refresh_keeps_the_old_token_until_it_expires(
    tmp_path: Path, rsa_key: tuple[str, bytes], clock: Callable[[], float]
) -> None:
    oauth = OAuth(rsa_key[1], clock)
    with token_server(oauth.handle) as ts:
        sa = service_account(tmp_path, rsa_key[0], f"{ts.url}/token")
        chain = google_chain.authorizer(Auth(kind=AuthKind.GOOGLE, credentials_file=str(sa)), clock=clock)
        target = Target(name="t", dialect=Dialect.GEMINI, model="m", base_url="")
        assert (await chain.authorize(target, HTTP)).headers["authorization"] == "Bearer ya29.fake-1"
        oauth.refuse = True
        await asyncio.sleep(3400)
        assert (await chain.authorize(target, HTTP)).headers["authorization"] == "Bearer ya29.fake-1"
        await asyncio.sleep(200)  # expired now
        with pytest.raises(AuthError) as ei:
            await chain.authorize(target, HTTP)
        assert "could not be refreshed" in str(ei.value) and "invalid_grant" in str(ei.value)
        assert "ya29" not in str(ei.value)
        await chain.aclose()


async def test_vertex_targets_keep_working_across_token_refreshes(
    tmp_path: Path, rsa_key: tuple[str, bytes], clock: Callable[[], float], caplog: pytest.LogCaptureFixture
) -> None:
    """Five hours of Gemini and Claude on Vertex, three requests every ten minutes (one
    streamed): every token expires after an hour, and not one request is refused."""
    caplog.set_level(logging.DEBUG)
    oauth = OAuth(rsa_key[1], clock)
    with token_server(oauth.handle) as ts:
        sa = service_account(tmp_path, rsa_key[0], f"{ts.url}/token")
        g = FakeProvider("g", "gemini", api_key=oauth.valid)
        c = FakeProvider("c", "anthropic", api_key=oauth.valid, model="claude-haiku-4-5@20251001")
        async with FakeServer(g, c) as srv:
            auth = Auth(kind=AuthKind.GOOGLE, credentials_file=str(sa))
            where = Vertex(project="my-project", location="us-east5")
            common: dict[str, Any] = {"vertex": where, "auth": auth, "api_key": None, "capabilities": CAPS}
            tg = srv.target_for(g, tokenizer="estimate", **common)
            tc = srv.target_for(c, tokenizer="estimate", **common)
            chains: list[google_chain.GoogleAuthorizer] = []

            def make(a: Auth) -> google_chain.GoogleAuthorizer:
                chains.append(google_chain.authorizer(a, clock=clock))
                return chains[-1]

            router = Router(
                [Route(name="gemini", primary=(tg,)), Route(name="claude", primary=(tc,))],
                auth=Authorizers({AuthKind.GOOGLE: make}),
            )

            async def streamed() -> str:
                async with router.stream("claude", Request.simple("hi"), Envelope(budget=30.0)) as s:
                    events = [e async for e in s]
                assert isinstance(events[-1], Completed)
                return "".join(e.text for e in events if isinstance(e, TextDelta))

            for _ in range(31):  # t = 0, 600, ..., 18000 s
                texts = await asyncio.gather(
                    router.complete("gemini", Request.simple("hi"), Envelope(budget=30.0)),
                    router.complete("claude", Request.simple("hi"), Envelope(budget=30.0)),
                    streamed(),
                )
                assert [t if isinstance(t, str) else t.text for t in texts] == ["ok from g", "ok from c", "ok from c"]
                await asyncio.sleep(600)
            await router.aclose()
        calls = g.calls + c.calls
        assert len(calls) == 93 and all(x.scripted and x.status == 200 for x in calls)  # none refused
        assert {x.headers["authorization"] for x in calls} == {"***"}
        assert sum(x.stream for x in c.calls) == 31
        assert "publishers/anthropic/models/claude-haiku-4-5@20251001:streamRawPredict" in c.calls[-1].path
        # a token is due 55 minutes after it was issued: new ones at 0, 3600, ..., 18000 s
        assert len(chains) == 1 and len(ts.seen) == 6 == len(oauth.issued)
        assert sorted(oauth.issued.values()) == pytest.approx([EPOCH + t for t in range(0, 18001, 3600)])
        assert "ya29" not in caplog.text


async def test_a_chain_that_cannot_authorise_sends_nothing_and_the_record_says_why(
    tmp_path: Path, clock: Callable[[], float]
) -> None:
    g = FakeProvider("g", "gemini", api_key="never")
    b = FakeProvider("b", "anthropic", [Reply.ok("from b")])
    async with FakeServer(g, b) as srv:
        missing = str(tmp_path / "missing.json")
        tg = srv.target_for(
            g, vertex=Vertex(project="p", location="global"), auth=Auth(kind=AuthKind.GOOGLE, credentials_file=missing)
        )
        route = Route(name="r", primary=(tg,), fallbacks=(srv.target_for(b, tokenizer="estimate"),))
        router = Router([route], auth=Authorizers({AuthKind.GOOGLE: lambda a: google_chain.authorizer(a, clock=clock)}))
        resp = await router.complete("r", Request.simple("hi"), Envelope(budget=10.0))
        assert resp.text == "from b" and g.calls == []
        assert resp.record is not None
        failure = resp.record.attempts[0].failure
        assert failure is not None and failure.kind is FailureKind.AUTHENTICATION_OR_PERMISSION
        assert "auth.credentials_file" in failure.message and "missing.json" in failure.message
        await router.aclose()
