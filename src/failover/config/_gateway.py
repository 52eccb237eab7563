"""The shapes of the ``gateway:`` and ``ledger:`` sections, and their checks.

They are read by ``failover serve`` (:mod:`failover.gateway` builds its settings and the
ledger from them), but they are part of the one config file every entry point reads, so
``Router.from_config``, ``failover check-config``, ``capacity`` and ``replay`` validate them
too. That is why their models live here, below the gateway: validating a file must not need
the server stack installed.

::

    gateway:
      admin:
        key_sha256: [9f86d081884c7d65...]     # sha256 hex of the admin key; or key_env: FAILOVER_ADMIN_KEY
      tenants:
        acme:
          key_sha256: [2c26b46b68ffc68f...]   # one or more; or key_env: ACME_GATEWAY_KEY
          routes: [chat, support_triage_v3]   # omitted or ["*"]: every route
      envelope: {deadline_ms: 30000, max_attempts: 6, allow_fallback: true}
    ledger:
      backend: redis                          # sqlite | redis | postgres | memory
      url_env: FAILOVER_LEDGER_URL
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from ..model import SideEffectMode
from ..validation import DEFAULT_LIMITS
from ._problems import Problems
from ._yaml import Loc

REQUEST_HEADERS = (
    "x-failover-deadline-ms",
    "x-failover-max-attempts",
    "x-failover-max-cost",
    "x-failover-allow-fallback",
    "x-failover-side-effects",
    "x-failover-request-id",
    "x-failover-task-id",
    "x-failover-live-reasoning",
)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# The name of an environment variable, never its value: a key pasted here by mistake must not
# end up in an error message ("environment variable sk-... is not set").
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _hex_list(values: list[str]) -> list[str]:
    out = []
    for v in values:
        h = v.strip().lower()
        if not _HEX64.fullmatch(h):
            raise ValueError("each entry must be the 64-character hex SHA-256 of a key (sha256sum of the key)")
        out.append(h)
    return out


class KeySpec(_Strict):
    key_sha256: list[str] = []
    key_env: EnvName | None = None

    @field_validator("key_sha256")
    @classmethod
    def _hex(cls, digests: list[str]) -> list[str]:
        return _hex_list(digests)


Period = Literal["minute", "hour", "day", "week", "month"]
LogFormat = Literal["text", "json"]


class TenantSpec(KeySpec):
    routes: list[str] = ["*"]
    rpm: int | None = Field(None, ge=1)
    tpm: int | None = Field(None, ge=1)
    budget_usd: float | None = Field(None, gt=0)
    budget_period: Period = "day"


class EnvelopeSpec(_Strict):
    deadline_ms: int = Field(30_000, ge=1)
    max_deadline_ms: int = Field(600_000, ge=1)
    max_attempts: int = Field(6, ge=1, le=100)
    max_attempts_limit: int = Field(20, ge=1, le=100)
    max_cost: float | None = Field(None, gt=0)
    max_added_latency_ms: int | None = Field(None, ge=0)
    allow_failover: bool = True
    allow_fallback: bool = True
    side_effects: SideEffectMode = SideEffectMode.NONE


class LimitsSpec(_Strict):
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    max_json_depth: int = Field(64, ge=4, le=1000)
    body_timeout_s: float = Field(30.0, gt=0, le=3600)  # the whole body must arrive within this
    header_timeout_s: float = Field(10.0, gt=0, le=3600)  # request line + headers (failover serve)
    # failover serve's connections: the request head's size, idle keep-alive, a client that stops reading
    max_head_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)  # request line + headers: else 431
    max_headers: int = Field(100, ge=8, le=10_000)  # header lines in one request: else 431
    keep_alive_s: float = Field(30.0, gt=0, le=3600)  # an idle kept-alive connection is closed after this
    write_timeout_s: float = Field(30.0, gt=0, le=3600)  # a client that accepts no bytes this long is dropped
    # client JSON Schemas (response_format, tool parameters): checked before anything is compiled
    max_schema_bytes: int = Field(DEFAULT_LIMITS.max_bytes, ge=1024, le=64 * 1024 * 1024)
    max_schema_depth: int = Field(DEFAULT_LIMITS.max_depth, ge=2, le=1000)
    max_schema_nodes: int = Field(DEFAULT_LIMITS.max_nodes, ge=10, le=10_000_000)
    max_schema_pattern_chars: int = Field(DEFAULT_LIMITS.max_pattern_chars, ge=1, le=100_000)
    max_schema_patterns: int = Field(DEFAULT_LIMITS.max_patterns, ge=0, le=100_000)
    max_schema_pattern_bytes: int = Field(DEFAULT_LIMITS.max_pattern_bytes, ge=16 * 1024, le=1024 * 1024 * 1024)
    # what one request may hold, counted on the parsed body before any work proportional to it
    max_tools: int = Field(2_000, ge=1, le=1_000_000)  # tools (function and hosted) in one request
    max_messages: int = Field(20_000, ge=1, le=10_000_000)  # messages (Responses: input items)
    max_blocks: int = Field(20_000, ge=1, le=10_000_000)  # content blocks of all messages together
    max_embedding_inputs: int = Field(2_048, ge=1, le=1_000_000)  # texts in one /v1/embeddings request
    max_embedding_values: int = Field(8_388_608, ge=1024, le=1_000_000_000)  # inputs x dimensions asked for


class CorsSpec(_Strict):
    allow_origins: list[str] = []
    allow_headers: list[str] = ["authorization", "content-type", *REQUEST_HEADERS]


class MetricsSpec(_Strict):
    enabled: bool = True
    require_admin_key: bool = True


class LoggingSpec(_Strict):
    format: LogFormat = "text"


class ShutdownSpec(_Strict):
    drain_seconds: float = Field(25.0, ge=0, le=3600)


class LabLiveSpec(_Strict):
    """``gateway.lab_live``: the lab page also shows this gateway's own last requests (admin key).
    ``lab_live: true`` is short for ``{enabled: true}``."""

    enabled: bool = True
    keep: int = Field(200, ge=1, le=5000)  # the last N finished requests kept in memory


class GatewaySpec(_Strict):
    """The ``gateway:`` section (docs/gateway.md)."""

    admin: KeySpec = KeySpec()
    tenants: dict[str, TenantSpec] = {}
    envelope: EnvelopeSpec = EnvelopeSpec()
    limits: LimitsSpec = LimitsSpec()
    cors: CorsSpec = CorsSpec()
    metrics: MetricsSpec = MetricsSpec()
    logging: LoggingSpec = LoggingSpec()
    shutdown: ShutdownSpec = ShutdownSpec()
    lab: bool = False  # serve the lab page at /lab (open, CPU-using: for trusted networks)
    lab_live: LabLiveSpec | None = None  # and in it, the gateway's own last requests (admin key)

    @field_validator("lab_live", mode="before")
    @classmethod
    def _lab_live_flag(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value


class LedgerSpec(_Strict):
    """The ``ledger:`` section: the tool-execution ledger the gateway's Router reads (docs/deploy.md)."""

    backend: Literal["memory", "sqlite", "redis", "postgres"] = "sqlite"
    url: str | None = None
    url_env: EnvName | None = None
    path: str = "failover-ledger.db"
    prefix: str = Field("failover:ledger", min_length=1)
    table: str = Field("failover_ledger", min_length=1)
    timeout_ms: int = Field(500, gt=0)


def _env_set(name: str, env: Mapping[str, str]) -> bool:
    return bool(env.get(name, "").strip())


def check_gateway(
    spec: GatewaySpec, routes: Collection[str] | None, env: Mapping[str, str], offline: bool, out: Problems
) -> None:
    """The ``gateway:`` checks a model cannot express: every tenant has a key, the keys named
    by ``key_env`` are set (unless ``offline``), tenants name configured routes, defaults
    within their caps. ``routes`` None: not known (a routes section with errors)."""
    for name, t in spec.tenants.items():
        where: Loc = ("gateway", "tenants", name)
        if not t.key_sha256 and not t.key_env:
            out.error(where, "the tenant has no key", "list the sha256 of its key under key_sha256, or key_env")
        if routes is not None and "*" not in t.routes:
            for i, r in enumerate(t.routes):
                if r not in routes:
                    out.error(
                        (*where, "routes", i),
                        f"unknown route {r!r}",
                        f"use one of the configured routes ({', '.join(sorted(routes))}) or '*'",
                    )
    holders: list[tuple[Loc, KeySpec]] = [(("gateway", "admin"), spec.admin)]
    holders += [(("gateway", "tenants", n), t) for n, t in spec.tenants.items()]
    for where, keys in holders:
        if keys.key_env and not offline and not _env_set(keys.key_env, env):
            out.error(
                (*where, "key_env"),
                f"environment variable {keys.key_env} is not set",
                f"export {keys.key_env}=... before starting, or list the key's sha256 under key_sha256"
                " (check-config --offline checks the file without it)",
            )
    e = spec.envelope
    if e.deadline_ms > e.max_deadline_ms:
        out.error(
            ("gateway", "envelope", "deadline_ms"), "exceeds max_deadline_ms", "lower it or raise max_deadline_ms"
        )
    if e.max_attempts > e.max_attempts_limit:
        out.error(
            ("gateway", "envelope", "max_attempts"),
            "exceeds max_attempts_limit",
            "lower it or raise max_attempts_limit",
        )
    if spec.lab_live is not None and spec.lab_live.enabled:
        if not spec.lab:
            out.error(
                ("gateway", "lab_live"),
                "the live view is part of the lab page, which is off",
                "set gateway.lab: true as well (or remove gateway.lab_live)",
            )
        if not spec.admin.key_sha256 and not spec.admin.key_env:
            out.error(
                ("gateway", "lab_live"),
                "the live view needs an admin key: it shows every request's route, targets, timings and cost",
                "set gateway.admin.key_sha256 (the sha256 of a key) or gateway.admin.key_env",
            )


def check_ledger(spec: LedgerSpec, env: Mapping[str, str], offline: bool, out: Problems) -> None:
    """A redis or postgres ledger needs one URL, given directly or through a set variable."""
    if spec.url is not None and spec.url_env is not None:
        out.error(("ledger",), "both url and url_env are set", "keep one of them")
    elif spec.backend in ("redis", "postgres") and spec.url is None and spec.url_env is None:
        out.error(("ledger", "url"), f"the {spec.backend} ledger needs a URL", "set ledger.url or ledger.url_env")
    elif spec.url_env is not None and not offline and not _env_set(spec.url_env, env):
        out.error(
            ("ledger", "url_env"),
            f"environment variable {spec.url_env} is not set",
            f"export {spec.url_env}=redis://... (or postgresql://...) before starting"
            " (check-config --offline checks the file without it)",
        )
