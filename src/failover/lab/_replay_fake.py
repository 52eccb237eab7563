"""Replay on fake providers: the fault kit's scripted targets on virtual loop time.

``failover replay --fake scenario.yaml``: each target is served by a fake provider scripted by
the scenario entry of the same name and speaking the target's dialect; no network, no keys.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import yaml

from ..model import Secret, Target
from ..testing import FakeNetwork, FakeProvider, Scenario


class FakeKeys(Mapping[str, str]):
    """The environment, with a placeholder for every unset variable: fakes need no real keys."""

    def __getitem__(self, key: str) -> str:
        return os.environ.get(key) or "sk-fake-replay"

    def __iter__(self) -> Iterator[str]:
        return iter(os.environ)

    def __len__(self) -> int:
        return len(os.environ)


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a fault-kit Scenario (target name -> script) from a YAML or JSON file."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--fake {p}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--fake {p}: not valid YAML: {exc}") from None
    try:
        return Scenario.from_dict(data)
    except ValueError as exc:
        raise ValueError(f"--fake {p}: {exc}") from None


def fake_targets(
    scenario: Scenario, targets: Sequence[Target], *, source: str = "scenario"
) -> tuple[FakeNetwork, list[Target]]:
    """A FakeNetwork with one fake provider per target (scripted by the scenario entry of the
    same name, speaking the target's dialect) and the targets pointed at it."""
    names = set(scenario.names)
    missing = [t.name for t in targets if t.name not in names]
    if missing:
        raise ValueError(
            f"--fake {source}: no script for target(s) {', '.join(missing)}; "
            f"the scenario maps target names to scripts (it has: {', '.join(scenario.names) or 'none'})"
        )
    providers: list[FakeProvider] = []
    rewired: list[Target] = []
    used: set[str] = set()
    for t in targets:
        plan = scenario.plan(t.name)
        if plan.dialect is not None and plan.dialect != t.dialect:
            raise ValueError(
                f"--fake {source}: {t.name!r} is a {t.dialect.value} target, the scenario says {plan.dialect.value}"
            )
        label = _host_label(t.name, used)
        p = FakeProvider(label, t.dialect, plan.script, model=plan.model, latency=plan.latency)
        providers.append(p)
        rewired.append(replace(t, base_url=p.base_url, api_key=Secret(f"sk-fake-{label}")))
    return FakeNetwork(*providers), rewired


def _host_label(name: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:50] or "target"
    label, n = base, 1
    while label in used:
        n += 1
        label = f"{base}-{n}"
    used.add(label)
    return label
