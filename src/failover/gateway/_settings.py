"""Gateway settings: tenants and their hashed keys, the admin key, limits, CORS, envelope defaults.

They live in the same YAML file as the routes, under a ``gateway:`` section. Its model
(``failover.config``) is validated with the rest of the file by every entry point; this
module turns it into the gateway's settings::

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
               max_head_bytes: 65536, max_headers: 100, keep_alive_s: 30, write_timeout_s: 30,
               max_tools: 2000, max_messages: 20000, max_blocks: 20000,
               max_embedding_inputs: 2048, max_embedding_values: 8388608}
      # client JSON Schemas also have limits: max_schema_bytes, max_schema_depth, max_schema_nodes,
      # max_schema_pattern_chars, max_schema_patterns, max_schema_pattern_bytes (see docs/gateway.md)
      cors: {allow_origins: ["https://app.example.com"]}

Keys are never stored in clear: the file holds their SHA-256, and a key read from the
environment (``key_env``) is hashed as soon as it is read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..config import (
    REQUEST_HEADERS,
    Config,
    CorsSpec,
    EnvelopeSpec,
    GatewaySpec,
    KeySpec,
    LedgerSpec,
    LimitsSpec,
    LogFormat,
    LoggingSpec,
    MetricsSpec,
    Period,
    Problems,
    ShutdownSpec,
    TenantSpec,
    check_gateway,
    load_config,
)
from ..model import ConfigError, SideEffectMode
from ..validation import DEFAULT_LIMITS, SchemaLimits


def hash_key(key: str) -> bytes:
    """The SHA-256 digest of an API key: what the gateway stores and compares."""
    return hashlib.sha256(key.encode("utf-8")).digest()


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
    # what one request may hold (counted on the parsed body, before any work proportional to it)
    max_tools: int = 2_000
    max_messages: int = 20_000
    max_blocks: int = 20_000
    max_embedding_inputs: int = 2_048
    max_embedding_values: int = 8_388_608  # inputs x dimensions: 2,048 vectors of 4,096
    cors_origins: tuple[str, ...] = ()
    cors_headers: tuple[str, ...] = ("authorization", "content-type", *REQUEST_HEADERS)
    metrics_enabled: bool = True
    metrics_require_admin_key: bool = True  # False: /metrics answers anyone (a scraper on a private network)
    log_format: LogFormat = "text"
    drain_seconds: float = 25.0  # at shutdown: how long in-flight requests may take before they are cut
    lab_enabled: bool = False  # /lab: the simulator page (no auth: off unless asked for)
    lab_live_keep: int | None = None  # /lab's live view of the last N requests (admin key); None: off
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


def settings_from_spec(spec: GatewaySpec | None, *, env: Mapping[str, str] | None = None) -> GatewaySettings:
    """GatewaySettings from a validated ``gateway:`` section (None: all defaults). Keys named
    by ``key_env`` are read from ``env`` and hashed at once."""
    env = os.environ if env is None else env
    spec = spec if spec is not None else GatewaySpec()
    tenants = []
    for name, t in spec.tenants.items():
        where = f"gateway.tenants.{name}"
        hashes = _hashes(where, t, env)
        if not hashes:
            raise ConfigError(where, "the tenant has no key", "list the sha256 of its key under key_sha256, or key_env")
        tenants.append(
            Tenant(
                name=name,
                key_hashes=hashes,
                routes=None if "*" in t.routes else frozenset(t.routes),
                rpm=t.rpm,
                tpm=t.tpm,
                budget_usd=t.budget_usd,
                budget_period=t.budget_period,
            )
        )
    e = spec.envelope
    live = spec.lab_live if spec.lab_live is not None and spec.lab_live.enabled else None
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
            max_pattern_bytes=spec.limits.max_schema_pattern_bytes,
        ),
        max_tools=spec.limits.max_tools,
        max_messages=spec.limits.max_messages,
        max_blocks=spec.limits.max_blocks,
        max_embedding_inputs=spec.limits.max_embedding_inputs,
        max_embedding_values=spec.limits.max_embedding_values,
        cors_origins=tuple(spec.cors.allow_origins),
        cors_headers=tuple(spec.cors.allow_headers),
        metrics_enabled=spec.metrics.enabled,
        metrics_require_admin_key=spec.metrics.require_admin_key,
        log_format=spec.logging.format,
        drain_seconds=spec.shutdown.drain_seconds,
        lab_enabled=spec.lab,
        lab_live_keep=live.keep if live is not None else None,
    )


def settings_from_dict(
    data: Any, *, routes: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None
) -> GatewaySettings:
    """Build GatewaySettings from the ``gateway:`` mapping alone (None: all defaults); a
    ConfigError lists every problem. ``routes``: the configured routes tenants may name."""
    env = os.environ if env is None else env
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError("gateway", "the gateway section is not a mapping", "give it keys such as tenants:, admin:")
    out = Problems()
    try:
        spec = GatewaySpec.model_validate(data)
    except ValidationError as exc:
        out.validation(exc, GatewaySpec, ("gateway",))
        raise ConfigError.of(out.errors) from None
    check_gateway(spec, None if routes is None else set(routes), env, False, out)
    if out.errors:
        raise ConfigError.of(out.errors)
    return settings_from_spec(spec, env=env)


def load_gateway_config(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> tuple[Config, GatewaySettings]:
    """Load one YAML file as ``failover serve`` does: the Config (every section checked, as
    ``load_config`` does) and the settings built from its ``gateway:`` and ``ledger:`` sections."""
    config = load_config(path, env=env)
    settings = settings_from_spec(config.gateway, env=env)
    return config, (settings if config.ledger is None else dataclasses.replace(settings, ledger=config.ledger))


__all__ = [
    "REQUEST_HEADERS",
    "CorsSpec",
    "EnvelopeDefaults",
    "EnvelopeSpec",
    "GatewaySettings",
    "GatewaySpec",
    "KeySpec",
    "LedgerSpec",
    "LogFormat",
    "LimitsSpec",
    "LoggingSpec",
    "MetricsSpec",
    "Period",
    "ShutdownSpec",
    "Tenant",
    "TenantSpec",
    "hash_key",
    "load_gateway_config",
    "settings_from_dict",
    "settings_from_spec",
]
