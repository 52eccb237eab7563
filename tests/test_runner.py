"""scripts/test.sh runs the serial tests where tests/conftest.py marks them."""

from __future__ import annotations

import re

from tests.conftest import ROOT, SERIAL


def test_the_runner_collects_the_serial_tests_where_they_are() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    listed = re.search(r"^SERIAL=\((.*)\)$", script, re.M)
    assert listed is not None, "scripts/test.sh has no SERIAL=(...) line"
    assert {p.removeprefix("tests/").rstrip("/") for p in listed.group(1).split()} == {s.rstrip("/") for s in SERIAL}
