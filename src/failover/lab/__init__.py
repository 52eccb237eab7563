"""The simulator: the real router on virtual loop time, with fake providers."""

from ._report import render, timeline
from ._seed import (
    CAPABILITIES,
    SCENARIOS,
    LabPolicies,
    SeedOptions,
    SeedResult,
    all_combinations,
    run_seed,
    run_virtual,
)

__all__ = [
    "CAPABILITIES",
    "SCENARIOS",
    "LabPolicies",
    "SeedOptions",
    "SeedResult",
    "all_combinations",
    "render",
    "run_seed",
    "run_virtual",
    "timeline",
]
