from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
WIRE = SHARED / "wire"

# tiktoken encodings ship with the workspace; never download them in tests.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))


# Tests that measure wall-clock latency of a served event loop (/healthz under a hostile
# client, loop lag while decoding), or run fleets of processes and kill them: scripts/test.sh
# runs them after the rest, alone, so another worker's load cannot fail them. The schemathesis
# fuzz too: its pytest integration makes one test per API operation only outside xdist.
SERIAL = ("hostile/", "fleet/", "ledger/test_crash.py", "state/test_redis.py", "gateway/test_openapi.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    for item in items:
        if item.path.relative_to(tests).as_posix().startswith(SERIAL):
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def wire() -> Path:
    if not WIRE.is_dir():  # pragma: no cover - the corpus is part of the workspace
        raise RuntimeError(f"wire corpus not found at {WIRE}")
    return WIRE
