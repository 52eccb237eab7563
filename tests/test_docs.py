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


def test_no_file_keeps_a_merge_conflicts_markers() -> None:
    """A merge whose conflict was committed unresolved leaves its markers in a page or a module."""
    marker = re.compile(r"^(<{7} |={7}$|>{7} )")
    kept = ("*.md", "*.py", "*.sh", "*.toml", "*.yaml", "*.yml", "*.json")
    roots = [ROOT / "docs", ROOT / "src", ROOT / "tests", ROOT / "scripts", ROOT / "bench"]
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *(f for r in roots for k in kept for f in r.rglob(k))]
    found = [
        f"{f.relative_to(ROOT)}:{i}"
        for f in files
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
        if marker.match(line)
    ]
    assert found == []
