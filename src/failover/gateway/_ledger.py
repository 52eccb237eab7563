"""The ``ledger:`` section of a gateway config: which tool-execution ledger the Router reads.

The gateway never runs tools; the application does, through its own ``Ledger``. What the
gateway needs is to *read* the same ledger, so a request of an agent task
(``x-failover-task-id``) whose side-effecting tool may have run is never replayed, failed
over or handed to another model (workflow 3, docs/side-effects.md). Point it at the store
your agents write to::

    ledger:
      backend: redis                    # sqlite | redis | postgres | memory
      url: redis://redis:6379/0         # or url_env: FAILOVER_LEDGER_URL (redis, postgres)
      prefix: "failover:ledger"         # redis: the agents' RedisStore prefix
      path: ledger.db                   # sqlite: the agents' file
      timeout_ms: 500                   # redis: per-call socket timeout

When the store cannot be read the request fails closed (``side_effect_uncertain``): a
ledger outage never turns into a silent replay.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..ledger import Ledger, LedgerStore, MemoryStore, SQLiteStore
from ..model import ConfigError
from ._spec import validate_section


class LedgerSpec(BaseModel):
    """The parsed ``ledger:`` section (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["memory", "sqlite", "redis", "postgres"] = "sqlite"
    url: str | None = None
    url_env: str | None = None
    path: str = "failover-ledger.db"
    prefix: str = Field("failover:ledger", min_length=1)
    table: str = Field("failover_ledger", min_length=1)
    timeout_ms: int = Field(500, gt=0)


def ledger_spec_from(data: Any) -> LedgerSpec | None:
    """The ``ledger:`` mapping parsed, or None when the file has none."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ConfigError("ledger", "the ledger section is not a mapping", "give it keys such as backend: and url:")
    spec = validate_section(LedgerSpec, data, "ledger", "docs/deploy.md")
    if spec.backend in ("redis", "postgres") and spec.url is None and spec.url_env is None:
        raise ConfigError("ledger.url", f"the {spec.backend} ledger needs a URL", "set ledger.url or ledger.url_env")
    if spec.url is not None and spec.url_env is not None:
        raise ConfigError("ledger", "both url and url_env are set", "keep one of them")
    return spec


def _url(spec: LedgerSpec, env: Mapping[str, str]) -> str:
    if spec.url is not None:
        return spec.url
    value = env.get(spec.url_env or "", "").strip()
    if not value:
        raise ConfigError(
            "ledger.url_env", f"environment variable {spec.url_env} is not set", f"export {spec.url_env}=redis://..."
        )
    return value


def open_ledger(spec: LedgerSpec | None, *, env: Mapping[str, str] | None = None) -> Ledger | None:
    """The Ledger the Router reads, or None without a ``ledger:`` section.

    Clients are created lazily by their drivers: nothing connects until the first request
    of a task, so a store that is down at start-up does not keep the gateway from serving
    requests that do not need it.
    """
    if spec is None:
        return None
    env = os.environ if env is None else env
    store: LedgerStore
    if spec.backend == "memory":
        store = MemoryStore()
    elif spec.backend == "sqlite":
        store = SQLiteStore(spec.path)
    elif spec.backend == "redis":
        import redis.asyncio as aioredis

        from ..ledger import RedisStore

        seconds = spec.timeout_ms / 1000.0
        client = aioredis.Redis.from_url(_url(spec, env), socket_timeout=seconds, socket_connect_timeout=seconds)
        store = RedisStore(client, prefix=spec.prefix)
    else:
        from ..ledger import PostgresStore

        store = PostgresStore(_url(spec, env), table=spec.table)
    return Ledger(store)
