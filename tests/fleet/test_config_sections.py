"""The config sections a fleet needs, in process (no servers): ``ledger:`` (with the
``x-failover-task-id`` header) and ``breakers:``.

test_fleet.py runs them against Redis; here: errors that name the field, the store each
ledger backend builds, the router failing closed when the ledger raises, and the breaker
tuning reaching the Router.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from failover import Envelope, FailureKind, Request, Route, Router, SideEffectMode, Unavailable
from failover.config import load_config
from failover.gateway._envelope import envelope_from
from failover.gateway._errors import ApiError
from failover.gateway._ledger import ledger_spec_from, open_ledger
from failover.gateway._settings import EnvelopeDefaults, load_gateway_config
from failover.ledger import Ledger, MemoryStore, SQLiteStore
from failover.model import ConfigError
from failover.policy import BreakerBoard, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script


def test_a_config_file_with_a_ledger_section_loads_it(tmp_path: Path) -> None:
    cfg = tmp_path / "f.yaml"
    cfg.write_text(
        "targets: {a: {dialect: openai, base_url: 'http://127.0.0.1:9/v1', model: m}}\n"
        "routes: {chat: {primary: [a]}}\n"
        f"ledger: {{backend: sqlite, path: '{tmp_path / 'l.db'}'}}\n"
    )
    _, settings = load_gateway_config(cfg)
    assert settings.ledger is not None and settings.ledger.backend == "sqlite"
    ledger = open_ledger(settings.ledger)
    assert ledger is not None and isinstance(ledger.store, SQLiteStore)


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"backend": "redis"}, "ledger.url", "needs a URL"),
        ({"backend": "redis", "url": "redis://x", "url_env": "X"}, "ledger", "both url and url_env"),
        ({"backend": "mongo"}, "ledger.backend", "memory"),
        ({"backend": "sqlite", "pth": "x.db"}, "ledger.pth", "docs/deploy.md"),
        ("redis", "ledger", "not a mapping"),
    ],
)
def test_a_bad_ledger_section_names_the_field(data: Any, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as ei:
        ledger_spec_from(data)
    assert ei.value.field == field
    assert words in str(ei.value)


def test_a_ledger_url_from_the_environment() -> None:
    spec = ledger_spec_from({"backend": "redis", "url_env": "LEDGER_URL", "prefix": "p"})
    with pytest.raises(ConfigError) as ei:
        open_ledger(spec, env={})
    assert ei.value.field == "ledger.url_env"
    ledger = open_ledger(spec, env={"LEDGER_URL": "redis://127.0.0.1:9/0"})  # nothing connects yet
    assert ledger is not None and type(ledger.store).__name__ == "RedisStore"
    assert open_ledger(None) is None
    memory = open_ledger(ledger_spec_from({"backend": "memory"}))
    assert memory is not None and isinstance(memory.store, MemoryStore)


def test_the_task_id_header_sets_the_envelope() -> None:
    env = envelope_from({"x-failover-task-id": "task-9"}, EnvelopeDefaults(), tenant=None)
    assert env.task_id == "task-9"
    assert envelope_from({}, EnvelopeDefaults(), tenant=None).task_id is None
    with pytest.raises(ApiError) as ei:
        envelope_from({"x-failover-task-id": "no spaces"}, EnvelopeDefaults(), tenant=None)
    assert ei.value.param == "x-failover-task-id"


class _DownStore(MemoryStore):
    async def records(self, operation_id: str) -> Any:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


async def test_an_unreadable_ledger_fails_the_request_closed() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("fine")))
    route = Route(name="r", primary=(a.target(),))
    router = Router(
        [route], transport=FakeNetwork(a), retry_budget=Unlimited(), breakers=NoBreakers(), ledger=Ledger(_DownStore())
    )
    env = Envelope(task_id="task-9", side_effects=SideEffectMode.WRITE_POSSIBLE)
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", Request.simple("hi"), env)
    assert ei.value.reason is FailureKind.SIDE_EFFECT_UNCERTAIN
    assert "ledger could not be read" in str(ei.value) and "task-9" in str(ei.value)
    assert a.calls == []
    # without a task nothing is read, so the same router answers
    assert (await router.complete("r", Request.simple("hi"), Envelope())).text == "fine"


def test_a_breakers_section_tunes_every_breaker(tmp_path: Path) -> None:
    base = "targets: {a: {dialect: openai, base_url: 'http://127.0.0.1:9/v1', model: m}}\n"
    base += "routes: {chat: {primary: [a]}}\n"
    cfg = tmp_path / "f.yaml"
    cfg.write_text(base + "breakers: {min_calls: 4, window_size: 10, open_duration: 2, half_open_probes: 3}\n")
    router = Router.from_config(load_config(cfg))
    assert isinstance(router.breakers, BreakerBoard)
    assert (router.breakers.config.min_calls, router.breakers.config.half_open_probes) == (4, 3)
    assert router.breakers.config.open_duration == 2.0
    cfg.write_text(base + "breakers: {min_calls: 30, window_size: 10}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(cfg)
    assert ei.value.field == "breakers" and "min_calls" in str(ei.value)
    cfg.write_text(base + "breakers: {half_open_probe: 3}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(cfg)
    assert ei.value.field == "breakers.half_open_probe"
