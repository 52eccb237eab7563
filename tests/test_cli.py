"""The ``failover`` command itself: --version, help for everything, serve's endpoint list,
a closed pipe, and capacity without a config file."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib.metadata import version

import pytest
from starlette.routing import Mount
from starlette.routing import Route as HttpRoute

from failover.cli import ENDPOINTS, build_parser, main
from failover.gateway import GatewaySettings, create_app, embedded_router


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    assert capsys.readouterr().out.strip() == f"failover {version('failover')}"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_and_argument_has_help() -> None:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    summaries = {a.dest: a.help for a in sub._choices_actions}
    missing = []
    for name, cmd in _subcommands(parser).items():
        if not summaries.get(name):
            missing.append(f"{name} (summary)")
        if not cmd.description:
            missing.append(f"{name} (description)")
        for action in cmd._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_demo_help_describes_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert "virtual loop time" in out and "only this scenario" in out and "only this required capability" in out


def _app_paths() -> set[str]:
    router, _ = embedded_router()
    app = create_app(router, GatewaySettings(lab_enabled=True, metrics_enabled=True))
    paths = set()
    for r in app.routes:
        if isinstance(r, HttpRoute):
            paths.add(re.sub(r"\{(\w+):\w+\}", r"{\1}", r.path))
        elif isinstance(r, Mount):
            paths.add(r.path + "/")
    return paths


def test_serve_help_names_every_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    listed = {path for _, path, _ in ENDPOINTS}
    assert listed == _app_paths()  # the list is the app's, no more, no less
    for method, path, _ in ENDPOINTS:
        assert re.search(rf"^\s+{method}\s+{re.escape(path)}\s", out, flags=re.M), path


@pytest.mark.parametrize("args", [["demo", "--json", "--scenario", "healthy"], ["demo", "--scenario", "healthy"]])
def test_a_closed_stdout_ends_quietly(args: list[str]) -> None:
    """``failover demo --json | head``: the reader leaves; no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "failover.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141  # as a command ended by SIGPIPE
    assert err == ""


def test_capacity_without_a_config_prints_the_need_and_what_to_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--qps", "20", "--input", "6000", "--output", "800"]) == 0
    out = capsys.readouterr().out
    assert "needs 1,200 RPM, 7.2M input TPM, 960K output TPM" in out
    assert "dimension" not in out and "---" not in out  # no empty table
    assert "Pass --config FILE" in out
    assert main(["capacity", "--qps", "1", "--input", "1", "--output", "1", "--route", "chat"]) == 2
    assert "--route needs --config" in capsys.readouterr().err
