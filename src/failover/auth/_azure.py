"""Microsoft Entra ID tokens for Azure OpenAI, from azure-identity's async credentials.

Which credential, by what ``auth`` names:

* nothing: ``DefaultAzureCredential`` (environment service principal, workload identity,
  managed identity, then the developer logins: Azure CLI, PowerShell, azd, VS Code);
* ``client_id`` alone: ``ManagedIdentityCredential`` for that user-assigned identity;
* ``tenant_id`` and ``client_id``: that app registration, with its secret from
  ``AZURE_CLIENT_SECRET`` (``ClientSecretCredential``), else its certificate from
  ``AZURE_CLIENT_CERTIFICATE_PATH`` (``CertificateCredential``), else a federated token from
  ``AZURE_FEDERATED_TOKEN_FILE`` (``WorkloadIdentityCredential``);
* ``tenant_id`` alone: ``DefaultAzureCredential``, asked for a token of that tenant.

The scope is ``auth.scope`` or ``https://cognitiveservices.azure.com/.default``. The request
gets ``Authorization: Bearer <token>``; the token is kept until five minutes before its
``expires_on`` (:class:`~failover.auth._token.TokenCache`: one fetch at a time) and never
logged. Azure OpenAI takes it on the same URLs as an API key (``/openai/deployments/{name}/...``
with ``api-version``, or ``/openai/v1/...``): only the header differs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import AzureError, ClientAuthenticationError

from ..model import Auth, Target
from ..transport import HttpRequest
from . import AuthError
from ._token import MARGIN, Token, TokenCache

__all__ = ["SCOPE", "AzureAuthorizer", "authorizer", "credential_for"]

SCOPE = "https://cognitiveservices.azure.com/.default"

_FIX = (
    "sign in with `az login`, run where a managed identity is assigned, or set AZURE_TENANT_ID, "
    "AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or auth.tenant_id and auth.client_id on the target)"
)


class AzureAuthorizer:
    """Adds ``Authorization: Bearer <token>`` from an azure-identity async credential.

    ``tenant_id`` is passed to ``get_token`` (a credential that serves several tenants);
    ``clock`` answers unix seconds, the clock of ``AccessToken.expires_on``.
    """

    def __init__(
        self,
        credential: AsyncTokenCredential,
        *,
        scope: str = SCOPE,
        tenant_id: str | None = None,
        source: str = "azure",
        clock: Callable[[], float] = time.time,
        margin: float = MARGIN,
    ) -> None:
        self._credential = credential
        self._scope = scope
        self._tenant_id = tenant_id
        self._source = source  # which credential, for messages (never a secret)
        self.tokens = TokenCache(self._fetch, clock=clock, margin=margin)

    def __repr__(self) -> str:
        return f"AzureAuthorizer({self._source}, scope={self._scope!r}, fetches={self.tokens.fetches})"

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        del target  # one chain serves every target that names it
        token = await self.tokens.get()
        # An api-key header beside the token would be a second credential; the token is the one asked for.
        headers = {k: v for k, v in request.headers.items() if k.lower() != "api-key"}
        headers["authorization"] = f"Bearer {token}"
        return replace(request, headers=headers)

    async def aclose(self) -> None:
        await self.tokens.aclose()
        await self._credential.close()

    async def _fetch(self) -> Token:
        options: dict[str, Any] = {"tenant_id": self._tenant_id} if self._tenant_id else {}
        try:
            access = await self._credential.get_token(self._scope, **options)
        except ClientAuthenticationError as exc:
            raise AuthError(f"azure credentials ({self._source}) gave no token: {_short(exc)}; {_FIX}") from None
        except AzureError as exc:
            raise AuthError(f"azure credentials ({self._source}): the token request failed: {_short(exc)}") from None
        return Token(value=access.token, expires_at=float(access.expires_on), obtained_at=self.tokens.clock())


def _short(exc: BaseException, limit: int = 400) -> str:
    # azure-identity's messages name each credential it tried and why it could not; no secrets.
    text = " ".join((str(exc) or type(exc).__name__).split())
    return text if len(text) <= limit else text[:limit] + "…"


def credential_for(
    auth: Auth, env: Mapping[str, str] | None = None, **options: Any
) -> tuple[AsyncTokenCredential, str]:
    """The azure-identity credential ``auth`` names (see the module's docstring), and what it is.

    ``env``: where the secrets' variables are read (default ``os.environ``); ``options`` go to
    the credential (``authority``, ``connection_verify``, a ``transport``...).
    """
    from azure.identity.aio import (
        CertificateCredential,
        ClientSecretCredential,
        DefaultAzureCredential,
        ManagedIdentityCredential,
        WorkloadIdentityCredential,
    )

    environ = os.environ if env is None else env
    tenant, client = auth.tenant_id, auth.client_id
    if client and not tenant:
        return ManagedIdentityCredential(client_id=client, **options), f"managed identity {client}"
    if tenant and client:
        secret = environ.get("AZURE_CLIENT_SECRET")
        if secret:
            return ClientSecretCredential(tenant, client, secret, **options), f"app {client} (client secret)"
        certificate = environ.get("AZURE_CLIENT_CERTIFICATE_PATH")
        if certificate:
            return CertificateCredential(tenant, client, certificate, **options), f"app {client} (certificate)"
        federated = environ.get("AZURE_FEDERATED_TOKEN_FILE")
        if federated:
            credential = WorkloadIdentityCredential(
                tenant_id=tenant, client_id=client, token_file_path=federated, **options
            )
            return credential, f"app {client} (workload identity)"
        raise AuthError(
            f"azure credentials for app {client} in tenant {tenant}: no secret found; set AZURE_CLIENT_SECRET "
            "(or AZURE_CLIENT_CERTIFICATE_PATH, or AZURE_FEDERATED_TOKEN_FILE), or remove auth.tenant_id and "
            "auth.client_id to use DefaultAzureCredential"
        )
    if tenant:
        chain = DefaultAzureCredential(additionally_allowed_tenants=[tenant], **options)
        return chain, f"default chain, tenant {tenant}"
    return DefaultAzureCredential(**options), "default chain"


def authorizer(auth: Auth, *, clock: Callable[[], float] = time.time, margin: float = MARGIN) -> AzureAuthorizer:
    """The chain for ``auth``."""
    credential, source = credential_for(auth)
    return AzureAuthorizer(
        credential, scope=auth.scope or SCOPE, tenant_id=auth.tenant_id, source=source, clock=clock, margin=margin
    )
