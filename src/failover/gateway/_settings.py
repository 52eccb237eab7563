"""Gateway settings: tenants and their hashed keys, the admin key, limits, CORS, envelope defaults.

They live in the same YAML file as the routes, under a ``gateway:`` section that this module
parses with its own pydantic model (the routes loader never sees it)::

    gateway:
      admin:
        key_sha256: [9f86d081884c7d65...]     # sha256 hex of the admin key; or key_env: FAILOVER_ADMIN_KEY
      tenants:
        acme:
          key_sha256: [2c26b46b68ffc68f...]   # one or more; or key_env: ACME_GATEWAY_KEY
          routes: [chat, support_triage_v3]   # omitted or ["*"]: every route
      envelope:                               # defaults; per-request x-failover-* headers may change them
        deadline_ms: 30000
        max_attempts: 6
        allow_fallback: true
      limits: {max_body_bytes: 10485760, max_json_depth: 64, body_timeout_s: 30, header_timeout_s: 10,
               max_head_bytes: 65536, max_headers: 100, keep_alive_s: 30, write_timeout_s: 30}
      # client JSON Schemas also have limits: max_schema_bytes, max_schema_depth, max_schema_nodes,
      # max_schema_pattern_chars, max_schema_patterns (see docs/contracts.md)
      cors: {allow_origins: ["https://app.example.com"]}

Keys are never stored in clear: the file holds their SHA-256, and a key read from the
environment (``key_env``) is hashed as soon as it is read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..config import Config, config_from_dict, read_yaml
from ..model import ConfigError, SideEffectMode
from ..validation import DEFAULT_LIMITS, SchemaLimits
from ._ledger import LedgerSpec, ledger_spec_from
from ._spec import validate_section

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


def hash_key(key: str) -> bytes:
    """The SHA-256 digest of an API key: what the gateway stores and compares."""
    return hashlib.sha256(key.encode("utf-8")).digest()


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
    key_env: str | None = None

    @field_validator("key_sha256")
    @classmethod
    def _hex(cls, v: list[str]) -> list[str]:
        return _hex_list(v)


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


class GatewaySpec(_Strict):
    admin: KeySpec = KeySpec()
    tenants: dict[str, TenantSpec] = {}
    envelope: EnvelopeSpec = EnvelopeSpec()
    limits: LimitsSpec = LimitsSpec()
    cors: CorsSpec = CorsSpec()
    metrics: MetricsSpec = MetricsSpec()
    logging: LoggingSpec = LoggingSpec()
    shutdown: ShutdownSpec = ShutdownSpec()
    lab: bool = False  # serve the lab page at /lab (open, CPU-using: for trusted networks)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvelopeDefaults:
    """What a request gets when it sends no ``x-failover-*`` header, and the caps on those headers."""

    deadline_ms: int = 30_000
    max_deadline_ms: int = 600_000
    max_attempts: int = 6
    max_attempts_limit: int = 20
    max_cost: float | None = None
    max_added_latency_ms: int | None = None
    allow_failover: bool = True
    allow_fallback: bool = True
    side_effects: SideEffectMode = SideEffectMode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """A caller of the gateway: its hashed keys, the routes it may use (None: all), its limits.

    ``rpm`` / ``tpm``: requests and tokens (input + output, as reported) per rolling minute;
    ``budget_usd``: USD per ``budget_period`` (calendar periods in UTC). None: unlimited.
    """

    name: str
    key_hashes: tuple[bytes, ...] = field(repr=False)
    routes: frozenset[str] | None = None
    rpm: int | None = None
    tpm: int | None = None
    budget_usd: float | None = None
    budget_period: Period = "day"

    def allows(self, route: str) -> bool:
        return self.routes is None or route in self.routes


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    """Everything the gateway needs besides the Router.

    With no ``tenants`` the gateway is OPEN: no key is checked, and it answers loopback
    clients only (and ``failover serve`` refuses to bind anything but loopback).
    """

    tenants: tuple[Tenant, ...] = ()
    admin_key_hashes: tuple[bytes, ...] = field(default=(), repr=False)
    envelope: EnvelopeDefaults = EnvelopeDefaults()
    max_body_bytes: int = 10 * 1024 * 1024
    max_json_depth: int = 64
    body_timeout_s: float = 30.0  # a slower body gets a 408 and its connection closed
    header_timeout_s: float = 10.0  # failover serve: a slower request head gets a 408, connection closed
    max_head_bytes: int = 64 * 1024  # failover serve: a longer request line + headers gets a 431, connection closed
    max_headers: int = 100  # failover serve: more header lines get a 431, connection closed
    keep_alive_s: float = 30.0  # failover serve: an idle kept-alive connection is closed after this
    write_timeout_s: float = 30.0  # failover serve: a client whose send buffer stays full this long is dropped
    schema_limits: SchemaLimits = DEFAULT_LIMITS  # client JSON Schemas: size, depth, values, pattern length
    cors_origins: tuple[str, ...] = ()
    cors_headers: tuple[str, ...] = ("authorization", "content-type", *REQUEST_HEADERS)
    metrics_enabled: bool = True
    metrics_require_admin_key: bool = True  # False: /metrics answers anyone (a scraper on a private network)
    log_format: LogFormat = "text"
    drain_seconds: float = 25.0  # at shutdown: how long in-flight requests may take before they are cut
    lab_enabled: bool = False  # /lab: the simulator page (no auth: off unless asked for)
    ledger: LedgerSpec | None = None  # the top-level ``ledger:`` section: the store the Router reads (workflow 3)

    @property
    def open(self) -> bool:
        return not self.tenants

    def tenant_for(self, key: str) -> Tenant | None:
        """The tenant owning ``key``; every stored hash is compared, in constant time each."""
        digest = hash_key(key)
        found: Tenant | None = None
        for tenant in self.tenants:
            for h in tenant.key_hashes:
                if hmac.compare_digest(digest, h) and found is None:
                    found = tenant
        return found

    def is_admin(self, key: str) -> bool:
        digest = hash_key(key)
        ok = False
        for h in self.admin_key_hashes:
            ok |= hmac.compare_digest(digest, h)
        return ok


def _hashes(field_name: str, spec: KeySpec, env: Mapping[str, str]) -> tuple[bytes, ...]:
    out = [bytes.fromhex(h) for h in spec.key_sha256]
    if spec.key_env:
        value = env.get(spec.key_env, "").strip()
        if not value:
            raise ConfigError(
                f"{field_name}.key_env",
                f"environment variable {spec.key_env} is not set",
                f"export {spec.key_env}=... before starting, or list the key's sha256 under key_sha256",
            )
        out.append(hash_key(value))
    return tuple(out)


def settings_from_dict(
    data: Any, *, routes: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None
) -> GatewaySettings:
    """Build GatewaySettings from the ``gateway:`` mapping (None: all defaults)."""
    env = os.environ if env is None else env
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError("gateway", "the gateway section is not a mapping", "give it keys such as tenants:, admin:")
    spec = validate_section(GatewaySpec, data, "gateway", "docs/gateway.md")
    tenants = []
    for name, t in spec.tenants.items():
        where = f"gateway.tenants.{name}"
        hashes = _hashes(where, t, env)
        if not hashes:
            raise ConfigError(where, "the tenant has no key", "list the sha256 of its key under key_sha256, or key_env")
        allowed: frozenset[str] | None = None if "*" in t.routes else frozenset(t.routes)
        if routes is not None and allowed is not None:
            for i, r in enumerate(t.routes):
                if r not in routes:
                    raise ConfigError(
                        f"{where}.routes[{i}]",
                        f"unknown route {r!r}",
                        f"use one of the configured routes ({', '.join(sorted(routes))}) or '*'",
                    )
        tenants.append(
            Tenant(
                name=name,
                key_hashes=hashes,
                routes=allowed,
                rpm=t.rpm,
                tpm=t.tpm,
                budget_usd=t.budget_usd,
                budget_period=t.budget_period,
            )
        )
    e = spec.envelope
    if e.deadline_ms > e.max_deadline_ms:
        raise ConfigError(
            "gateway.envelope.deadline_ms", "exceeds max_deadline_ms", "lower it or raise max_deadline_ms"
        )
    if e.max_attempts > e.max_attempts_limit:
        raise ConfigError(
            "gateway.envelope.max_attempts", "exceeds max_attempts_limit", "lower it or raise max_attempts_limit"
        )
    return GatewaySettings(
        tenants=tuple(tenants),
        admin_key_hashes=_hashes("gateway.admin", spec.admin, env),
        envelope=EnvelopeDefaults(**e.model_dump()),
        max_body_bytes=spec.limits.max_body_bytes,
        max_json_depth=spec.limits.max_json_depth,
        body_timeout_s=spec.limits.body_timeout_s,
        header_timeout_s=spec.limits.header_timeout_s,
        max_head_bytes=spec.limits.max_head_bytes,
        max_headers=spec.limits.max_headers,
        keep_alive_s=spec.limits.keep_alive_s,
        write_timeout_s=spec.limits.write_timeout_s,
        schema_limits=SchemaLimits(
            max_bytes=spec.limits.max_schema_bytes,
            max_depth=spec.limits.max_schema_depth,
            max_nodes=spec.limits.max_schema_nodes,
            max_pattern_chars=spec.limits.max_schema_pattern_chars,
            max_patterns=spec.limits.max_schema_patterns,
        ),
        cors_origins=tuple(spec.cors.allow_origins),
        cors_headers=tuple(spec.cors.allow_headers),
        metrics_enabled=spec.metrics.enabled,
        metrics_require_admin_key=spec.metrics.require_admin_key,
        log_format=spec.logging.format,
        drain_seconds=spec.shutdown.drain_seconds,
        lab_enabled=spec.lab,
    )


def load_gateway_config(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> tuple[Config, GatewaySettings]:
    """Load one YAML file: routes and targets (as ``load_config`` would) plus its ``gateway:`` section."""
    data = read_yaml(path)
    if not isinstance(data, Mapping):
        raise ConfigError("(top level)", "the configuration is not a mapping", "start with `targets:` and `routes:`")
    rest = {k: v for k, v in data.items() if k not in ("gateway", "ledger")}
    config = config_from_dict(rest, env=env)
    settings = settings_from_dict(data.get("gateway"), routes=config.routes, env=env)
    ledger = ledger_spec_from(data.get("ledger"))
    return config, (settings if ledger is None else dataclasses.replace(settings, ledger=ledger))
