"""The user docs speak of the product: no internal notes, workspace paths or issue numbers;
the README's first command installs what `failover serve` needs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INTERNAL = re.compile(r"DESIGN\.md|STYLE\.md|/work/|/home/|\bissue #?\d+|\bissue #|other engineers")


def test_user_docs_cite_no_internal_material() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{i}: {line.strip()}"
        for page in PAGES
        for i, line in enumerate(page.read_text().splitlines(), 1)
        if INTERNAL.search(line)
    ]
    assert found == []


def test_the_readme_command_installs_the_gateway_extra() -> None:
    text = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install '.[gateway]' && .venv/bin/failover serve" in text
