"""The shape of a config file, as pydantic models: one model per section, one for the file.

Every entry point validates the whole file against :class:`ConfigSpec` (the library's
sections and the ``gateway:`` and ``ledger:`` sections the server reads), so a file that one
of them accepts, all of them accept, and a mistake anywhere in it is found by any of them.
The checks that need more than one field at a time are in ``_load``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ..model import DEFAULT_HOLD_SECONDS, DEFAULT_HOLD_TOKENS, AuthKind, Capability, Dialect
from ..state import StateSpec
from ..transport import DEFAULT_MAX_DECODED_RATIO, DEFAULT_MAX_RESPONSE_BYTES
from ._gateway import EnvName, GatewaySpec, LedgerSpec


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


class AuthSpec(_Strict):
    """``auth:``: a cloud credential chain. ``auth: aws`` is short for ``{kind: aws}``."""

    kind: AuthKind
    profile: str | None = Field(None, min_length=1)  # aws: a named profile (default: botocore's chain)
    credentials_file: str | None = Field(None, min_length=1)  # google: a service-account file (default: ADC)
    scope: str | None = Field(None, min_length=1)  # google / azure: the OAuth scope (default: the service's)
    tenant_id: str | None = Field(None, min_length=1)  # azure: one tenant (default: DefaultAzureCredential)
    client_id: str | None = Field(None, min_length=1)  # azure: a user-assigned identity or app


_PROJECT = re.compile(r"(?:[a-z0-9.-]+:)?[a-z0-9][a-z0-9-]*")
_LOCATION = re.compile(r"[a-z][a-z0-9-]*")


class VertexSpec(_Strict):
    """``vertex:``: Google Vertex AI serves this Gemini or Anthropic model."""

    project: str = Field(min_length=1)
    location: str = Field(min_length=1)  # a region such as us-east5, or global

    # Both go into the request URL (the location into the host name): refuse what cannot be one.
    @field_validator("project")
    @classmethod
    def _project(cls, project: str) -> str:
        if not _PROJECT.fullmatch(project):
            raise ValueError(
                f"{project!r} is not a Google Cloud project ID (such as my-project, or example.com:my-project)"
            )
        return project

    @field_validator("location")
    @classmethod
    def _location(cls, location: str) -> str:
        if not _LOCATION.fullmatch(location):
            raise ValueError(f"{location!r} is not a Vertex AI location (a region such as us-east5, or global)")
        return location


class TargetSpec(_Strict):
    dialect: Dialect
    # required, except for bedrock (from its region) and vertex targets (from their location)
    base_url: str | None = None
    model: str = Field(min_length=1)
    api_key_env: EnvName | None = None  # the variable's name; `null` on purpose: a server that needs no key
    api_key_file: str | None = None
    region: str | None = None
    retention: list[str] = []
    safety_profiles: list[str] = []
    languages: list[str] = []
    capabilities: list[Capability] = [Capability.CHAT]
    context_window: int | None = Field(None, gt=0)  # None: not declared, i.e. unknown
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
    auth: AuthSpec | None = None
    vertex: VertexSpec | None = None
    dimensions: int | None = Field(None, gt=0)  # embedding targets: the vector size when a request names none
    passthrough: StrictBool = True  # false: the client's pass-through fields and headers never reach it

    @field_validator("base_url")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return url.rstrip("/")

    @field_validator("auth", mode="before")
    @classmethod
    def _auth_kind(cls, auth: Any) -> Any:
        return {"kind": auth} if isinstance(auth, str) else auth


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
    # how the primary tier's deployments share requests (failover.policy.balance)
    balance: Literal["order", "weighted", "least_busy", "p2c", "quota"] = "least_busy"
    weights: dict[str, float] = {}  # balance: weighted; target name -> weight (1 when not listed)
    affinity: StrictBool = True  # requests with a prompt-cache key keep to one deployment
    hedge_after: float | None = Field(None, gt=0)
    # fallbacks on probation: target name -> share of eligible failures that may use it
    canary: dict[str, float] = {}
    # seconds a replay must leave to the next eligible candidate; None: its expected latency
    fallback_reserve: float | None = Field(None, ge=0)
    replay_timeouts: bool | None = None  # None: only with an explicit fallback_reserve
    # a stream's commit point: output held until this many tokens or seconds (0 tokens: no hold)
    hold_tokens: int = Field(DEFAULT_HOLD_TOKENS, ge=0)
    hold_seconds: float = Field(DEFAULT_HOLD_SECONDS, ge=0, le=600)
    # max_tokens above a target's max_output_tokens: sent its max (cap) or the target left out (refuse)
    max_tokens_policy: Literal["cap", "refuse"] = "cap"


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
    open_duration: float = Field(2.0, gt=0)
    open_duration_growth: float = Field(1.5, ge=1)
    max_open_duration: float | None = Field(None, gt=0)  # None: 5 s, or open_duration if longer
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


class ConfigSpec(_Strict):
    """The whole file: the library's sections, and the sections ``failover serve`` reads."""

    targets: dict[str, TargetSpec] = Field(min_length=1)
    routes: dict[str, RouteSpec] = Field(min_length=1)
    retry_budget: BudgetSpec = BudgetSpec()
    backoff: BackoffSpec = BackoffSpec()
    state: StateSpec = StateSpec()  # where breakers, buckets and the retry budget live (failover.state)
    breakers: BreakerSpec | None = None  # None: BreakerConfig() defaults
    upstream: UpstreamSpec | None = None  # None: Http1Transport() defaults
    gateway: GatewaySpec | None = None  # failover serve: tenants, admin key, envelope defaults, limits
    ledger: LedgerSpec | None = None  # failover serve: the tool ledger its Router reads
