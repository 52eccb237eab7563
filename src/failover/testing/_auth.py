"""Cloud credentials for the fault kit: Bedrock, Vertex AI and Entra targets with no cloud account.

A Router whose targets point at fake Bedrock or Vertex providers still asks a credential chain
to authorise each request. :func:`fake_authorizers` gives it chains that need no account and
touch no network: AWS requests are signed with fixed test credentials (with botocore's own
SigV4 signer when botocore is installed, so a ``FakeProvider(api_key=FAKE_AWS_KEY_ID,
secret_key=FAKE_AWS_SECRET)`` verifies every signature; without botocore the header only names
the key id), and Google and Azure requests carry a fixed bearer token::

    router = Router(routes, transport=FakeNetwork(anthropic, bedrock, vertex), auth=fake_authorizers())
"""

from __future__ import annotations

import datetime
from dataclasses import replace

from ..auth import Authorizer, Authorizers
from ..model import Auth, AuthKind, Target
from ..transport import HttpRequest

__all__ = ["FAKE_AWS_KEY_ID", "FAKE_AWS_SECRET", "FAKE_TOKEN", "fake_authorizers"]

FAKE_AWS_KEY_ID = "AKIAFAILOVERFAKE0000"
FAKE_AWS_SECRET = "failover-fake-secret-access-key"  # a published test value, not a secret
FAKE_TOKEN = "ya29.failover-fake-token"  # a published test value, not a secret


class _FixedToken:
    """Google / Azure: the same bearer token on every request (an API key header is dropped)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "_FixedToken(...)"

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("api-key", "x-goog-api-key")}
        headers["authorization"] = f"Bearer {self._token}"
        return replace(request, headers=headers)

    async def aclose(self) -> None:
        return None


class _FixedAws:
    """AWS: SigV4 with fixed test credentials (botocore's signer when it is installed)."""

    def __init__(self, key_id: str, secret: str) -> None:
        self._key_id = key_id
        self._secret = secret

    def __repr__(self) -> str:
        return f"_FixedAws(key_id={self._key_id!r})"

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        region = target.region or "us-east-1"
        body = request.body_bytes()
        try:
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.credentials import ReadOnlyCredentials
        except ImportError:  # the placeholder a fake Bedrock provider without secret_key accepts
            now = datetime.datetime.now(datetime.UTC)
            day = now.strftime("%Y%m%d")
            headers = dict(request.headers)
            headers["x-amz-date"] = now.strftime("%Y%m%dT%H%M%SZ")
            headers["authorization"] = (
                f"AWS4-HMAC-SHA256 Credential={self._key_id}/{day}/{region}/bedrock/aws4_request, "
                "SignedHeaders=host, Signature=unsigned"
            )
            return replace(request, headers=headers, content=body)
        aws = AWSRequest(method=request.method, url=request.url, data=body, headers=dict(request.headers))
        SigV4Auth(ReadOnlyCredentials(self._key_id, self._secret, None), "bedrock", region).add_auth(aws)
        return replace(request, headers={k.lower(): v for k, v in aws.headers.items()}, content=body)

    async def aclose(self) -> None:
        return None


def fake_authorizers(
    *, aws_key_id: str = FAKE_AWS_KEY_ID, aws_secret: str = FAKE_AWS_SECRET, token: str = FAKE_TOKEN
) -> Authorizers:
    """Credential chains for fake cloud targets: fixed AWS credentials, a fixed bearer token."""

    def aws(auth: Auth) -> Authorizer:
        return _FixedAws(aws_key_id, aws_secret)

    def bearer(auth: Auth) -> Authorizer:
        return _FixedToken(token)

    return Authorizers({AuthKind.AWS: aws, AuthKind.GOOGLE: bearer, AuthKind.AZURE: bearer})
