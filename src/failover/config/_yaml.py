"""Reading a YAML config file with the line and column of every key and list item.

PyYAML's safe loader gives plain data; composing the node tree first (one parse) also
gives the marks, so a problem found in the data can name where it is in the file. Keys
that appear twice in one mapping are reported: YAML loaders silently keep the last one,
which turns a pasted second ``routes:`` section into a lost first one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..model import ConfigError, ConfigProblem

Loc = tuple[str | int, ...]  # a path into the data: ("routes", "chat", "primary", 0)
_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """A parsed file: the data, where each key and item is (1-based line, column), and the
    keys given twice."""

    data: Any
    source: str | None = None
    positions: Mapping[Loc, tuple[int, int]] = field(default_factory=dict)
    duplicates: tuple[ConfigProblem, ...] = ()

    def where(self, loc: tuple[int | str, ...]) -> tuple[int, int] | None:
        """The position of ``loc``, or of its nearest ancestor that is in the file (a missing
        key is reported where its mapping starts)."""
        parts: Loc = tuple(loc)
        while True:
            pos = self.positions.get(parts)
            if pos is not None or not parts:
                return pos
            parts = parts[:-1]


def dotted(loc: Loc) -> str:
    """``("routes", "chat", "primary", 1)`` -> ``routes.chat.primary[1]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _key_text(node: yaml.Node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _walk(node: yaml.Node, loc: Loc, positions: dict[Loc, tuple[int, int]], dups: list[tuple[Loc, int, int]]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == _MERGE:  # `<<: *base`: its keys have their own positions, at the anchor
                continue
            text = _key_text(key)
            if text is None:
                continue
            here = (*loc, text)
            mark = key.start_mark
            if text in seen:
                dups.append((here, seen[text], mark.line + 1))
            seen[text] = mark.line + 1
            positions[here] = (mark.line + 1, mark.column + 1)
            _walk(value, here, positions, dups)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            here = (*loc, i)
            positions[here] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, here, positions, dups)


def parse_yaml(text: str, source: str | None = None) -> Document:
    """Parse ``text``; bad syntax is a ConfigError naming the line and column."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = source or "<config>"
        if mark is not None:
            where = f"{where}:{mark.line + 1}:{mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(where, f"not valid YAML ({problem})", "fix the syntax at that line") from None
    finally:
        loader.dispose()
    positions: dict[Loc, tuple[int, int]] = {}
    dups: list[tuple[Loc, int, int]] = []
    if node is not None:
        positions[()] = (node.start_mark.line + 1, node.start_mark.column + 1)
        _walk(node, (), positions, dups)
    duplicates = tuple(
        ConfigProblem(
            field=dotted(loc),
            problem=f"the key {loc[-1]!r} is given twice (lines {first} and {again}); only the last would count",
            fix="merge the two into one entry",
            source=source,
            line=positions[loc][0],
            column=positions[loc][1],
        )
        for loc, first, again in dups
    )
    return Document(data=data, source=source, positions=positions, duplicates=duplicates)


def read_document(path: str | os.PathLike[str]) -> Document:
    """The parsed file at ``path``; an unreadable file or bad syntax is a ConfigError."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(str(p), f"cannot read the file: {exc.strerror}", "check the path") from None
    return parse_yaml(text, str(p))
