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
from failover.gateway._ledger import ledger_spec_from, open_ledger
from failover.gateway._settings import EnvelopeDefaults, load_gateway_config
from failover.inbound import WireError
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
        ({"backend": "sqlite", "pth": "x.db"}, "ledger.pth", "did you mean 'path'?"),
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
    with pytest.raises(WireError) as ei:  # answered as a 400 naming the header
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


def test_the_overload_grace_and_the_key_model_breakers_are_set_in_yaml(tmp_path: Path) -> None:
    base = "targets: {a: {dialect: openai, base_url: 'http://127.0.0.1:9/v1', model: m}}\n"
    base += "routes: {chat: {primary: [a]}}\n"
    cfg = tmp_path / "f.yaml"
    cfg.write_text(
        base + "breakers: {overload_grace: 4, overload_min_success: 0.2, min_calls: 6,"
        " key_model: {min_calls: 3, window_size: 5, open_duration: 60}}\n"
    )
    router = Router.from_config(load_config(cfg))
    board = router.breakers
    assert isinstance(board, BreakerBoard)
    assert (board.overload_grace, board.overload_min_success, board.config.min_calls) == (4.0, 0.2, 6)
    assert (board.key_config.min_calls, board.key_config.window_size, board.key_config.open_duration) == (3, 5, 60.0)
    cfg.write_text(base + "breakers: {min_calls: 6}\n")
    board = Router.from_config(load_config(cfg)).breakers
    assert isinstance(board, BreakerBoard) and board.key_config is board.config  # one setting for both
    for bad, field in (
        ("{overload_min_success: 0}", "breakers.overload_min_success"),
        ("{overload_grace: -1}", "breakers.overload_grace"),
        ("{key_model: {min_calls: 30, window_size: 10}}", "breakers.key_model"),
        ("{key_model: {overload_grace: 3}}", "breakers.key_model.overload_grace"),
    ):
        cfg.write_text(base + f"breakers: {bad}\n")
        with pytest.raises(ConfigError) as ei:
            load_config(cfg)
        assert ei.value.field == field, (bad, ei.value)


def test_the_retry_budget_scope_and_the_fallback_reserve_are_set_in_yaml(tmp_path: Path) -> None:
    base = "targets: {a: {dialect: openai, base_url: 'http://127.0.0.1:9/v1', model: m},"
    base += " b: {dialect: openai, base_url: 'http://127.0.0.1:9/v1', model: n}}\n"
    cfg = tmp_path / "f.yaml"
    cfg.write_text(base + "routes: {chat: {primary: [a], fallbacks: [b], fallback_reserve: 1.5}}\n")
    loaded = load_config(cfg)
    route = loaded.routes["chat"]
    assert (route.fallback_reserve, route.replay_timeouts) == (1.5, None)
    assert loaded.retry_budget.scope == "upstream"
    assert loaded.retry_budget.pool_of(loaded.targets["a"]) != loaded.retry_budget.pool_of(loaded.targets["b"])
    cfg.write_text(
        base + "routes: {chat: {primary: [a], fallbacks: [b], replay_timeouts: true}}\nretry_budget: {scope: global}\n"
    )
    loaded = load_config(cfg)
    assert (loaded.routes["chat"].fallback_reserve, loaded.routes["chat"].replay_timeouts) == (None, True)
    assert loaded.retry_budget.pool_of(loaded.targets["a"]) == loaded.retry_budget.pool_of(loaded.targets["b"])
    for bad, field in (
        ("routes: {chat: {primary: [a], fallback_reserve: -1}}\n", "routes.chat.fallback_reserve"),
        ("routes: {chat: {primary: [a]}}\nretry_budget: {scope: cluster}\n", "retry_budget.scope"),
    ):
        cfg.write_text(base + bad)
        with pytest.raises(ConfigError) as ei:
            load_config(cfg)
        assert ei.value.field == field, (bad, ei.value)
