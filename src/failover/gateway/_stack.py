"""The server stack is the ``gateway`` extra: importing the gateway without it says so
(``pip install 'failover[gateway]'``), not just "No module named 'starlette'"."""

from __future__ import annotations

from .._extras import missing

try:
    import prometheus_client
    import starlette
except ModuleNotFoundError as exc:
    raise missing("failover.gateway (failover serve)", exc) from exc

__all__ = ["prometheus_client", "starlette"]
