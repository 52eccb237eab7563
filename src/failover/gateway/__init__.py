"""The OpenAI-compatible gateway: any OpenAI client gets failover's guarantees over HTTP.

>>> app = create_app(Router.from_config(cfg), settings)      # an ASGI app (Starlette)

``failover serve --config failover.yaml`` runs it under uvicorn; without ``--config`` it
serves the embedded default (fake providers, in-memory state). See docs/gateway.md.
"""

from . import _stack  # noqa: F401  # first: without the gateway extra, an ImportError that says so
from ._app import create_app, record_headers
from ._default import embedded_router
from ._errors import ApiError
from ._logs import JsonFormatter, configure_logging
from ._openapi import openapi_schema
from ._quota import TenantQuotas
from ._serve import ServeOptions, serve
from ._settings import EnvelopeDefaults, GatewaySettings, Tenant, hash_key, load_gateway_config, settings_from_dict

__all__ = [
    "ApiError",
    "EnvelopeDefaults",
    "GatewaySettings",
    "JsonFormatter",
    "ServeOptions",
    "Tenant",
    "TenantQuotas",
    "configure_logging",
    "create_app",
    "embedded_router",
    "hash_key",
    "load_gateway_config",
    "openapi_schema",
    "record_headers",
    "serve",
    "settings_from_dict",
]
