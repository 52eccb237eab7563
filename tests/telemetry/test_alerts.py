"""The shipped Prometheus alert rules and Grafana dashboard, checked by Prometheus's own promtool:
the rules load, their unit tests (input series -> the alerts that must and must not fire) pass,
and every dashboard query is PromQL that Prometheus parses. That the names they query are the
gateway's own is tests/gateway/test_metrics_dashboard.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ._dashboards import ALERT_TESTS, ALERTS, alert_rules, dashboard, expressions, panels, promtool


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *map(str, args)], capture_output=True, text=True, timeout=60, check=False)


def test_the_alert_rules_load() -> None:
    done = run("check", "rules", ALERTS)
    assert done.returncode == 0, done.stdout + done.stderr
    names = [r["alert"] for r in alert_rules()]
    assert f"SUCCESS: {len(names)} rules found" in done.stdout
    assert set(names) == {
        "FailoverDeadlineExhausted",
        "FailoverNoEligibleCandidate",
        "FailoverBreakerOpen",
        "FailoverFailedAttemptCost",
    }
    for rule in alert_rules():  # what an on-call engineer is shown
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_the_alert_rules_unit_tests_pass() -> None:
    done = run("test", "rules", ALERT_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_is_tested_both_firing_and_quiet() -> None:
    """A rule with no test that expects it to fire, and one that expects it not to, is not tested."""
    cases = [c for t in yaml.safe_load(ALERT_TESTS.read_text())["tests"] for c in t.get("alert_rule_test", ())]
    for name in (r["alert"] for r in alert_rules()):
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c.get("exp_alerts") for c in mine), f"{name}: no test where it fires"
        assert any(not c.get("exp_alerts") for c in mine), f"{name}: no test where it stays quiet"


def test_every_dashboard_query_is_promql_prometheus_accepts(tmp_path: Path) -> None:
    """Each query (Grafana's variables filled in) as a recording rule, for promtool to parse."""
    rules = [
        {
            "record": f"failover:dashboard_query_{i}",
            "expr": expr.replace("$__rate_interval", "5m").replace("$route", ".*").replace("$target", ".*"),
        }
        for i, (_, expr) in enumerate(expressions())
        if not expr.startswith("count by")  # the variables' label_values, Grafana's own syntax
    ]
    assert len(rules) >= 20
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = run("check", "rules", path)
    assert done.returncode == 0, done.stdout + done.stderr


# The parts of Grafana's dashboard model a provisioned or imported dashboard needs.
_TARGET = {
    "type": "object",
    "required": ["refId", "expr", "datasource"],
    "properties": {
        "refId": {"type": "string", "pattern": "^[A-Z]$"},
        "expr": {"type": "string", "minLength": 1},
        "datasource": {"const": {"type": "prometheus", "uid": "${datasource}"}},
        "legendFormat": {"type": "string"},
    },
}
_GRID = {
    "type": "object",
    "required": ["h", "w", "x", "y"],
    "properties": {k: {"type": "integer", "minimum": 0} for k in ("h", "w", "x", "y")},
}
_PANEL = {
    "type": "object",
    "required": ["type", "title", "id", "gridPos"],
    "properties": {"id": {"type": "integer"}, "title": {"type": "string", "minLength": 1}, "gridPos": _GRID},
    "if": {"properties": {"type": {"const": "row"}}},
    "then": {"required": ["panels"]},
    "else": {
        "required": ["datasource", "targets", "description"],
        "properties": {
            "type": {"enum": ["timeseries", "state-timeline", "stat", "table", "bargauge"]},
            "datasource": {"const": {"type": "prometheus", "uid": "${datasource}"}},
            "targets": {"type": "array", "minItems": 1, "items": _TARGET},
        },
    },
}
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "panels": {"type": "array", "minItems": 1, "items": _PANEL},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {
                "list": {
                    "type": "array",
                    "contains": {
                        "type": "object",
                        "required": ["name", "type", "query"],
                        "properties": {
                            "name": {"const": "datasource"},
                            "type": {"const": "datasource"},
                            "query": {"const": "prometheus"},
                        },
                    },
                }
            },
        },
    },
}


def test_the_dashboard_is_a_grafana_dashboard_on_a_datasource_variable() -> None:
    board = dashboard()
    jsonschema.validate(board, DASHBOARD_SCHEMA)
    every = list(panels(board))
    assert len({p["id"] for p in every}) == len(every), "panel ids repeat"
    for p in every:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        refs = [t["refId"] for t in p.get("targets", ())]
        assert len(set(refs)) == len(refs), p["title"]
    # no two panels cover the same cell of the 24-column grid
    taken: dict[tuple[int, int], str] = {}
    for p in every:
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in taken, f"{p['title']!r} overlaps {taken[x, y]!r}"
                taken[x, y] = p["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    for name in ("route", "target"):
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    # the seed's panels: per route class, who answered; the two alert rates; breakers; failed cost; latency
    titles = " | ".join(p["title"] for p in every)
    for part in (
        "share answered by primary, retry, equivalent failover, cross-model fallback",
        "Deadline exhausted rate",
        "No eligible candidate rate",
        "Breaker states",
        "Failed-attempt cost",
        "Request latency",
        "Time to first token",
    ):
        assert part in titles, part
    (share,) = [p for p in every if "share answered by" in p["title"]]
    assert share.get("repeat") == "route"  # one panel per route class
