"""Loading routes and targets from YAML, with errors that name the field and the fix.

::

    targets:
      gpt-4o:
        dialect: openai
        base_url: https://api.openai.com/v1
        model: gpt-4o
        api_key_env: OPENAI_API_KEY       # or api_key_file: /run/secrets/openai
        capabilities: [chat, vision, tools, structured_output]
        context_window: 128000
        price: {input_per_mtok: 2.5, output_per_mtok: 10}
        timeouts: {connect: 5, total: 60}
        max_attempts: 3
    routes:
      triage:
        contract: {capabilities: [chat, structured_output], min_context: 24000}
        primary: [gpt-4o]
        fallbacks: [claude-sonnet, claude-new]
        canary: {claude-new: 0.1}         # on probation: 10% of eligible failures may use it

Credentials come only from the environment or secret files, never from the file itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..model import (
    Capability,
    ConfigError,
    Contract,
    Dialect,
    Limits,
    Price,
    Route,
    Secret,
    Target,
    Timeouts,
)
from ..policy import Backoff, BreakerConfig, BreakerSettings, RetryBudget
from ..state import StateConfig, StateSpec, state_config
from ..transport import Http1Transport
from ..transport._limits import DEFAULT_MAX_DECODED_RATIO, DEFAULT_MAX_RESPONSE_BYTES
from ..validation import check_contract


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PriceSpec(_Strict):
    input_per_mtok: float = Field(0.0, ge=0)
    output_per_mtok: float = Field(0.0, ge=0)


class LimitsSpec(_Strict):
    rpm: int | None = Field(None, gt=0)
    input_tpm: int | None = Field(None, gt=0)
    output_tpm: int | None = Field(None, gt=0)
    concurrency: int | None = Field(None, gt=0)


class TimeoutsSpec(_Strict):
    connect: float = Field(5.0, gt=0)
    first_event: float = Field(30.0, gt=0)
    idle: float = Field(30.0, gt=0)
    total: float = Field(60.0, gt=0)
    min_useful: float = Field(0.05, ge=0)


class TargetSpec(_Strict):
    dialect: Dialect
    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    api_key_file: str | None = None
    region: str | None = None
    retention: list[str] = []
    safety_profiles: list[str] = []
    languages: list[str] = []
    capabilities: list[Capability] = [Capability.CHAT]
    context_window: int = Field(128_000, gt=0)
    max_output_tokens: int = Field(4_096, gt=0)
    price: PriceSpec = PriceSpec()
    limits: LimitsSpec = LimitsSpec()
    timeouts: TimeoutsSpec = TimeoutsSpec()
    max_attempts: int = Field(2, ge=1, le=10)
    output_tps: float = Field(50.0, gt=0)
    equivalence_key: str | None = None
    tokenizer: str | None = None
    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    azure_deployment: bool = False

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")


class ContractSpec(_Strict):
    capabilities: list[Capability] = [Capability.CHAT]
    min_context: int = Field(0, ge=0)
    regions: list[str] = []
    retention: list[str] = []
    safety_profile: str | None = None
    languages: list[str] = []
    schema_id: str | None = None
    schema_version: str | None = None
    max_output_chars: int | None = Field(None, gt=0)
    min_output_chars: int | None = Field(None, ge=0)
    output_languages: list[str] = []
    forbidden_patterns: list[str] = []
    no_tool_calls: bool = False
    required_fields: list[str] = []


class RouteSpec(_Strict):
    contract: ContractSpec = ContractSpec()
    primary: list[str] = Field(min_length=1)
    fallbacks: list[str] = []
    ranking: Literal["order", "health", "latency", "cost"] = "order"
    hedge_after: float | None = Field(None, gt=0)
    # fallbacks on probation: target name -> share of eligible failures that may use it
    canary: dict[str, float] = {}
    # seconds a replay must leave to the next eligible candidate; None: its expected latency
    fallback_reserve: float | None = Field(None, ge=0)
    replay_timeouts: bool | None = None  # None: only with an explicit fallback_reserve


class BudgetSpec(_Strict):
    ratio: float = Field(0.1, ge=0)
    floor: int = Field(10, ge=0)
    window: float = Field(10.0, gt=0)
    scope: Literal["upstream", "global"] = "upstream"  # one budget per endpoint + model, or one for all


class BackoffSpec(_Strict):
    base: float = Field(0.5, ge=0)
    cap: float = Field(30.0, ge=0)
    max_retry_after: float = Field(60.0, ge=0)


class KeyBreakerSpec(_Strict):
    """``breakers.key_model:``: the BreakerConfig of the key + model breakers (429s, quotas)."""

    window_kind: Literal["count", "time"] = "count"
    window_size: int = Field(20, ge=1)
    window_seconds: int = Field(60, ge=1)
    min_calls: int = Field(10, ge=1)
    failure_rate: float = Field(0.5, gt=0, le=1)
    slow_call_rate: float = Field(1.0, gt=0, le=1)
    slow_call_duration: float = Field(30.0, gt=0)
    open_duration: float = Field(30.0, gt=0)
    open_duration_growth: float = Field(2.0, ge=1)
    max_open_duration: float = Field(300.0, gt=0)
    half_open_probes: int = Field(2, ge=1)
    probe_successes_to_close: int | None = Field(None, ge=1)


class BreakerSpec(KeyBreakerSpec):
    """``breakers:``: every target's breakers (docs/health.md has the meaning): the BreakerConfig
    fields, the overload grace, and optionally a different ``key_model`` breaker."""

    overload_grace: float = Field(10.0, ge=0)
    overload_min_success: float = Field(0.05, gt=0, le=1)
    key_model: KeyBreakerSpec | None = None  # None: the same settings as the target breakers


class UpstreamSpec(_Strict):
    """``upstream:``: the default transport's pool and the limits on what one answer may take."""

    max_response_bytes: int = Field(DEFAULT_MAX_RESPONSE_BYTES, ge=1024)
    max_decoded_ratio: int = Field(DEFAULT_MAX_DECODED_RATIO, ge=1)
    keepalive_s: float = Field(15.0, gt=0)
    max_connections: int = Field(200, ge=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamSettings:
    """The ``upstream:`` section: builds the Router's ``Http1Transport`` when none is passed."""

    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_decoded_ratio: int = DEFAULT_MAX_DECODED_RATIO
    keepalive_s: float = 15.0
    max_connections: int = 200

    def transport(self) -> Http1Transport:
        return Http1Transport(
            max_connections=self.max_connections,
            keepalive_s=self.keepalive_s,
            max_response_bytes=self.max_response_bytes,
            max_decoded_ratio=self.max_decoded_ratio,
        )


class ConfigSpec(_Strict):
    targets: dict[str, TargetSpec] = Field(min_length=1)
    routes: dict[str, RouteSpec] = Field(min_length=1)
    retry_budget: BudgetSpec = BudgetSpec()
    backoff: BackoffSpec = BackoffSpec()
    state: StateSpec = StateSpec()  # where breakers, buckets and the retry budget live (failover.state)
    breakers: BreakerSpec | None = None  # None: BreakerConfig() defaults
    upstream: UpstreamSpec | None = None  # None: Http1Transport() defaults


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """A loaded configuration: routes (with their targets) and the shared policies."""

    routes: Mapping[str, Route]
    targets: Mapping[str, Target]
    retry_budget: RetryBudget
    backoff: Backoff
    state: StateConfig = field(default_factory=StateConfig)  # memory unless the file has a `state:` section
    breakers: BreakerSettings | None = None  # the file's `breakers:` tuning (None: the defaults)
    upstream: UpstreamSettings | None = None  # the file's `upstream:` section (None: the defaults)


def _fix_for(err_type: str, loc: str) -> str:
    return {
        "extra_forbidden": "remove it, or check its spelling against docs/config.md",
        "missing": "add it",
        "enum": "use one of the values listed",
        "literal_error": "use one of the values listed",
        "too_short": "list at least one entry",
    }.get(err_type, f"correct the value of {loc}")


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _secret(field: str, spec: TargetSpec, env: Mapping[str, str]) -> tuple[Secret | None, str | None]:
    if spec.api_key_env and spec.api_key_file:
        raise ConfigError(field, "both api_key_env and api_key_file are set", "keep one of them")
    if spec.api_key_env:
        value = env.get(spec.api_key_env)
        if not value:
            raise ConfigError(
                f"{field}.api_key_env",
                f"environment variable {spec.api_key_env} is not set",
                f"export {spec.api_key_env}=... before starting, or use api_key_file",
            )
        return Secret(value.strip()), f"env:{spec.api_key_env}"
    if spec.api_key_file:
        path = Path(spec.api_key_file)
        try:
            value = path.read_text().strip()
        except OSError as exc:
            raise ConfigError(
                f"{field}.api_key_file", f"cannot read {path}: {exc.strerror}", "point it at a readable file"
            ) from None
        if not value:
            raise ConfigError(f"{field}.api_key_file", f"{path} is empty", "put the key in the file")
        return Secret(value), f"file:{path}"
    return None, None


def _target(name: str, spec: TargetSpec, env: Mapping[str, str]) -> Target:
    key, credential = _secret(f"targets.{name}", spec, env)
    return Target(
        name=name,
        dialect=spec.dialect,
        model=spec.model,
        base_url=spec.base_url,
        api_key=key,
        credential=credential,
        region=spec.region,
        retention=frozenset(spec.retention),
        safety_profiles=frozenset(spec.safety_profiles),
        languages=frozenset(spec.languages),
        capabilities=frozenset(spec.capabilities),
        context_window=spec.context_window,
        max_output_tokens=spec.max_output_tokens,
        price=Price(**spec.price.model_dump()),
        limits=Limits(**spec.limits.model_dump()),
        timeouts=Timeouts(**spec.timeouts.model_dump()),
        max_attempts=spec.max_attempts,
        output_tps=spec.output_tps,
        equivalence_key=spec.equivalence_key,
        tokenizer=spec.tokenizer,
        headers=tuple(spec.headers.items()),
        query=tuple(spec.query.items()),
        azure_deployment=spec.azure_deployment,
    )


def config_from_dict(data: Any, *, env: Mapping[str, str] | None = None) -> Config:
    """Build a Config from already-parsed data (a dict as YAML would give)."""
    env = os.environ if env is None else env
    if not isinstance(data, Mapping):
        raise ConfigError("(top level)", "the configuration is not a mapping", "start with `targets:` and `routes:`")
    try:
        spec = ConfigSpec.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        first = errs[0]
        loc = _dotted(tuple(first["loc"]))
        msg = first["msg"]
        more = (
            f" (and {len(errs) - 1} more: "
            + "; ".join(f"{_dotted(tuple(e['loc']))}: {e['msg']}" for e in errs[1:6])
            + ")"
            if len(errs) > 1
            else ""
        )
        raise ConfigError(loc or "(top level)", msg + more, _fix_for(first["type"], loc)) from None

    targets = {name: _target(name, t, env) for name, t in spec.targets.items()}
    known = ", ".join(sorted(targets))
    routes: dict[str, Route] = {}
    for rname, r in spec.routes.items():
        seen: set[str] = set()
        resolved: dict[str, list[Target]] = {"primary": [], "fallbacks": []}
        for group in ("primary", "fallbacks"):
            for i, tname in enumerate(getattr(r, group)):
                field = f"routes.{rname}.{group}[{i}]"
                if tname not in targets:
                    raise ConfigError(field, f"unknown target {tname!r}", f"define it under targets (known: {known})")
                if tname in seen:
                    raise ConfigError(field, f"target {tname!r} is listed twice", "list each target once per route")
                seen.add(tname)
                resolved[group].append(targets[tname])
        keys = {t.key for t in resolved["primary"]}
        if len(keys) > 1:
            raise ConfigError(
                f"routes.{rname}.primary",
                "primary targets must be equivalent (same equivalence_key), got " + ", ".join(sorted(keys)),
                "give them one equivalence_key, or move the other models to fallbacks",
            )
        fallback_names = [t.name for t in resolved["fallbacks"]]
        for tname, share in r.canary.items():
            field = f"routes.{rname}.canary.{tname}"
            if tname not in fallback_names:
                where = "a primary target" if tname in seen else "not a target of this route"
                raise ConfigError(
                    field,
                    f"{tname!r} is {where}; only fallbacks can be on canary",
                    f"list it under routes.{rname}.fallbacks first"
                    + (f" (fallbacks: {', '.join(fallback_names)})" if fallback_names else ""),
                )
            if not 0.0 < share <= 1.0:  # also rejects NaN
                raise ConfigError(
                    field,
                    f"share {share!r} is outside (0, 1]",
                    "give the share of eligible failures that may use it, e.g. 0.1 for 10% (1: fully enabled)",
                )
        c = r.contract
        contract = Contract(
            capabilities=frozenset(c.capabilities),
            min_context=c.min_context,
            regions=frozenset(c.regions),
            retention=frozenset(c.retention),
            safety_profile=c.safety_profile,
            languages=frozenset(c.languages),
            schema_id=c.schema_id,
            schema_version=c.schema_version,
            max_output_chars=c.max_output_chars,
            min_output_chars=c.min_output_chars,
            output_languages=frozenset(c.output_languages),
            forbidden_patterns=tuple(c.forbidden_patterns),
            no_tool_calls=c.no_tool_calls,
            required_fields=tuple(c.required_fields),
        )
        try:
            check_contract(contract)
        except ValueError as exc:
            raise ConfigError(f"routes.{rname}.contract", str(exc), "correct the value it names") from None
        routes[rname] = Route(
            name=rname,
            contract=contract,
            primary=tuple(resolved["primary"]),
            fallbacks=tuple(resolved["fallbacks"]),
            ranking=r.ranking,
            hedge_after=r.hedge_after,
            canary=tuple(r.canary.items()),
            fallback_reserve=r.fallback_reserve,
            replay_timeouts=r.replay_timeouts,
        )
    breakers: BreakerSettings | None = None
    if spec.breakers is not None:
        b = spec.breakers
        fields = b.model_dump(exclude={"overload_grace", "overload_min_success", "key_model"})
        try:
            config = BreakerConfig(**fields)
        except ValueError as exc:
            raise ConfigError("breakers", str(exc), "correct the values it names (docs/health.md)") from None
        key_config = None
        if b.key_model is not None:
            try:
                key_config = BreakerConfig(**b.key_model.model_dump())
            except ValueError as exc:
                raise ConfigError(
                    "breakers.key_model", str(exc), "correct the values it names (docs/health.md)"
                ) from None
        breakers = BreakerSettings(
            config=config,
            key_config=key_config,
            overload_grace=b.overload_grace,
            overload_min_success=b.overload_min_success,
        )
    return Config(
        routes=routes,
        targets=targets,
        breakers=breakers,
        retry_budget=RetryBudget(**spec.retry_budget.model_dump()),
        backoff=Backoff(**spec.backoff.model_dump()),
        state=state_config(spec.state, env),
        upstream=None if spec.upstream is None else UpstreamSettings(**spec.upstream.model_dump()),
    )


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Config:
    """Load a YAML configuration file; any problem raises ConfigError naming the field."""
    return config_from_dict(read_yaml(path), env=env)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """The parsed YAML of ``path``; an unreadable file or bad syntax is a ConfigError naming the line."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(str(p), f"cannot read the file: {exc.strerror}", "check the path") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(where, f"not valid YAML ({problem})", "fix the syntax at that line") from None
    return data
