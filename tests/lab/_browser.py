"""The system Chromium driven by Playwright, for the lab page's tests (never `playwright install`)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("FAILOVER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def publish(shot: Path) -> None:
    """Copy a screenshot over the one in docs/ only when asked (FAILOVER_UPDATE_DOCS=1): a
    test run must not rewrite tracked files; the artifact stays in test-artifacts/."""
    if os.environ.get("FAILOVER_UPDATE_DOCS") == "1":
        shutil.copyfile(shot, ROOT / "docs" / shot.name)


@contextlib.contextmanager
def lab_page(url: str) -> Iterator[Any]:
    """The page at ``url`` open in the system Chromium (headless), closed again after the test."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/services.sh (installs Debian's chromium) as root")
    from playwright.sync_api import sync_playwright  # the test extra; drives the system Chromium

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            page.goto(url)
            yield page
        finally:
            browser.close()
