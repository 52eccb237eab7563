"""The simulator: the real router on virtual loop time, with fake providers.

The lab page (``lab_app``, ``LiveView``: starlette), replay and custom scenarios are imported
on first use, so ``failover demo`` and the gateway without its ops pages do not load them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ._custom import BadInput, CustomScenario, parse_custom_text
    from ._live import LiveRecords
    from ._replay import ReplayOptions, run_replay
    from ._web import LiveView, lab_app

_LAZY = {
    "BadInput": "._custom",
    "CustomScenario": "._custom",
    "LiveRecords": "._live",
    "LiveView": "._web",
    "ReplayOptions": "._replay",
    "lab_app": "._web",
    "parse_custom_text": "._custom",
    "run_replay": "._replay",
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


__all__ = [
    "CAPABILITIES",
    "BadInput",
    "CustomScenario",
    "LiveRecords",
    "LiveView",
    "ReplayOptions",
    "lab_app",
    "parse_custom_text",
    "run_replay",
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
