"""``GET /v1/models`` and ``GET /v1/models/{name}``: the routes a caller may use, in OpenAI's
shape, or in Anthropic's for a caller that speaks it (its SDK always sends
``anthropic-version``, and may send its key as ``x-api-key``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from ._auth import authenticate
from ._errors import ApiError
from ._gateway import Gateway
from ._http import answers_errors, json_response
from ._settings import Tenant

Handler = Callable[[HttpRequest], Awaitable[Response]]


def model_listing(gw: Gateway) -> tuple[Handler, Handler]:
    """The handlers of ``GET /v1/models`` (every route the caller may use) and
    ``GET /v1/models/{name}`` (one of them)."""

    def listing(request: HttpRequest) -> tuple[Tenant | None, bool]:
        """The caller's tenant, and whether it speaks Anthropic (its SDK always sends
        ``anthropic-version`` and may send its key as ``x-api-key``)."""
        headers = request.headers
        anthropic_client = "anthropic-version" in headers
        key = headers.get("x-api-key") if anthropic_client else None
        creds: Mapping[str, str] = {"authorization": f"Bearer {key.strip()}"} if key else headers
        return authenticate(gw.settings, request.scope, creds), anthropic_client

    def model_entry(name: str, anthropic_client: bool) -> dict[str, Any]:
        if not anthropic_client:
            return {"id": name, "object": "model", "created": gw.started, "owned_by": "failover"}
        route = gw.router.routes[name]
        entry: dict[str, Any] = {
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": datetime.fromtimestamp(gw.started, UTC).isoformat().replace("+00:00", "Z"),
            "lifecycle": "active",
        }
        if route.primary:  # what the route's first target takes and gives
            window = gw.router.windows.known(route.primary[0])  # declared, or stated by its provider
            if window is not None:  # unknown: not said
                entry["max_input_tokens"] = window
            entry["max_tokens"] = route.primary[0].max_output_tokens
        return entry

    @answers_errors
    async def models(request: HttpRequest) -> Response:
        tenant, anthropic_client = listing(request)
        names = [name for name in gw.router.routes if tenant is None or tenant.allows(name)]
        data = [model_entry(name, anthropic_client) for name in names]
        if anthropic_client:  # Anthropic's page: one page with everything
            page = {"data": data, "has_more": False, "first_id": names[0] if names else None}
            return json_response(200, {**page, "last_id": names[-1] if names else None})
        return json_response(200, {"object": "list", "data": data})

    @answers_errors
    async def model(request: HttpRequest) -> Response:
        tenant, anthropic_client = listing(request)
        name = request.path_params["name"]
        if name not in gw.router.routes or (tenant is not None and not tenant.allows(name)):
            raise ApiError(404, f"the model {name!r} does not exist", code="model_not_found", param="model")
        return json_response(200, model_entry(name, anthropic_client))

    return models, model


__all__ = ["model_listing"]
