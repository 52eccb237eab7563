"""Microsoft Entra ID tokens for Azure OpenAI: which azure-identity credential, the bearer
header, the cache until near ``expires_on``, and azure-identity's own ClientSecretCredential
posting to a loopback Entra token endpoint (TLS: azure-identity takes only an https authority)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.identity.aio import (
    CertificateCredential,
    ClientSecretCredential,
    DefaultAzureCredential,
    ManagedIdentityCredential,
    WorkloadIdentityCredential,
)

from failover import Envelope, FailureKind, Request, Route, Router
from failover.auth import AuthError, Authorizers
from failover.auth import _azure as azure_chain
from failover.model import Auth, AuthKind, Dialect, Target
from failover.testing import FakeProvider, FakeServer, Reply
from failover.transport import HttpRequest

from ._token_server import Seen, token_server

SCOPE = "https://cognitiveservices.azure.com/.default"
HTTP = HttpRequest(
    method="POST",
    url="https://res.openai.azure.com/openai/deployments/gpt/chat/completions?api-version=2024-10-21",
    headers={"content-type": "application/json", "api-key": "a-key-that-must-go"},
)
TARGET = Target(name="t", dialect=Dialect.OPENAI, model="gpt", base_url="https://res.openai.azure.com")


class FakeCredential:
    """An azure-identity async credential, as far as the authorizer uses one: tokens that live
    ``life`` seconds on ``clock``, or the error azure-identity raises when it has none."""

    def __init__(self, clock: Callable[[], float], life: int = 3600) -> None:
        self.clock, self.life = clock, life
        self.calls: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.fail = False
        self.closed = False

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.calls.append((scopes, kwargs))
        await asyncio.sleep(0.05)
        if self.fail:
            raise ClientAuthenticationError(
                "DefaultAzureCredential failed to retrieve a token from the included credentials."
            )
        return AccessToken(f"eyJ.entra-{len(self.calls)}", int(self.clock()) + self.life)

    async def close(self) -> None:
        self.closed = True


def loop_clock() -> Callable[[], float]:
    loop = asyncio.get_running_loop()
    return lambda: 1_800_000_000.0 + loop.time()


@pytest.mark.looptime
async def test_the_token_is_a_bearer_header_kept_until_five_minutes_before_it_expires(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = loop_clock()
    cred = FakeCredential(clock)
    chain = azure_chain.AzureAuthorizer(cred, clock=clock)  # type: ignore[arg-type]
    signed = await asyncio.gather(*(chain.authorize(TARGET, HTTP) for _ in range(8)))
    assert {s.headers["authorization"] for s in signed} == {"Bearer eyJ.entra-1"}
    assert len(cred.calls) == 1 and cred.calls[0] == ((SCOPE,), {})
    assert "api-key" not in signed[0].headers  # one credential per request: the token
    assert signed[0].url == HTTP.url and signed[0].headers["content-type"] == "application/json"
    await asyncio.sleep(3299)
    assert (await chain.authorize(TARGET, HTTP)).headers["authorization"] == "Bearer eyJ.entra-1"
    await asyncio.sleep(1)
    assert (await chain.authorize(TARGET, HTTP)).headers["authorization"] == "Bearer eyJ.entra-2"
    assert "eyJ" not in repr(chain) and "eyJ" not in caplog.text
    await chain.aclose()
    assert cred.closed


@pytest.mark.looptime
async def test_a_credential_without_a_token_says_what_to_do() -> None:
    cred = FakeCredential(loop_clock())
    cred.fail = True
    chain = azure_chain.AzureAuthorizer(cred, scope="api://custom/.default", tenant_id="t1", source="default chain")  # type: ignore[arg-type]
    with pytest.raises(AuthError) as ei:
        await chain.authorize(TARGET, HTTP)
    message = str(ei.value)
    assert "azure credentials (default chain) gave no token" in message
    assert "az login" in message and "AZURE_CLIENT_SECRET" in message
    assert cred.calls == [(("api://custom/.default",), {"tenant_id": "t1"})]
    await chain.aclose()


async def test_which_credential_the_auth_names(tmp_path: Path, ca: trustme.CA) -> None:
    pem = tmp_path / "app.pem"  # an app registration's certificate, with its key
    ca.issue_cert("app-1.example.com", key_type=trustme.KeyType.RSA).private_key_and_cert_chain_pem.write_to_path(
        str(pem)
    )
    app = Auth(kind=AuthKind.AZURE, tenant_id="t", client_id="c")
    cases: list[tuple[Auth, dict[str, str], type]] = [
        (Auth(kind=AuthKind.AZURE), {}, DefaultAzureCredential),
        (Auth(kind=AuthKind.AZURE, tenant_id="t"), {}, DefaultAzureCredential),
        (Auth(kind=AuthKind.AZURE, client_id="c"), {}, ManagedIdentityCredential),
        (app, {"AZURE_CLIENT_SECRET": "s"}, ClientSecretCredential),
        (app, {"AZURE_CLIENT_CERTIFICATE_PATH": str(pem)}, CertificateCredential),
        (app, {"AZURE_FEDERATED_TOKEN_FILE": "/f"}, WorkloadIdentityCredential),
    ]
    for auth, env, kind in cases:
        credential = azure_chain.credential_for(auth, env)[0]
        assert type(credential) is kind, (auth, env)
        await credential.close()
    with pytest.raises(AuthError) as ei:
        azure_chain.credential_for(app, {})
    assert "AZURE_CLIENT_SECRET" in str(ei.value) and "auth.tenant_id" in str(ei.value)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA(key_type=trustme.KeyType.RSA)  # Entra signs an app's certificate assertion with RS256


async def test_client_secret_credential_against_a_loopback_entra_endpoint(tmp_path: Path, ca: trustme.CA) -> None:
    """azure-identity's own ClientSecretCredential posts the client-credentials grant; the
    authorizer puts the token it gets in the header, and asks again only when it is due."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    cert = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(cert))
    tenant = "00000000-0000-0000-0000-000000000001"

    def entra(seen: Seen) -> tuple[int, dict[str, Any]]:
        return 200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": "eyJ.real"}

    with token_server(entra, tls=tls) as ts:
        auth = Auth(kind=AuthKind.AZURE, tenant_id=tenant, client_id="app-1")
        credential, source = azure_chain.credential_for(
            auth, {"AZURE_CLIENT_SECRET": "s3cret"}, authority=ts.url, connection_verify=str(cert)
        )
        assert isinstance(credential, ClientSecretCredential) and source == "app app-1 (client secret)"
        chain = azure_chain.AzureAuthorizer(credential, tenant_id=tenant, source=source)
        for _ in range(3):
            signed = await chain.authorize(TARGET, HTTP)
            assert signed.headers["authorization"] == "Bearer eyJ.real"
        await chain.aclose()
    (grant,) = ts.seen  # one token, kept
    assert grant.path == f"/{tenant}/oauth2/v2.0/token"
    assert grant.form["grant_type"] == ["client_credentials"]
    assert grant.form["client_id"] == ["app-1"] and grant.form["client_secret"] == ["s3cret"]
    assert grant.form["scope"] == [SCOPE]
    assert "s3cret" not in repr(chain) and "s3cret" not in source


@pytest.mark.looptime
async def test_azure_openai_with_entra_tokens_through_the_router() -> None:
    """An Azure deployment target with ``auth: azure``: the deployments URL and api-version as
    with a key, the token as a bearer header, refreshed before the fake refuses it."""
    clock = loop_clock()
    cred = FakeCredential(clock)
    issued: dict[str, float] = {}
    original = cred.get_token

    async def get_token(*scopes: str, **kwargs: Any) -> AccessToken:
        token = await original(*scopes, **kwargs)
        issued[token.token] = float(token.expires_on)
        return token

    cred.get_token = get_token  # type: ignore[method-assign]
    p = FakeProvider("az", "openai", api_key=lambda t: issued.get(t, 0.0) > clock(), model="gpt-4o")
    b = FakeProvider("b", "anthropic", [Reply.ok("from b")])
    async with FakeServer(p, b) as srv:
        t = srv.target_for(
            p,
            base_url=srv.url_for(p),
            azure_deployment=True,
            query=(("api-version", "2024-10-21"),),
            api_key=None,
            auth=Auth(kind=AuthKind.AZURE),
            tokenizer="estimate",
        )
        route = Route(name="r", primary=(t,), fallbacks=(srv.target_for(b, tokenizer="estimate"),))
        made: list[azure_chain.AzureAuthorizer] = []

        def make(auth: Auth) -> azure_chain.AzureAuthorizer:
            made.append(azure_chain.AzureAuthorizer(cred, clock=clock))  # type: ignore[arg-type]
            return made[-1]

        router = Router([route], auth=Authorizers({AuthKind.AZURE: make}))
        for _ in range(13):  # two hours, one request every ten minutes
            resp = await router.complete("r", Request.simple("hi"), Envelope(budget=10.0))
            assert resp.record is not None and resp.record.target_used == "az"
            await asyncio.sleep(600)
        cred.fail = True
        await asyncio.sleep(3600)  # the token has expired and no new one comes: B serves
        resp = await router.complete("r", Request.simple("hi"), Envelope(budget=10.0))
        assert resp.text == "from b" and resp.record is not None
        failure = resp.record.attempts[0].failure
        assert failure is not None and failure.kind is FailureKind.AUTHENTICATION_OR_PERMISSION
        await router.aclose()
    assert len(made) == 1 and len(issued) == 3  # at 0, 3600 and 7200 s
    assert all(c.scripted and c.status == 200 for c in p.calls) and len(p.calls) == 13
    assert p.calls[0].path == "/openai/deployments/gpt-4o/chat/completions"
    assert p.calls[0].query == "api-version=2024-10-21"
    assert p.calls[0].headers["authorization"] == "***" and "api-key" not in p.calls[0].headers
