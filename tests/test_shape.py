"""The shape of the source: no import circle inside a package, no module over 700 lines, no
class over 400, no one-letter parameter name, one failure renderer, and no package reaching
into another one's private modules.

A circle is found on every import between two modules of one package, whatever kind it is:
at module level, under ``if TYPE_CHECKING:`` (the modules still cannot be read apart), or
inside a function (deferred, but a circle all the same). A report names each import of a
circle with its kind. ``python tests/test_shape.py`` prints the report for every package.

How a failure is answered is decided in one module, ``inbound/_failures.py``, for the gateway
and the in-process SDK drop-in alike: no other module maps failure kinds to statuses, defines an
``error_response`` of its own or converts a WireError into another error to answer it, and the
credential pattern and the scrubber that applies it are each defined once.
``python tests/test_shape.py --renderer <src dir>`` prints the renderer report for another tree.

A package's ``__init__`` exports what other packages use: no module of ``failover.a`` (or of a
subpackage of it) imports a ``_private`` module of ``failover.b``, in any form (``from .._x``,
``from ..b._x``, ``from ..b import _x``, ``failover.b._x``) and of any kind. Inside one
package (its subpackages included) the private modules are free to use; tests may import them.
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
    """``failover`` itself and every package under it, subpackages too, as dotted names."""
    found = ["failover"]
    found += sorted(".".join(p.parent.relative_to(SRC).parts) for p in ROOT.glob("**/*/__init__.py"))
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


RENDERER = "inbound/_failures.py"
_STATUSES = range(400, 600)


def _status_constant(node: ast.expr) -> bool:
    """An HTTP error status, or a call given one (``Row(502, 401)``, ``_Mapping(504, ...)``)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int and node.value in _STATUSES
    return isinstance(node, ast.Call) and any(_status_constant(a) for a in node.args)


def _kind_key(node: ast.expr | None) -> bool:
    """``FailureKind.X`` (or an alias of it, ``K.X``): an attribute in FailureKind's spelling."""
    return isinstance(node, ast.Attribute) and node.attr.isupper() and isinstance(node.value, ast.Name)


def _catches_wire_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id == "WireError" for k in kinds)


def renderer_report(root: Path | None = None) -> list[str]:
    """Every place outside the renderer that decides how a failure is answered."""
    root = ROOT if root is None else root
    lines: list[str] = []
    keylike: list[str] = []
    scrubbers: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Dict) and rel != RENDERER and len(node.keys) >= 2:
                if all(_kind_key(k) for k in node.keys) and any(_status_constant(v) for v in node.values):
                    lines.append(f"{where}: a failure kind -> status table outside {RENDERER}")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "error_response":
                if rel != "gateway/_errors.py":
                    lines.append(f"{where}: an error_response of its own (use gateway/_errors.error_response)")
            elif isinstance(node, ast.FunctionDef) and node.name == "from_wire":
                lines.append(f"{where}: from_wire converts a WireError (endpoints catch WireError once)")
            elif isinstance(node, ast.ExceptHandler) and _catches_wire_error(node) and rel.startswith("gateway/"):
                if any(
                    isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) for b in node.body for n in ast.walk(b)
                ):
                    lines.append(f"{where}: a WireError converted to answer it (endpoints catch WireError once)")
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id.lstrip("_") == "KEYLIKE" for t in targets):
                    keylike.append(where)
            elif isinstance(node, ast.ClassDef) and "scrub" in node.name.lower():
                scrubbers.append(f"{where} {node.name}")
    if len(keylike) != 1:
        lines.append(f"the credential pattern KEYLIKE is defined {len(keylike)} times, not once: {keylike}")
    if len(scrubbers) != 1:
        lines.append(f"{len(scrubbers)} scrubber classes, not one: {scrubbers}")
    return lines


def test_one_failure_renderer() -> None:
    assert renderer_report() == []


def test_the_renderer_check_finds_a_second_table(tmp_path: Path) -> None:
    """The checker itself, on the shapes the renderer replaced: a second kind -> status table,
    an error_response delegate, a from_wire conversion, a second KEYLIKE and scrubber."""
    (tmp_path / "gateway").mkdir()
    (tmp_path / "inbound").mkdir()
    (tmp_path / RENDERER).write_text(
        "TABLE = {FailureKind.TIMEOUT: Row(None, 504), FailureKind.TRUNCATED: Row(422, 422)}\n"
        "KEYLIKE = 1\nclass Scrubber: ...\n"
    )
    assert renderer_report(tmp_path) == []
    (tmp_path / "gateway" / "_chat.py").write_text(
        "_STATUS = {FailureKind.TIMEOUT: 504, FailureKind.TRUNCATED: 422}\n"
        "def error_response(err): return gw.error_response(err)\n"
        "def from_wire(exc): ...\n"
        "def parse(data):\n    try:\n        return wire.parse(data)\n"
        "    except WireError as exc:\n        raise ApiError(exc.status, exc.message) from None\n"
        "_KEYLIKE = 2\nclass _Scrub: ...\n"
    )
    report = renderer_report(tmp_path)
    assert {line.split(": ", 1)[0] for line in report[:4]} == {
        "gateway/_chat.py:1",
        "gateway/_chat.py:2",
        "gateway/_chat.py:3",
        "gateway/_chat.py:7",
    }
    assert "KEYLIKE is defined 2 times" in report[4] and "2 scrubber classes" in report[5]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, for a module of ``package``."""
    if not node.level:
        return node.module or ""
    here = package.split(".")
    base = here[: len(here) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _is_private(segment: str) -> bool:
    return segment.startswith("_") and not segment.startswith("__")


def private_imports() -> list[str]:
    """Every import in src/failover of another package's private module (or private name),
    one line each: ``file:line imports failover.b._x (kind)``."""
    found: list[str] = []
    for package in packages():
        for path in _modules(package).values():
            home = package.split(".")[:2]  # failover.a: the package a module belongs to
            for node, kind in _imports(_tree(path)):
                if isinstance(node, ast.Import):
                    named = [alias.name for alias in node.names]
                else:
                    module = _absolute(node, package)
                    named = [module, *(f"{module}.{alias.name}" for alias in node.names)]
                reported: set[str] = set()
                for dotted in named:
                    parts = dotted.split(".")
                    private = next(
                        (i for i, p in enumerate(parts) if i and p.startswith("_") and p != "__init__"), None
                    )
                    if parts[0] != "failover" or private is None:
                        continue
                    owner = parts[:private][:2]  # failover.b, whose private module (or name) this is
                    target = ".".join(parts[: private + 1])
                    if home[: len(owner)] != owner and target not in reported:
                        reported.add(target)
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {target} ({kind})")
    return found


def test_no_package_imports_another_packages_private_modules() -> None:
    """What a package offers the others is in its ``__init__``: import it from there."""
    found = private_imports()
    assert found == [], f"{len(found)} imports of another package's private module:\n" + "\n".join(found)


def test_finds_private_imports_of_every_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: every form and kind of import of another package's private module."""
    root = tmp_path / "failover"
    for folder in ("a", "a/sub", "b"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("from .a import _x\n")  # the root reaches into failover.a
    (root / "_extras.py").write_text("")
    (root / "a" / "_x.py").write_text("from ..b._y import Y\nfrom .sub._z import Z\nfrom .. import _extras\n")
    (root / "a" / "sub" / "_z.py").write_text("from .._x import X\nfrom ...b import _y\nZ = 1\n")
    (root / "b" / "_y.py").write_text(
        "from typing import TYPE_CHECKING\nimport failover.a._x\nif TYPE_CHECKING:\n    from failover.a.sub import _z\n"
        "def f():\n    from ..a._x import X\nY = 1\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    assert private_imports() == [
        "__init__.py:1 imports failover.a._x (module)",
        "a/_x.py:1 imports failover.b._y (module)",
        "a/sub/_z.py:2 imports failover.b._y (module)",
        "b/_y.py:2 imports failover.a._x (module)",
        "b/_y.py:4 imports failover.a.sub._z (type)",
        "b/_y.py:6 imports failover.a._x (lazy)",
    ]


REPORTS = {"circle": circle_report, "size": size_report}


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
    if sys.argv[1:2] == ["--renderer"]:
        for line in renderer_report(Path(sys.argv[2]) / "failover" if len(sys.argv) > 2 else None):
            print(line)
        sys.exit(0)
    for p in packages():
        for line in circle_report(p) + size_report(p) + names_report(p):
            print(line)
    for line in private_imports():
        print(line)
