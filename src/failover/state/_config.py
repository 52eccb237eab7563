"""The ``state:`` section of the config file, and the store it builds.

::

    state:
      backend: redis                    # memory (default) | sqlite | redis
      url_env: FAILOVER_REDIS_URL       # or url: redis://127.0.0.1:6379/0 (never logged)
      path: failover-state.db           # sqlite
      prefix: "failover:"
      timeout_ms: 250                   # above Redis p99 AND a busy worker's event-loop lag
      local_share: 0.25                 # share of a fleet-wide quota per process while Redis is down
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..model import ConfigError, Secret
from ._guard import GuardedStore
from ._types import StateStore

Backend = Literal["memory", "sqlite", "redis"]


class StateSpec(BaseModel):
    """The YAML shape (validated by config/_load.py with the rest of the file)."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = "memory"
    url: str | None = None
    url_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # a name: never the URL itself
    path: str = "failover-state.db"
    prefix: str = Field("failover:", min_length=1)
    # 250, not 50: the timer counts until the reply is *handled*, and a saturated worker's loop
    # handles it late although Redis answered in 1 ms (bench/fleet.py: at 50 ms the busy
    # process kept falling back to local state). An outage costs one timeout, then fails fast.
    timeout_ms: float = Field(250.0, gt=0)
    local_share: float = Field(0.5, gt=0, le=1)
    lease_seconds: float = Field(300.0, gt=0)  # a crashed process's concurrency slots come back after this


@dataclass(frozen=True, slots=True, kw_only=True)
class StateConfig:
    """Where shared state lives. ``backend="memory"`` (the default) keeps it in the process."""

    backend: Backend = "memory"
    url: Secret | None = None  # redis: may hold a password, so it never shows in a repr
    path: str = "failover-state.db"
    prefix: str = "failover:"
    timeout: float = 0.25  # seconds per call to the backend (see StateSpec.timeout_ms)
    local_share: float = 0.5
    lease: float = 300.0

    def build(self) -> GuardedStore | None:
        """The guarded store for this config; None for memory (policy objects keep state inline)."""
        store: StateStore
        if self.backend == "memory":
            return None
        if self.backend == "sqlite":
            from ._local import SQLiteStore

            store = SQLiteStore(self.path, prefix=self.prefix)
            # SQLite waits on the file lock rather than the network: a looser bound.
            return GuardedStore(store, timeout=max(self.timeout, 1.0), local_share=self.local_share)
        if self.url is None:  # pragma: no cover - state_config() refuses it
            raise ConfigError("state.url", "the redis backend needs a URL", "set state.url or state.url_env")
        try:
            from ._redis import RedisStore
        except ImportError:
            raise ConfigError(
                "state.backend", "redis needs the redis package", "pip install 'failover[redis]'"
            ) from None
        store = RedisStore(self.url.reveal(), prefix=self.prefix, timeout=self.timeout)
        return GuardedStore(store, timeout=self.timeout, local_share=self.local_share)


def state_config(spec: StateSpec, env: Mapping[str, str] | None = None) -> StateConfig:
    """Resolve the spec (the URL from the environment) into a StateConfig; errors name the field."""
    env = os.environ if env is None else env
    url: Secret | None = None
    if spec.backend == "redis":
        if spec.url and spec.url_env:
            raise ConfigError("state.url", "both url and url_env are set", "keep one of them")
        if spec.url_env:
            value = env.get(spec.url_env)
            if not value:
                raise ConfigError(
                    "state.url_env", f"environment variable {spec.url_env} is not set", "export it, or set state.url"
                )
            url = Secret(value)
        elif spec.url:
            url = Secret(spec.url)
        else:
            raise ConfigError(
                "state.url", "backend redis needs a server", "set state.url_env: FAILOVER_REDIS_URL (or state.url)"
            )
        if not url.reveal().startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError("state.url", "not a Redis URL", "use redis://host:6379/0, rediss://... or unix://...")
    return StateConfig(
        backend=spec.backend,
        url=url,
        path=spec.path,
        prefix=spec.prefix,
        timeout=spec.timeout_ms / 1000.0,
        local_share=spec.local_share,
        lease=spec.lease_seconds,
    )
