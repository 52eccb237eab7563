"""The shape of the source: no import circle inside a package, no module over 700 lines, no
class over 400, no one-letter parameter name.

A circle is found on every import between two modules of one package, whatever kind it is:
at module level, under ``if TYPE_CHECKING:`` (the modules still cannot be read apart), or
inside a function (deferred, but a circle all the same). A report names each import of a
circle with its kind. ``python tests/test_shape.py`` prints the report for every package.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "failover"
MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 400

RULES = ("circle", "size", "names")

# The one-letter parameters kept, by (function's qualified name, parameter): the name of a
# module-level function is its own, a method's is Class.method. Keyed by name, not file, so
# a module that moves keeps its entry.
ONE_LETTER_KEPT = {
    ("Backoff.schedule", "n"): "public API (failover.policy.Backoff, documented); n of the formula",
    ("Backoff.wait", "n"): "public API (failover.policy.Backoff, documented); n of the formula",
    ("dialect_for", "d"): "public API (exported by failover.providers, named in the docs)",
    ("_quantile", "q"): "math: the q of a q-quantile, in a pure numeric helper",
}


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    kind: str  # "module", "type" (under TYPE_CHECKING) or "lazy" (inside a function)
    line: int


def packages() -> list[str]:
    """``failover`` itself and every package under it, as dotted names."""
    found = ["failover"]
    found += sorted(f"failover.{p.parent.name}" for p in ROOT.glob("*/__init__.py"))
    return found


def short(package: str) -> str:
    return package.removeprefix("failover.") or "failover"


def _directory(package: str) -> Path:
    return SRC.joinpath(*package.split("."))


@cache
def _parse(source: str, filename: str) -> ast.Module:
    return ast.parse(source, filename=filename)


def _tree(path: Path) -> ast.Module:
    return _parse(path.read_text(), str(path))


def _modules(package: str) -> dict[str, Path]:
    """Module name (``__init__`` for the package itself) to file, for the package's own files."""
    return {p.stem: p for p in sorted(_directory(package).glob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with its kind."""
    out: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.append((child, kind))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, "type" if kind == "type" else "lazy")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), "type")
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                visit(child, kind)

    visit(tree, "module")
    return out


def edges(package: str) -> list[Edge]:
    """Imports between modules of ``package`` (subpackages and other packages left out)."""
    modules = _modules(package)
    found: list[Edge] = []
    for name, path in modules.items():
        here = package.split(".")  # where a relative import of level 1 starts, for __init__ too
        for node, kind in _imports(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    absolute = ".".join([*base, node.module] if node.module else base)
                else:
                    absolute = node.module or ""
                if absolute == package:  # from . import x: x is a module, or a name in __init__
                    targets = [f"{package}.{a.name}" if a.name in modules else package for a in node.names]
                else:
                    targets = [absolute]
            for target in targets:
                if target == package:
                    module = "__init__"
                elif target.startswith(package + ".") and "." not in target[len(package) + 1 :]:
                    module = target[len(package) + 1 :]
                else:
                    continue
                if module in modules and module != name:
                    found.append(Edge(name, module, kind, node.lineno))
    return found


def circles(package: str) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {m: set() for m in _modules(package)}
    for e in edges(package):
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(groups)


def circle_report(package: str) -> list[str]:
    lines = []
    for group in circles(package):
        lines.append(f"{short(package)}: circle {' / '.join(group)}")
        lines += [
            f"    {e.source}.py:{e.line} imports {e.target} ({e.kind})"
            for e in edges(package)
            if e.source in group and e.target in group
        ]
    return lines


def size_report(package: str) -> list[str]:
    lines = []
    for path in _modules(package).values():
        rel = path.relative_to(ROOT)
        count = len(path.read_text().splitlines())
        if count > MAX_MODULE_LINES:
            lines.append(f"{rel}: {count} lines (module limit {MAX_MODULE_LINES})")
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                length = node.end_lineno - first + 1
                if length > MAX_CLASS_LINES:
                    lines.append(f"{rel}::{node.name}: {length} lines (class limit {MAX_CLASS_LINES})")
    return lines


def _one_letter(node: ast.AST, qualname: list[str]) -> list[tuple[str, ast.arg]]:
    """Every def's one-letter parameters (not ``_``), with the def's qualified name; lambdas
    are left out, as comprehension variables are."""
    found: list[tuple[str, ast.arg]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            inner = [*qualname, child.name]
            if not isinstance(child, ast.ClassDef):
                a = child.args
                every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
                found += [(".".join(inner), arg) for arg in every if len(arg.arg) == 1 and arg.arg != "_"]
            found += _one_letter(child, inner)
        else:
            found += _one_letter(child, qualname)
    return found


def names_report(package: str) -> list[str]:
    lines = []
    for path in _modules(package).values():
        rel = path.relative_to(ROOT)
        for qualname, arg in _one_letter(_tree(path), []):
            if (qualname, arg.arg) not in ONE_LETTER_KEPT:
                lines.append(f"{rel}:{arg.lineno}: {qualname} has a one-letter parameter {arg.arg!r}")
    return lines


REPORTS = {"circle": circle_report, "size": size_report, "names": names_report}
CHECKED = [(p, rule) for p in packages() for rule in RULES]


@pytest.mark.parametrize(("package", "rule"), CHECKED, ids=[f"{short(p)}-{r}" for p, r in CHECKED])
def test_package_keeps_the_rule(package: str, rule: str) -> None:
    report = REPORTS[rule](package)
    assert report == [], "\n".join(report)


def test_finds_circles_of_every_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: a circle closed by a TYPE_CHECKING or a deferred import is a circle."""
    pkg = tmp_path / "failover" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ._a import A\n")
    (pkg / "_a.py").write_text("from ._b import B\nA = 1\n")
    (pkg / "_b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._c import C\nB = 1\n")
    (pkg / "_c.py").write_text("def f():\n    from failover.demo import _a\n")
    (pkg / "_d.py").write_text("from . import _a\nfrom .. import other\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert circles("failover.demo") == [["_a", "_b", "_c"]]
    kinds = {(e.source, e.target): e.kind for e in edges("failover.demo")}
    assert kinds == {
        ("__init__", "_a"): "module",
        ("_a", "_b"): "module",
        ("_b", "_c"): "type",
        ("_c", "_a"): "lazy",
        ("_d", "_a"): "module",
    }
    (pkg / "_c.py").write_text("C = 1\n")
    assert circles("failover.demo") == []


def test_finds_one_letter_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: a def's or a method's one-letter parameter is found, with its line;
    a lambda's, ``_`` and the allowlisted ones are not."""
    pkg = tmp_path / "failover" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text(
        "def f(text, _, *, t):\n    return lambda x: x\n"
        "class C:\n    async def m(self, *a, **k):\n        def inner(y): ...\n"
        "def dialect_for(d): ...\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "failover")
    assert names_report("failover.demo") == [
        "demo/_a.py:1: f has a one-letter parameter 't'",
        "demo/_a.py:4: C.m has a one-letter parameter 'a'",
        "demo/_a.py:4: C.m has a one-letter parameter 'k'",
        "demo/_a.py:5: C.m.inner has a one-letter parameter 'y'",
    ]


def test_every_kept_one_letter_parameter_is_still_there() -> None:
    """An allowlist entry whose parameter was renamed or removed goes too."""
    present = {
        (qualname, arg.arg)
        for p in packages()
        for path in _modules(p).values()
        for qualname, arg in _one_letter(_tree(path), [])
    }
    assert set(ONE_LETTER_KEPT) - present == set()


if __name__ == "__main__":
    for p in packages():
        for line in circle_report(p) + size_report(p) + names_report(p):
            print(line)
