from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
WIRE = SHARED / "wire"

# tiktoken encodings ship with the workspace; never download them in tests.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))


@pytest.fixture
def wire() -> Path:
    if not WIRE.is_dir():  # pragma: no cover - the corpus is part of the workspace
        raise RuntimeError(f"wire corpus not found at {WIRE}")
    return WIRE
