"""The shipped Grafana dashboard and Prometheus alert rules, and the PromQL in them, parsed
(promql-parser: the PromQL grammar of the Prometheus parser, as a Python extension)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import promql_parser as promql
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "failover.json"
ALERTS = ROOT / "deploy" / "prometheus" / "failover-alerts.yaml"
ALERT_TESTS = Path(__file__).resolve().parent / "promtool" / "failover-alerts.test.yaml"

# What Grafana puts in place of its variables before a query is sent.
_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m", "$route": ".*", "$target": ".*"}


def promtool() -> str:
    """promtool from FAILOVER_TEST_PROMTOOL or the PATH (scripts/services.sh installs it)."""
    path = os.environ.get("FAILOVER_TEST_PROMTOOL") or shutil.which("promtool")
    if not path:
        raise AssertionError(
            "promtool is not installed: run ./scripts/services.sh (as root it installs it from Debian's "
            "prometheus package) or set FAILOVER_TEST_PROMTOOL"
        )
    return path


def dashboard() -> dict[str, Any]:
    out = json.loads(DASHBOARD.read_text())
    assert isinstance(out, dict)
    return out


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in board["panels"]:
        yield p
        yield from p.get("panels", ())  # a collapsed row keeps its panels inside


def expressions() -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every query of the dashboard (panels and variables) and every rule."""
    board = dashboard()
    for p in panels(board):
        for t in p.get("targets", ()):
            yield f"panel {p['title']!r} {t['refId']}", t["expr"]
    for v in board["templating"]["list"]:
        if v["type"] == "query":
            # label_values(metric, label) is Grafana's, not PromQL: read as what it asks for
            q = v["query"]["query"]
            assert q.startswith("label_values(") and q.endswith(")"), q
            metric, _, label = q[len("label_values(") : -1].rpartition(",")
            yield f"variable {v['name']}", f"count by ({label.strip()}) ({metric.strip()})"
    for rule in alert_rules():
        yield f"rule {rule.get('alert') or rule.get('record')}", rule["expr"]


@dataclass
class Query:
    """What one PromQL expression reads: its selectors, and the labels it groups or matches on."""

    selectors: list[tuple[str, set[str]]] = field(default_factory=list)  # metric name, matcher labels
    groupings: list[tuple[set[str], set[str]]] = field(default_factory=list)  # labels, metrics below them


def parse(expr: str) -> Query:
    for var, value in _VARIABLES.items():
        expr = expr.replace(var, value)
    tree = promql.parse(expr)
    q = Query()

    def names_below(node: promql.Expr) -> set[str]:
        found: set[str] = set()

        def visit(n: promql.Expr) -> bool:
            if isinstance(n, promql.VectorSelector) and n.name:
                found.add(n.name)
            return True

        promql.walk(node, visit)
        return found

    def visit(n: promql.Expr) -> bool:
        if isinstance(n, promql.VectorSelector):
            assert n.name, f"a selector without a metric name in {expr!r}"
            q.selectors.append((n.name, {m.name for m in n.matchers.matchers}))
        elif isinstance(n, promql.AggregateExpr) and n.modifier is not None:
            if n.modifier.type is promql.AggModifierType.By:
                q.groupings.append((set(n.modifier.labels), names_below(n.expr)))
        elif isinstance(n, promql.BinaryExpr) and n.modifier is not None and n.modifier.matching is not None:
            matching = n.modifier.matching
            if matching.type is promql.LabelModifierType.Include:  # on (...)
                q.groupings.append((set(matching.labels), names_below(n.lhs) | names_below(n.rhs)))
        return True

    promql.walk(tree, visit)
    return q
