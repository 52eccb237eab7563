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
from typing import Any

from pydantic import ValidationError

from ..config import LedgerSpec, Problems, check_ledger
from ..ledger import Ledger, LedgerStore, MemoryStore, SQLiteStore
from ..model import ConfigError


def ledger_spec_from(data: Any) -> LedgerSpec | None:
    """The ``ledger:`` mapping parsed (its structure: the URL variable is read when the
    ledger is opened), or None when the file has none; a ConfigError lists every problem."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ConfigError("ledger", "the ledger section is not a mapping", "give it keys such as backend: and url:")
    out = Problems()
    try:
        spec = LedgerSpec.model_validate(data)
    except ValidationError as exc:
        out.validation(exc, LedgerSpec, ("ledger",))
        raise ConfigError.of(out.errors) from None
    check_ledger(spec, {}, True, out)
    if out.errors:
        raise ConfigError.of(out.errors)
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
