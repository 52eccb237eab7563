"""The orchestrator: workflows, attempts, and the sync facade."""

from ._router import Router
from ._sync import SyncRouter

__all__ = ["Router", "SyncRouter"]
