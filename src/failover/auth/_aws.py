"""AWS SigV4 for Bedrock: botocore's credential chain and botocore's signer.

The credentials come from botocore's own chain, as boto3 finds them: the environment
(``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``), the shared
files for the profile (``auth.profile``, else ``AWS_PROFILE``, else ``default``; SSO, assume
role and credential processes included), container credentials, and the instance role. They
are resolved once per chain, off the event loop (a profile may run a process, the instance
role is an HTTP call); temporary ones (``RefreshableCredentials``) are refreshed by botocore
shortly before they expire, also off the loop, one refresh at a time.

Each request is signed with ``botocore.auth.SigV4Auth`` for service ``bedrock`` over its
exact body bytes (``HttpRequest.content``), in the region of its endpoint
(``bedrock-runtime.<region>.amazonaws.com``), else the target's ``region``, else the
profile's or ``AWS_REGION``. The signature adds ``x-amz-date``, ``authorization`` (and
``x-amz-security-token`` with temporary credentials) to the request's headers; nothing else
changes, so the transport sends what was signed. Credentials never reach a log, an error or
a repr: errors name what to set, never a value.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ..model import Auth, Target
from ..transport import HttpRequest
from . import AuthError

__all__ = ["AwsSigner", "authorizer", "signing_region"]

SERVICE = "bedrock"  # the SigV4 service name of bedrock-runtime (its signingName)

# bedrock-runtime.us-east-1.amazonaws.com, bedrock-runtime-fips.us-east-1.amazonaws.com,
# vpce-0abc.bedrock-runtime.us-east-1.vpce.amazonaws.com, ...amazonaws.com.cn
_HOST_REGION = re.compile(r"(?:^|\.)bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.")

_NO_CREDENTIALS = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), "
    "or AWS_PROFILE (or auth.profile in the target's config) to a profile of ~/.aws/config, "
    "or run with an instance or container role"
)


def authorizer(auth: Auth) -> AwsSigner:
    """The SigV4 chain for ``auth`` (its ``profile``, or botocore's default chain)."""
    return AwsSigner(auth)


def signing_region(target: Target, configured: str | None = None) -> str | None:
    """The region a request to ``target`` is signed for: its endpoint's, else its ``region``,
    else ``configured`` (the profile's or ``AWS_REGION``)."""
    host = (urlsplit(target.base_url).hostname or "").lower()
    found = _HOST_REGION.search(host)
    if found:
        return found.group(1)
    return target.region or configured


class AwsSigner:
    """Signs Bedrock requests with botocore, from one credential chain (see the module docstring)."""

    def __init__(self, auth: Auth) -> None:
        try:
            import botocore.session
        except ImportError as exc:
            raise AuthError(f"aws credentials need botocore: pip install 'failover[bedrock]' ({exc})") from None
        self._profile = auth.profile
        self._session: Any = botocore.session.Session(profile=auth.profile)
        self._credentials: Any = None  # botocore Credentials / RefreshableCredentials, once resolved
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AwsSigner(profile={self._profile!r})"

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = await self._frozen(target)
        region = signing_region(target, self._configured_region())
        if not region:
            raise AuthError(
                f"Bedrock target {target.name!r}: no AWS region to sign for; set its region "
                "(or a base_url of https://bedrock-runtime.<region>.amazonaws.com), or AWS_REGION"
            )
        body = request.body_bytes()
        aws = AWSRequest(method=request.method, url=request.url, data=body, headers=dict(request.headers))
        SigV4Auth(frozen, SERVICE, region).add_auth(aws)
        headers = {name.lower(): value for name, value in aws.headers.items()}
        return replace(request, headers=headers, content=body)

    async def aclose(self) -> None:
        self._credentials = None

    # ------------------------------------------------------------------------------ internals

    def _configured_region(self) -> str | None:
        try:
            region = self._session.get_config_variable("region")
        except Exception:  # a broken config file: the target's own region, or the error below
            return None
        return region if isinstance(region, str) and region else None

    async def _frozen(self, target: Target) -> Any:
        """The credentials to sign with now (``ReadOnlyCredentials``)."""
        credentials = self._credentials
        if credentials is None:
            async with self._lock:
                if self._credentials is None:
                    self._credentials = await asyncio.to_thread(self._resolve, target)
                credentials = self._credentials
        needs_refresh = getattr(credentials, "refresh_needed", None)
        if needs_refresh is not None and needs_refresh():
            async with self._lock:  # one refresh at a time; botocore refreshes it in place
                return await asyncio.to_thread(self._freeze, credentials, target)
        return self._freeze(credentials, target)

    def _resolve(self, target: Target) -> Any:
        from botocore.exceptions import BotoCoreError, ProfileNotFound

        try:
            credentials = self._session.get_credentials()
        except ProfileNotFound:
            raise AuthError(
                f"Bedrock target {target.name!r}: AWS profile {self._profile!r} is not in the shared "
                "config files (~/.aws/config, ~/.aws/credentials); fix auth.profile or AWS_PROFILE, "
                f"or {_NO_CREDENTIALS}"
            ) from None
        except BotoCoreError as exc:  # an SSO session expired, a credential process failed...
            raise AuthError(
                f"Bedrock target {target.name!r}: the AWS credential chain failed "
                f"({type(exc).__name__}: {exc}); {_NO_CREDENTIALS}"
            ) from None
        if credentials is None:
            where = f"profile {self._profile!r} has none; " if self._profile else ""
            raise AuthError(f"Bedrock target {target.name!r}: no AWS credentials found ({where}{_NO_CREDENTIALS})")
        return credentials

    @staticmethod
    def _freeze(credentials: Any, target: Target) -> Any:
        from botocore.exceptions import BotoCoreError

        try:
            return credentials.get_frozen_credentials()
        except BotoCoreError as exc:  # a refresh failed (the role's session ended, SSO expired)
            raise AuthError(
                f"Bedrock target {target.name!r}: the AWS credentials could not be refreshed "
                f"({type(exc).__name__}: {exc}); {_NO_CREDENTIALS}"
            ) from None
