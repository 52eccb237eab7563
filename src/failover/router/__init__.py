"""The orchestrator: workflows, attempts, and the sync facade."""

from ._hooks import DegradeHandler, QualityGate, Verdict
from ._router import Router, Vetted
from ._stream import RouteStream
from ._sync import SyncRouter

__all__ = ["DegradeHandler", "QualityGate", "RouteStream", "Router", "SyncRouter", "Verdict", "Vetted"]
