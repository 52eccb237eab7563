"""The ``state:`` config section: parsing, errors naming the field, the router and gateway it builds."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from failover import ConfigError, Router
from failover.config import config_from_dict
from failover.gateway import create_app
from failover.gateway._settings import load_gateway_config
from failover.policy import BreakerBoard, LimiterBoard, RetryBudget, SharedLoadBoard
from failover.state import GuardedStore, RedisStore, SQLiteStore
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from tests._services import RedisServer
from tests.gateway._kit import ADMIN_KEY, Kit, chat_body

BASE: dict[str, Any] = {
    "targets": {"a": {"dialect": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "limits": {"rpm": 60}}},
    "routes": {"r": {"primary": ["a"]}},
}


def cfg(state: Any, env: dict[str, str] | None = None) -> Any:
    return config_from_dict({**BASE, "state": state}, env=env or {})


def test_memory_is_the_default_and_builds_nothing() -> None:
    c = config_from_dict(BASE, env={})
    assert c.state.backend == "memory"
    router = Router.from_config(c, transport=FakeNetwork())
    assert isinstance(router.breakers, BreakerBoard) and router.breakers.local and router.breakers.store is None
    assert router.limiters is not None and router.limiters.store is None
    assert not isinstance(router.load, SharedLoadBoard)


def test_redis_url_from_the_environment_never_shows() -> None:
    c = cfg(
        {"backend": "redis", "url_env": "FAILOVER_REDIS_URL", "timeout_ms": 20, "local_share": 0.25},
        env={"FAILOVER_REDIS_URL": "redis://:hunter2@10.0.0.5:6379/0"},
    )
    assert c.state.backend == "redis" and c.state.timeout == pytest.approx(0.02) and c.state.local_share == 0.25
    assert c.state.url is not None and c.state.url.reveal() == "redis://:hunter2@10.0.0.5:6379/0"
    assert "hunter2" not in repr(c) and "hunter2" not in repr(c.state)


@pytest.mark.parametrize(
    ("state", "env", "field", "words"),
    [
        ({"backend": "redis"}, {}, "state.url", "needs a server"),
        ({"backend": "redis", "url_env": "NOPE"}, {}, "state.url_env", "NOPE is not set"),
        ({"backend": "redis", "url": "http://x"}, {}, "state.url", "not a Redis URL"),
        ({"backend": "redis", "url": "redis://x", "url_env": "X"}, {"X": "redis://y"}, "state.url", "both"),
        ({"backend": "etcd"}, {}, "state.backend", ""),
        ({"backend": "sqlite", "local_share": 0}, {}, "state.local_share", ""),
        ({"backend": "sqlite", "timeout_ms": -1}, {}, "state.timeout_ms", ""),
        ({"backend": "sqlite", "pth": "x.db"}, {}, "state.pth", ""),
    ],
)
def test_bad_state_sections_name_the_field(state: dict[str, Any], env: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg(state, env)
    assert field in str(info.value) and words in str(info.value)
    assert "hunter2" not in str(info.value)


async def test_from_config_shares_breakers_limits_and_budget(tmp_path: Path, redis_server: RedisServer) -> None:
    router = Router.from_config(cfg({"backend": "sqlite", "path": str(tmp_path / "s.db")}), transport=FakeNetwork())
    assert isinstance(router.breakers, BreakerBoard) and not router.breakers.local
    store = router.breakers.store
    assert isinstance(store, GuardedStore) and isinstance(store.store, SQLiteStore)
    assert isinstance(router.limiters, LimiterBoard) and router.limiters.store is store
    assert isinstance(router.retry_budget, RetryBudget) and router.retry_budget.store is store
    assert isinstance(router.load, SharedLoadBoard) and router.load.store is store
    assert router.load.limiters is router.limiters
    await router.aclose()
    router = Router.from_config(
        cfg({"backend": "redis", "url": redis_server.url, "prefix": "cfg:"}), transport=FakeNetwork()
    )
    store = router.breakers.store  # type: ignore[union-attr]
    assert isinstance(store, GuardedStore) and isinstance(store.store, RedisStore) and store.timeout == 0.25
    await router.aclose()


async def test_serve_config_file_with_state_and_metrics(tmp_path: Path, redis_server: RedisServer) -> None:
    """What `failover serve --config` loads: the state section reaches the router and /metrics."""
    p = FakeProvider("a", "openai", Script.always(Reply.ok("hi")))
    doc = {
        "targets": {"a": {"dialect": "openai", "base_url": p.base_url, "model": "m", "limits": {"rpm": 600}}},
        "routes": {"chat": {"primary": ["a"]}},
        "state": {"backend": "redis", "url_env": "T_REDIS", "prefix": "serve:", "timeout_ms": 200},
    }
    path = tmp_path / "failover.yaml"
    path.write_text(yaml.safe_dump(doc))
    config, settings = load_gateway_config(path, env={"T_REDIS": redis_server.url})
    router = Router.from_config(config, transport=FakeNetwork(p))
    app = create_app(router, dataclasses.replace(settings, metrics_require_admin_key=False))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        r = await c.post("/v1/chat/completions", json=chat_body(route="chat"))
        assert r.status_code == 200, r.text
        text = (await c.get("/metrics")).text
    assert 'failover_state_backend_up{backend="redis"} 1.0' in text
    assert 'failover_state_fallbacks_total{backend="redis"} 0.0' in text
    await router.aclose()


async def test_metrics_show_memory_by_default() -> None:
    kit = Kit()
    app = create_app(kit.router, dataclasses.replace(kit.settings, metrics_require_admin_key=False))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        text = (await c.get("/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"})).text
    assert 'failover_state_backend_up{backend="memory"} 1.0' in text
