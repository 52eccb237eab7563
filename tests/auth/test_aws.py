"""SigV4 for Bedrock: botocore's credential chain and signer, checked against botocore and the fake.

Every test isolates botocore from the machine: credentials come from the environment or a
temporary shared-credentials file, and the instance-metadata lookup is switched off.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from pathlib import Path

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials

from failover import Envelope, Request, Route, Router
from failover.auth import AuthError, Authorizers
from failover.auth._aws import AwsSigner, signing_region
from failover.model import Auth, AuthKind, Dialect, Target
from failover.providers import dialect_for
from failover.testing import FakeNetwork, FakeProvider
from failover.testing._fake_bedrock import verify_sigv4

KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
FIXED = datetime.datetime(2026, 3, 14, 12, 36, 0)
TARGET = Target(
    name="claude-us",
    dialect=Dialect.BEDROCK,
    model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    base_url="https://bedrock-runtime.us-west-2.amazonaws.com",
)
DIALECT = dialect_for(Dialect.BEDROCK)


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def env_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


@pytest.fixture
def fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *a, **k: FIXED)


@pytest.mark.usefixtures("env_credentials", "fixed_time")
async def test_our_signature_is_botocores_own_signing_of_the_same_request() -> None:
    http = DIALECT.build(TARGET, Request.simple("What is the weather in Paris?", max_tokens=64), stream=True)
    signed = await AwsSigner(Auth(kind=AuthKind.AWS)).authorize(TARGET, http)

    reference = AWSRequest(method="POST", url=http.url, data=http.content, headers=dict(http.headers))
    SigV4Auth(Credentials(KEY_ID, SECRET), "bedrock", "us-west-2").add_auth(reference)
    assert signed.headers["authorization"] == reference.headers["Authorization"]
    assert signed.headers["x-amz-date"] == reference.headers["X-Amz-Date"] == "20260314T123600Z"
    assert signed.headers["authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20260314/us-west-2/bedrock/aws4_request, "
        "SignedHeaders=accept;content-type;host;x-amz-date, Signature="
    )
    # nothing else changed: the transport sends exactly what was signed
    assert signed.content == http.content and signed.url == http.url
    assert {k: v for k, v in signed.headers.items() if k not in ("authorization", "x-amz-date")} == http.headers
    # the fake's check (botocore's signer again, from the received request) accepts it, and only it
    assert verify_sigv4("POST", signed.url, signed.content or b"", signed.headers, KEY_ID, SECRET)
    assert not verify_sigv4("POST", signed.url, (signed.content or b"") + b" ", signed.headers, KEY_ID, SECRET)
    assert not verify_sigv4("POST", signed.url, signed.content or b"", signed.headers, KEY_ID, SECRET[:-1] + "X")


@pytest.mark.usefixtures("env_credentials")
async def test_the_fake_accepts_a_signed_request_and_refuses_a_tampered_one() -> None:
    p = FakeProvider("p", "bedrock", ["ok('signed')", "ok"], api_key=KEY_ID, secret_key=SECRET)
    target = p.target()
    signer = AwsSigner(Auth(kind=AuthKind.AWS))
    net = FakeNetwork(p)
    http = await signer.authorize(target, DIALECT.build(target, Request.simple("hi")))
    assert signing_region(target) == "us-east-1"  # the fake's host says none: the target's region
    ok = DIALECT.parse(target, await net.send(http, connect_timeout=1, total_timeout=5))
    assert getattr(ok, "text", None) == "signed"
    tampered = await net.send(
        http.__class__(method="POST", url=http.url, headers=http.headers, json=http.json, content=b'{"messages":[]}'),
        connect_timeout=1,
        total_timeout=5,
    )
    assert tampered.status == 403 and tampered.headers["x-amzn-errortype"].startswith("InvalidSignatureException")
    unsigned = await net.send(DIALECT.build(target, Request.simple("hi")), connect_timeout=1, total_timeout=5)
    assert unsigned.headers["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")
    assert [c.scripted for c in p.calls] == [True, False, False]


async def test_temporary_credentials_send_and_sign_their_session_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIATEMP")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token-123")
    signed = await AwsSigner(Auth(kind=AuthKind.AWS)).authorize(TARGET, DIALECT.build(TARGET, Request.simple("hi")))
    assert signed.headers["x-amz-security-token"] == "token-123"
    assert "x-amz-security-token" in signed.headers["authorization"].split("SignedHeaders=")[1].split(",")[0]
    assert verify_sigv4("POST", signed.url, signed.content or b"", signed.headers, "ASIATEMP", SECRET)


async def test_a_named_profile_of_the_shared_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text(
        f"[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = {SECRET}\n"
        f"[prod]\naws_access_key_id = AKIAPROD\naws_secret_access_key = {SECRET}\n"
    )
    (tmp_path / "config").write_text("[profile prod]\nregion = eu-central-1\n")
    local = Target(name="t", dialect=Dialect.BEDROCK, model="m", base_url="http://127.0.0.1:9")
    signed = await AwsSigner(Auth(kind=AuthKind.AWS, profile="prod")).authorize(
        local, DIALECT.build(local, Request.simple("x"))
    )
    # the profile's key, and its region (the endpoint and the target name none)
    assert "Credential=AKIAPROD/" in signed.headers["authorization"]
    assert "/eu-central-1/bedrock/aws4_request" in signed.headers["authorization"]
    default = await AwsSigner(Auth(kind=AuthKind.AWS)).authorize(TARGET, DIALECT.build(TARGET, Request.simple("x")))
    assert "Credential=AKIADEFAULT/" in default.headers["authorization"]


async def test_no_credentials_says_what_to_set_and_nothing_secret() -> None:
    signer = AwsSigner(Auth(kind=AuthKind.AWS))
    with pytest.raises(AuthError) as info:
        await signer.authorize(TARGET, DIALECT.build(TARGET, Request.simple("x")))
    text = str(info.value)
    for hint in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "auth.profile", "claude-us"):
        assert hint in text


async def test_an_unknown_profile_is_named(env_credentials: None) -> None:
    del env_credentials
    with pytest.raises(AuthError, match=r"'missing'.*auth\.profile"):
        await AwsSigner(Auth(kind=AuthKind.AWS, profile="missing")).authorize(
            TARGET, DIALECT.build(TARGET, Request.simple("x"))
        )


@pytest.mark.usefixtures("env_credentials")
async def test_no_region_to_sign_for() -> None:
    local = Target(name="local", dialect=Dialect.BEDROCK, model="m", base_url="http://127.0.0.1:9")
    with pytest.raises(AuthError, match=r"no AWS region.*AWS_REGION"):
        await AwsSigner(Auth(kind=AuthKind.AWS)).authorize(local, DIALECT.build(local, Request.simple("x")))


def test_the_region_of_each_kind_of_endpoint() -> None:
    def region(url: str, target_region: str | None = None, configured: str | None = None) -> str | None:
        t = Target(name="t", dialect=Dialect.BEDROCK, model="m", base_url=url, region=target_region)
        return signing_region(t, configured)

    assert region("https://bedrock-runtime.ap-northeast-1.amazonaws.com") == "ap-northeast-1"
    assert region("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "x") == "us-gov-west-1"
    assert region("https://vpce-0a1b.bedrock-runtime.eu-west-3.vpce.amazonaws.com") == "eu-west-3"
    assert region("https://bedrock-runtime.cn-north-1.amazonaws.com.cn") == "cn-north-1"
    assert region("http://127.0.0.1:8080", "us-east-2", "eu-west-1") == "us-east-2"
    assert region("http://127.0.0.1:8080", None, "eu-west-1") == "eu-west-1"


@pytest.mark.usefixtures("env_credentials")
def test_no_secret_in_a_repr() -> None:
    signer = AwsSigner(Auth(kind=AuthKind.AWS, profile="p"))
    assert SECRET not in repr(signer) and KEY_ID not in repr(signer)


async def test_refreshable_credentials_refresh_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    refreshed_in: list[int] = []
    expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=60)  # inside the refresh window

    def refresh() -> dict[str, str]:
        refreshed_in.append(threading.get_ident())
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        return {"access_key": "ASIANEW", "secret_key": SECRET, "token": "t2", "expiry_time": later.isoformat()}

    signer = AwsSigner(Auth(kind=AuthKind.AWS))
    signer._credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": "ASIAOLD", "secret_key": SECRET, "token": "t1", "expiry_time": expiry.isoformat()},
        refresh_using=refresh,
        method="test",
    )
    first, second = await asyncio.gather(
        *(signer.authorize(TARGET, DIALECT.build(TARGET, Request.simple(q))) for q in ("a", "b"))
    )
    assert "Credential=ASIANEW/" in first.headers["authorization"] and first.headers["x-amz-security-token"] == "t2"
    assert "Credential=ASIANEW/" in second.headers["authorization"]
    assert refreshed_in and loop_thread not in refreshed_in  # botocore's blocking refresh ran in a thread
    assert len(refreshed_in) == 1  # one refresh for both requests


@pytest.mark.looptime
async def test_a_bedrock_target_without_credentials_fails_over() -> None:
    a = FakeProvider("a", "bedrock", ["ok('never')"])
    b = FakeProvider("b", "anthropic", ["ok('from b')"])
    router = Router([Route(name="r", primary=(a.target(),), fallbacks=(b.target(),))], transport=FakeNetwork(a, b))
    assert isinstance(router.auth, Authorizers)
    response = await router.complete("r", Request.simple("hi"), Envelope(budget=10))
    assert response.text == "from b" and a.calls == []
    assert response.record is not None
    assert response.record.attempts[0].outcome == "authentication_or_permission"
    await router.aclose()
