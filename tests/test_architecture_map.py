"""docs/architecture.md's module map names every module in src/failover, and only those.

Adding, moving or removing a module without its one line in the map fails here, with the
lines to add or remove.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "failover"
DOC = ROOT / "docs" / "architecture.md"
LINE = re.compile(r"^- `([\w/]+\.py)`: (\S.*)$", re.M)


def _map_section() -> str:
    text = DOC.read_text()
    start = text.index("\n## Module map\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_module_map_matches_the_tree() -> None:
    listed = [m.group(1) for m in LINE.finditer(_map_section())]
    tree = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")}
    assert len(listed) == len(set(listed)), "a module is listed twice"
    missing = sorted(tree - set(listed))
    gone = sorted(set(listed) - tree)
    assert not missing and not gone, f"add a line for {missing}; remove the line of {gone}"


def test_each_line_is_under_its_package_heading() -> None:
    package = None
    for line in _map_section().splitlines():
        heading = re.match(r"^### `failover(?:\.(\w+))?`$", line)
        if heading:
            package = heading.group(1)
            continue
        entry = LINE.match(line)
        if entry:
            path = entry.group(1)
            assert (path.split("/")[0] if "/" in path else None) == package, f"{path} is under failover.{package}"
