"""Several fake providers' scripts as one piece of data: a :class:`Scenario`.

A scenario is a plain mapping of provider name to script, so it can live in YAML or JSON
next to the test that uses it, and it builds the fakes it describes::

    Scenario.from_dict({
        "a": ["rate_limit(retry_after=2)", "ok"],
        "b": {"replies": ["hang"], "default": "server_error"},
    })
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Dialect
from ._network import FakeNetwork
from ._provider import FakeProvider
from ._script import Script

__all__ = ["ProviderPlan", "Scenario"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderPlan:
    """One provider of a scenario: its name, script and (optionally) dialect, model, latency."""

    name: str
    script: Script = Script()  # noqa: RUF009 - a frozen dataclass, shared safely
    dialect: Dialect | None = None
    model: str | None = None
    latency: float = 0.0
    connect: float = 0.0  # seconds to connect (FakeProvider.connect_latency)


_PLAN_KEYS = frozenset({"replies", "default", "dialect", "model", "latency", "connect"})


@dataclass(frozen=True, slots=True)
class Scenario:
    """The scripts of several providers, by name. Build it from data with :meth:`from_dict`.

    >>> sc = Scenario.from_dict({
    ...     "a": ["rate_limit(retry_after=2)", "ok"],
    ...     "b": {"replies": ["hang"], "default": "server_error", "dialect": "anthropic"},
    ... })
    >>> sc["a"].reply_for(0)
    Reply.rate_limit(retry_after=2)
    >>> a, b = sc.providers()          # FakeProvider objects, b speaks Anthropic
    >>> net = sc.network()             # or a FakeNetwork of all of them

    A provider's entry is a list of replies, a single reply (given to every call) or a
    mapping with ``replies``, ``default``, ``dialect``, ``model``, ``latency`` and ``connect``
    (seconds to connect).
    """

    plans: tuple[ProviderPlan, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        if not isinstance(data, Mapping):
            raise ValueError(f"a scenario is a mapping of provider name to script, got {type(data).__name__}")
        plans: list[ProviderPlan] = []
        for name, spec in data.items():
            where = f"scenario provider {name!r}"
            if not isinstance(name, str) or not name:
                raise ValueError(f"{where}: a provider name must be a non-empty string")
            if isinstance(spec, Mapping) and ("replies" in spec or "default" in spec or set(spec) & _PLAN_KEYS):
                unknown = set(spec) - _PLAN_KEYS
                if unknown:
                    raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(_PLAN_KEYS)}")
                script = Script.parse(
                    {k: v for k, v in spec.items() if k in ("replies", "default")} or None, where=where
                )
                dialect = spec.get("dialect")
                try:
                    dialect_value = Dialect(dialect) if dialect is not None else None
                except ValueError:
                    choices = ", ".join(d.value for d in Dialect)
                    raise ValueError(f"{where}: unknown dialect {dialect!r}; expected one of {choices}") from None
                latency = spec.get("latency", 0.0)
                if not isinstance(latency, int | float) or latency < 0:
                    raise ValueError(f"{where}: latency must be a number >= 0, got {latency!r}")
                model = spec.get("model")
                connect = spec.get("connect", 0.0)
                if isinstance(connect, bool) or not isinstance(connect, int | float) or not 0 <= connect < math.inf:
                    raise ValueError(f"{where}: connect must be a number of seconds >= 0, got {connect!r}")
                plans.append(
                    ProviderPlan(
                        name=name,
                        script=script,
                        dialect=dialect_value,
                        model=str(model) if model is not None else None,
                        latency=float(latency),
                        connect=float(connect),
                    )
                )
            else:
                plans.append(ProviderPlan(name=name, script=Script.parse(spec, where=where)))
        return cls(tuple(plans))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.plans)

    def __getitem__(self, name: str) -> Script:
        return self.plan(name).script

    def plan(self, name: str) -> ProviderPlan:
        for p in self.plans:
            if p.name == name:
                return p
        raise KeyError(f"no provider {name!r} in this scenario (has: {', '.join(self.names) or 'none'})")

    def providers(self, *, dialect: Dialect | str = Dialect.OPENAI) -> tuple[FakeProvider, ...]:
        """A fresh FakeProvider per plan; ``dialect`` is used where a plan names none."""
        return tuple(
            FakeProvider(
                p.name,
                p.dialect or Dialect(dialect),
                p.script,
                model=p.model,
                latency=p.latency,
                connect_latency=p.connect,
            )
            for p in self.plans
        )

    def network(self, *, dialect: Dialect | str = Dialect.OPENAI) -> FakeNetwork:
        """A FakeNetwork of :meth:`providers`."""
        return FakeNetwork(*self.providers(dialect=dialect))
