"""failover: dependable LLM API calls.

One deadline per request, classified failures, retries with full-jitter backoff and
Retry-After, equivalent failover, cross-model fallback under a contract, and a RouteRecord
of every attempt -- or a clear, typed :class:`Unavailable`.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .config import Config, load_config
from .model import (
    Attempt,
    Capability,
    ConfigError,
    Contract,
    Dialect,
    Embeddings,
    EmbedInput,
    EmbedRequest,
    Envelope,
    Exclusion,
    ExclusionCode,
    FailoverError,
    Failure,
    FailureKind,
    ImagePart,
    InvalidRequest,
    Limits,
    Message,
    Phase,
    Price,
    Reasoning,
    Request,
    Response,
    ResponseFormat,
    Route,
    RouteRecord,
    Secret,
    SideEffectMode,
    StopReason,
    Target,
    TextPart,
    Timeouts,
    Tool,
    ToolCall,
    ToolChoice,
    Unavailable,
    UnknownRoute,
    Usage,
    Wait,
    Workflow,
)
from .router import Router, SyncRouter

if _TYPE_CHECKING:
    from .integrations import httpx_client, sync_httpx_client

_LAZY = {"httpx_client", "sync_httpx_client"}  # the SDK drop-in: imported on first use


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        from . import integrations

        return getattr(integrations, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Attempt",
    "Capability",
    "Config",
    "ConfigError",
    "Contract",
    "Dialect",
    "EmbedInput",
    "EmbedRequest",
    "Embeddings",
    "Envelope",
    "Exclusion",
    "ExclusionCode",
    "FailoverError",
    "Failure",
    "FailureKind",
    "ImagePart",
    "InvalidRequest",
    "Limits",
    "Message",
    "Phase",
    "Price",
    "Reasoning",
    "Request",
    "Response",
    "ResponseFormat",
    "Route",
    "RouteRecord",
    "Router",
    "Secret",
    "SideEffectMode",
    "StopReason",
    "SyncRouter",
    "Target",
    "TextPart",
    "Timeouts",
    "Tool",
    "ToolCall",
    "ToolChoice",
    "Unavailable",
    "UnknownRoute",
    "Usage",
    "Wait",
    "Workflow",
    "httpx_client",
    "load_config",
    "sync_httpx_client",
]
