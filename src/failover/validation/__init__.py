"""Contract validation of results, and the repair request after a repairable failure."""

from ._contract import validate
from ._repair import repair_request

__all__ = ["repair_request", "validate"]
