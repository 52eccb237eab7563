"""Custom scenarios for the lab: what A, B and C answer, written in the fault kit's vocabulary.

A custom scenario is YAML or JSON (the page's textarea, ``failover lab --scenario FILE``)::

    stream: true            # attempts stream: the timeline splits connect / first token / body
    providers:
      a:
        connect: 0.05       # seconds to connect (FakeProvider.connect_latency)
        replies: ["rate_limit(retry_after=0.4, latency=0.05)", "ok(latency=0.2)"]
        default: server_error
      b: "stall_before_first(5)"                   # one reply, given to every call
      c: ["overloaded(latency=0.1)", "ok(chunk_interval=0.05)"]

Each provider entry is what :meth:`failover.testing.Scenario.from_dict` reads (a reply, a list
of replies, or a mapping with ``replies``, ``default``, ``latency`` and ``connect``). A
provider left out answers like the *healthy* scenario; B or C written ``absent`` is not in the
route at all (a real route with fewer targets, replayed from the live view). The input is untrusted (it comes from a
browser): :func:`parse_custom` walks it and raises :class:`BadInput` naming the exact field
(``providers.a.replies[1]``) and what to write instead, so the page can show the message next
to the textarea. Nothing is evaluated: replies are parsed with :func:`ast.literal_eval`.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ..testing import Reply, Scenario, Script

PROVIDERS = ("a", "b", "c")
ABSENT = "absent"  # a fallback (b or c) that is not in the route
MAX_TEXT = 20_000  # characters of YAML/JSON
MAX_REPLIES = 50  # per provider
MAX_SECONDS = 60.0  # connect / latency, seconds of virtual time
_TOP_KEYS = ("providers", "stream")
_PLAN_KEYS = ("replies", "default", "latency", "connect")
_FIX_REPLY = 'write a reply like "ok", "ok(latency=0.3)", "rate_limit(retry_after=1)" or "hang"'


class BadInput(ValueError):
    """Bad user input: ``field`` names where (``providers.a.replies[1]``), the message says the fix."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class CustomScenario:
    """A validated custom scenario: the fault kit's Scenario for A, B, C, and whether to stream."""

    scenario: Scenario
    stream: bool = False
    source: str = ""  # the text it was parsed from (shown back in the page)
    absent: frozenset[str] = frozenset()  # fallbacks left out of the route

    def script(self, name: str, healthy: Reply) -> Script:
        """The script of provider ``name``; a provider the scenario leaves out answers ``healthy``."""
        return self.scenario[name] if name in self.scenario.names else Script.always(healthy)

    def latency(self, name: str) -> float:
        return self.scenario.plan(name).latency if name in self.scenario.names else 0.0

    def connect(self, name: str) -> float:
        return self.scenario.plan(name).connect if name in self.scenario.names else 0.0


def load_text(text: str) -> Any:
    """YAML (a superset of JSON) to plain data; errors name ``custom`` and the line."""
    if not isinstance(text, str):
        raise BadInput("custom", f"must be YAML or JSON text, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise BadInput("custom", f"is {len(text)} characters; keep it under {MAX_TEXT}")
    try:
        # Aliases (*name) could expand a 20 kB text into gigabytes when printed in an error.
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise BadInput("custom", "YAML aliases (*name) are not allowed here; write the value out")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise BadInput("custom", f"not valid YAML or JSON{where}: {problem}") from None
    except RecursionError:
        raise BadInput("custom", "is nested too deeply; a scenario needs only a few levels") from None


def parse_custom(data: Any, *, source: str = "") -> CustomScenario:
    """Validate plain data (a parsed YAML/JSON document) into a :class:`CustomScenario`."""
    if data is None:
        raise BadInput("custom", 'is empty; write e.g. {"providers": {"a": "hang"}}')
    if not isinstance(data, Mapping):
        raise BadInput("custom", f"must be a mapping with 'providers' (and optional 'stream'), got {_kind(data)}")
    for key in data:
        if key not in _TOP_KEYS:
            raise BadInput(str(key), f"unknown key; a scenario has only {', '.join(_TOP_KEYS)}")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadInput("stream", f"must be true or false, got {stream!r}")
    providers = data.get("providers")
    if not isinstance(providers, Mapping) or not providers:
        raise BadInput("providers", f"must map provider names ({', '.join(PROVIDERS)}) to replies, got {providers!r}")
    checked: dict[str, Any] = {}
    absent: set[str] = set()
    for name, spec in providers.items():
        if name not in PROVIDERS:
            raise BadInput(f"providers.{name}", f"unknown provider; the route has {', '.join(PROVIDERS)}")
        if spec == ABSENT:
            if name == PROVIDERS[0]:
                raise BadInput(f"providers.{name}", "a is the route's primary and cannot be absent; give it replies")
            absent.add(name)
            continue
        checked[name] = _provider(f"providers.{name}", spec)
    try:
        scenario = Scenario.from_dict(checked)
    except ValueError as exc:  # everything was checked field by field; this is a last line of defence
        raise BadInput("providers", str(exc)) from None
    return CustomScenario(scenario=scenario, stream=stream, source=source, absent=frozenset(absent))


def parse_custom_text(text: str) -> CustomScenario:
    return parse_custom(load_text(text), source=text)


def _provider(field: str, spec: Any) -> Any:
    """One provider entry, checked item by item so an error names the exact field."""
    if isinstance(spec, str) or (isinstance(spec, Mapping) and not set(spec) & set(_PLAN_KEYS)):
        _reply(field, spec)
        return spec
    if isinstance(spec, list):
        _replies(field, spec)
        return spec
    if not isinstance(spec, Mapping):
        raise BadInput(
            field, f"must be a reply, a list of replies or a mapping with replies/default; got {_kind(spec)}"
        )
    for key in spec:
        if key not in _PLAN_KEYS:
            raise BadInput(f"{field}.{key}", f"unknown key; a provider has {', '.join(_PLAN_KEYS)}")
    if "replies" in spec:
        if not isinstance(spec["replies"], list):
            raise BadInput(f"{field}.replies", f"must be a list of replies, got {_kind(spec['replies'])}")
        _replies(f"{field}.replies", spec["replies"])
    if "default" in spec:
        _reply(f"{field}.default", spec["default"])
    for key in ("latency", "connect"):
        if key in spec:
            _seconds(f"{field}.{key}", spec[key])
    return dict(spec)


def _replies(field: str, replies: list[Any]) -> None:
    if len(replies) > MAX_REPLIES:
        raise BadInput(field, f"has {len(replies)} replies; at most {MAX_REPLIES} (use 'default' for the rest)")
    for i, r in enumerate(replies):
        _reply(f"{field}[{i}]", r)


def _reply(field: str, spec: Any) -> Reply:
    if not isinstance(spec, str | Mapping):
        raise BadInput(field, f"must be a reply string or mapping, got {_kind(spec)}; {_FIX_REPLY}")
    try:
        reply = Reply.parse(spec, where="reply")
    except (ValueError, TypeError, RecursionError) as exc:
        message = str(exc).removeprefix("reply: ")
        raise BadInput(field, f"{message}; {_FIX_REPLY}") from None
    for name in ("latency", "seconds", "retry_after", "chunk_interval"):
        value = getattr(reply, name)
        if isinstance(value, int | float) and value > MAX_SECONDS:
            raise BadInput(field, f"{name}={value:g} is too long for the lab; use at most {MAX_SECONDS:g} seconds")
    return reply


def _seconds(field: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadInput(field, f"must be a number of seconds, got {value!r}")
    if not 0 <= value <= MAX_SECONDS:
        raise BadInput(field, f"must be from 0 to {MAX_SECONDS:g} seconds, got {value!r}")


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60


def _kind(value: Any) -> str:
    """What was given, briefly (bounded: reprlib cuts long and deep values)."""
    return "nothing" if value is None else f"a {type(value).__name__} ({_SHORT.repr(value)})"


EXAMPLE = """\
# What A, B and C answer, call after call (the fault kit's vocabulary: docs/testing.md).
stream: true          # streamed attempts: connect / first token / body segments
providers:
  a:
    connect: 0.05
    replies:
      - rate_limit(retry_after=0.3, latency=0.05)
      - stall_before_first(5)
  b:
    connect: 0.08
    default: ok(latency=0.25, chunk_interval=0.05)
  c: ok(latency=0.3)
"""

__all__ = [
    "ABSENT",
    "EXAMPLE",
    "PROVIDERS",
    "BadInput",
    "CustomScenario",
    "load_text",
    "parse_custom",
    "parse_custom_text",
]
