"""Who is calling: a tenant's key, an admin key, or (on an open gateway) a loopback client.

Keys come as ``Authorization: Bearer <key>``; a dialect that sends its key elsewhere (the
anthropic SDK's ``x-api-key``) hands its endpoint's credentials over in that shape. A gateway
without tenants is *open*: it checks no key and answers loopback clients only.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping

from starlette.types import Scope

from ._errors import ApiError
from ._settings import GatewaySettings, Tenant


def bearer(headers: Mapping[str, str]) -> str | None:
    """The key of ``Authorization: Bearer <key>``; None when there is none."""
    auth = headers.get("authorization")
    if auth is None:
        return None
    scheme, _, key = auth.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        return None
    return key


def authenticate(settings: GatewaySettings, scope: Scope, headers: Mapping[str, str]) -> Tenant | None:
    """The caller's tenant (None on an open gateway); 401 for a missing or wrong key."""
    if settings.open:
        if not is_loopback(scope, headers):
            raise ApiError(
                403,
                "this gateway runs without tenants and only answers loopback clients; configure gateway.tenants",
                type="permission_error",
                code="loopback_only",
            )
        return None
    key = bearer(headers)
    if key is None:
        raise ApiError(
            401,
            "missing API key: send 'Authorization: Bearer <your gateway key>'",
            type="invalid_request_error",
            code="invalid_api_key",
        )
    tenant = settings.tenant_for(key)
    if tenant is None:
        raise ApiError(401, "invalid API key", type="invalid_request_error", code="invalid_api_key")
    return tenant


def authenticate_admin(settings: GatewaySettings, scope: Scope, headers: Mapping[str, str]) -> None:
    """Nothing for an admin key (or, on an open gateway without admin keys, a loopback
    client); 401 for a missing or wrong key, 403 for a tenant's key."""
    s = settings
    if s.open and not s.admin_key_hashes:
        if not is_loopback(scope, headers):
            raise ApiError(403, "admin endpoints answer loopback clients only", type="permission_error")
        return
    key = bearer(headers)
    if key is None:
        raise ApiError(401, "missing admin key: send 'Authorization: Bearer <admin key>'", code="invalid_api_key")
    if s.is_admin(key):
        return
    if s.tenant_for(key) is not None:
        raise ApiError(403, "this key is not an admin key", type="permission_error", code="admin_only")
    raise ApiError(401, "invalid admin key", code="invalid_api_key")


def is_loopback(scope: Scope, headers: Mapping[str, str]) -> bool:
    """Whether the caller is on this machine. A loopback peer that forwards for someone else
    (a local reverse proxy sending ``X-Forwarded-For``) is only loopback if every address it
    names is. This is done here rather than by uvicorn's proxy-headers middleware, which would
    run on every request of a gateway with tenants, where the peer address is not used."""
    client = scope.get("client")
    if client and not _loopback_host(str(client[0])):
        return False  # (no client: a unix socket, which only local processes reach)
    forwarded = headers.get("x-forwarded-for")
    if forwarded is None:
        return True
    return all(_loopback_host(h.strip()) for h in forwarded.split(","))


@functools.lru_cache(maxsize=1024)
def _loopback_host(host: str) -> bool:
    """Cached: an open gateway asks on every request, and parsing the address is not free."""
    if host in {"localhost", "testclient"}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["authenticate", "authenticate_admin", "bearer", "is_loopback"]
