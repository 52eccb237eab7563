"""The orchestrator: workflows, attempts, and the sync facade."""

from ._embed import route_cannot_embed
from ._hooks import DegradeHandler, QualityGate, Verdict
from ._router import Router, Vetted, check_text
from ._stream import RouteStream
from ._sync import SyncRouter

__all__ = [
    "check_text",
    "route_cannot_embed",
    "DegradeHandler",
    "QualityGate",
    "RouteStream",
    "Router",
    "SyncRouter",
    "Verdict",
    "Vetted",
]
