"""Adapters that meet users where their code already is: the SDK drop-in client and framework models.

``httpx_client`` / ``sync_httpx_client`` (also exported as ``failover.httpx_client``) make the
official openai and anthropic SDKs call through a Router in-process; ``last_record()`` is the
RouteRecord of the last such call. Every name and submodule is imported on first use
(``from failover.integrations.langchain import FailoverChatModel``); importing this package
never imports a framework, an SDK or an HTTP library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._httpx import httpx_client, last_record, sync_httpx_client

# public name -> the private module that defines it
_LAZY = {
    "httpx_client": "._httpx",
    "last_record": "._httpx",
    "sync_httpx_client": "._httpx",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["httpx_client", "last_record", "sync_httpx_client"]
