"""Loading a config file: routes and targets, the shared policies, and every other section.

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

Every entry point reads the whole file the same way (:func:`check_config`): the library
builds what it uses and validates the rest (``gateway:``, ``ledger:``), so one file serves
``Router.from_config``, ``failover serve`` and every command. All problems are found in one
pass and raised together (:class:`~failover.model.ConfigError` lists each on its own line,
with its line and column); what is allowed but probably not meant is a warning, logged on
``failover.config`` when the file is loaded.

Credentials come only from the environment or secret files, never from the file itself.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, ValidationError

from ..model import (
    Auth,
    AuthKind,
    ConfigError,
    ConfigProblem,
    Contract,
    Dialect,
    Limits,
    Price,
    Route,
    Secret,
    Target,
    Timeouts,
    Vertex,
)
from ..policy import Backoff, BreakerConfig, BreakerSettings, RetryBudget, contract_violation
from ..state import StateConfig, StateSpec, state_config
from ..transport import DEFAULT_MAX_DECODED_RATIO, DEFAULT_MAX_RESPONSE_BYTES, Http1Transport
from ..validation import check_contract
from ._gateway import GatewaySpec, LedgerSpec, check_gateway, check_ledger
from ._problems import Problems
from ._spec import BreakerSpec, ConfigSpec, RouteSpec, TargetSpec
from ._yaml import Document, Loc, read_document

log = logging.getLogger("failover.config")

# Static headers that carry a credential: a target with one of them is not "without a key".
_CREDENTIAL_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "x-goog-api-key"})
_OFFLINE_REDIS = "redis://offline.invalid:6379/0"  # --offline: stands in for an unset state.url_env


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """A loaded configuration: routes (with their targets), the shared policies, and the
    validated sections the library does not use itself (``gateway``, ``ledger``: what
    ``failover serve`` builds its settings from)."""

    routes: Mapping[str, Route]
    targets: Mapping[str, Target]
    retry_budget: RetryBudget
    backoff: Backoff
    state: StateConfig = field(default_factory=StateConfig)  # memory unless the file has a `state:` section
    breakers: BreakerSettings | None = None  # the file's `breakers:` tuning (None: the defaults)
    upstream: UpstreamSettings | None = None  # the file's `upstream:` section (None: the defaults)
    gateway: GatewaySpec | None = None  # the file's `gateway:` section, validated
    ledger: LedgerSpec | None = None  # the file's `ledger:` section, validated
    warnings: tuple[ConfigProblem, ...] = ()  # allowed, but probably not meant (logged at load)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigReport:
    """Everything :func:`check_config` found in a file.

    ``config`` is None when there is any error. ``offline``: credentials and URLs named by
    ``*_env`` / ``api_key_file`` were not read (``needs`` lists them); such a Config holds no
    keys and must not be used to send requests. ``needs`` names variables and files only,
    never their contents.
    """

    source: str | None
    problems: tuple[ConfigProblem, ...]
    config: Config | None
    offline: bool = False
    needs: tuple[str, ...] = ()

    @property
    def errors(self) -> tuple[ConfigProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[ConfigProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    def loaded(self) -> Config:
        """The Config, with its warnings logged; a ConfigError listing every error otherwise."""
        if self.config is None:
            raise ConfigError.of(self.errors)
        for w in self.warnings:
            log.warning("%s", w)
        return self.config


@dataclass(slots=True)
class _Broken:
    """Entries left out because they did not validate: references to them are not reported again."""

    targets: set[str] = field(default_factory=set)
    routes: set[str] = field(default_factory=set)
    paths: list[tuple[Any, ...]] = field(default_factory=list)  # what was taken out


def _prune_depth(loc: tuple[Any, ...], fine: bool) -> int:
    """How much of an error's path to drop. A target or route goes whole (other entries refer
    to it, and its defaults would make up checks of their own). Elsewhere ``fine`` drops just
    the offending key (its default then applies), else the entry or key of the section."""
    if loc[0] in ("targets", "routes"):
        return 2
    if fine:
        keys = [i for i, part in enumerate(loc) if isinstance(part, str)]
        return keys[-1] + 1
    if loc[:2] == ("gateway", "tenants"):
        return min(len(loc), 3)
    return min(len(loc), 2)


def _prune(data: Mapping[str, Any], errors: list[Any], fine: bool) -> tuple[dict[str, Any] | None, _Broken]:
    """``data`` without what the errors are in (see ``_prune_depth``), so the checks across
    entries can still run on the rest. None: nothing sensible remains."""
    out: dict[str, Any] = dict(data)
    broken = _Broken()
    for e in errors:
        loc = tuple(e["loc"])
        if not loc:
            return None, broken
        path = loc[: _prune_depth(loc, fine)]
        broken.paths.append(path)
        if loc[0] in ("targets", "routes") and len(path) == 2:
            (broken.targets if loc[0] == "targets" else broken.routes).add(str(path[1]))
        node: dict[Any, Any] = out
        for part in path[:-1]:  # copy each mapping on the way: the caller's data is not changed
            child = node.get(part)
            if not isinstance(child, Mapping):
                break
            node[part] = node = dict(child)
        else:
            node.pop(path[-1], None)
            continue
        out.pop(loc[0], None)  # not a mapping on the way: the whole section goes
    return out, broken


class _RestSpec(ConfigSpec):
    """What is left of a file once its broken entries are taken out: possibly no target or
    route at all (their absence is already reported)."""

    targets: dict[str, TargetSpec] = Field(default_factory=dict)
    routes: dict[str, RouteSpec] = Field(default_factory=dict)


# The dialects each credential chain can authorise: SigV4 for Bedrock's API, a google-auth
# token for Gemini and Anthropic models (Vertex AI, or the Gemini API with OAuth), an Entra ID
# token for Azure OpenAI.
_AUTH_DIALECTS = {
    AuthKind.AWS: (Dialect.BEDROCK,),
    AuthKind.GOOGLE: (Dialect.GEMINI, Dialect.ANTHROPIC),
    AuthKind.AZURE: (Dialect.OPENAI, Dialect.OPENAI_RESPONSES),
}


def _loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Check:
    """One pass over a validated file: builds what it can, records every problem on the way."""

    def __init__(self, doc: Document, env: Mapping[str, str], offline: bool) -> None:
        self.doc = doc
        self.env = env
        self.offline = offline
        self.out = Problems(doc)
        self.needs: list[str] = []

    def need(self, what: str) -> None:
        if what not in self.needs:
            self.needs.append(what)

    # --- targets -------------------------------------------------------------------------

    def secret(self, name: str, spec: TargetSpec) -> tuple[Secret | None, str | None]:
        where = ("targets", name)
        if spec.api_key_env and spec.api_key_file:
            self.out.error(where, "both api_key_env and api_key_file are set", "keep one of them")
            return None, None
        if spec.api_key_env:
            var = spec.api_key_env
            self.need(f"env:{var}")
            value = self.env.get(var, "").strip()
            if not value and not self.offline:
                self.out.error(
                    (*where, "api_key_env"),
                    f"environment variable {var} is not set",
                    f"export {var}=... before starting, or use api_key_file"
                    " (check-config --offline checks the file without credentials)",
                )
            return (Secret(value) if value else None), f"env:{var}"
        if spec.api_key_file:
            path = Path(spec.api_key_file)
            self.need(f"file:{path}")
            if self.offline:
                return None, f"file:{path}"
            try:
                text = path.read_text().strip()
            except OSError as exc:
                self.out.error(
                    (*where, "api_key_file"), f"cannot read {path}: {exc.strerror}", "point it at a readable file"
                )
                return None, f"file:{path}"
            if not text:
                self.out.error((*where, "api_key_file"), f"{path} is empty", "put the key in the file")
                return None, f"file:{path}"
            return Secret(text), f"file:{path}"
        return None, None

    def cloud(self, name: str, spec: TargetSpec) -> tuple[str, Auth | None, Vertex | None]:
        """The base URL (given, or derived from a Bedrock region or a Vertex location), the
        credential chain and the Vertex project of a target; each mismatch reported."""
        where = ("targets", name)
        vertex = Vertex(project=spec.vertex.project, location=spec.vertex.location) if spec.vertex else None
        if vertex is not None and spec.dialect not in (Dialect.GEMINI, Dialect.ANTHROPIC):
            self.out.error(
                (*where, "vertex"),
                f"Vertex AI serves Gemini and Anthropic models, not the {spec.dialect.value} dialect",
                "use dialect: gemini or dialect: anthropic, or remove vertex:",
            )
        auth = None
        if spec.auth is not None:
            a = spec.auth
            auth = Auth(
                kind=a.kind,
                profile=a.profile,
                credentials_file=a.credentials_file,
                scope=a.scope,
                tenant_id=a.tenant_id,
                client_id=a.client_id,
            )
            allowed = _AUTH_DIALECTS[a.kind]
            if spec.dialect not in allowed:
                self.out.error(
                    (*where, "auth", "kind"),
                    f"{a.kind.value} credentials do not apply to the {spec.dialect.value} dialect",
                    f"use them with dialect: {' or '.join(d.value for d in allowed)}",
                )
            if a.credentials_file:
                self.need(f"file:{a.credentials_file}")
                if not self.offline and not Path(a.credentials_file).is_file():
                    self.out.error(
                        (*where, "auth", "credentials_file"),
                        f"cannot read {a.credentials_file}",
                        "point it at the service account's JSON key file, or remove it to use the "
                        "application default credentials",
                    )
        if spec.base_url is not None:
            return spec.base_url, auth, vertex
        if vertex is not None:
            return vertex.root_url, auth, vertex
        if spec.dialect is Dialect.BEDROCK:
            if spec.region:
                return f"https://bedrock-runtime.{spec.region}.amazonaws.com", auth, vertex
            self.out.error(
                (*where, "region"),
                "a Bedrock target needs its AWS region (the endpoint and the signature's region)",
                "set region: us-east-1 (or the region of the model or inference profile)",
            )
            return "https://bedrock-runtime.invalid", auth, vertex
        self.out.error((*where, "base_url"), "missing", "set base_url: https://... (the API's root)")
        return "http://invalid", auth, vertex

    def target(self, name: str, spec: TargetSpec) -> Target:
        key, credential = self.secret(name, spec)
        base_url, auth, vertex = self.cloud(name, spec)
        return Target(
            name=name,
            dialect=spec.dialect,
            model=spec.model,
            base_url=base_url,
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
            auth=auth,
            vertex=vertex,
            dimensions=spec.dimensions,
            passthrough=spec.passthrough,
        )

    # --- routes --------------------------------------------------------------------------

    def route(self, rname: str, spec: RouteSpec, targets: Mapping[str, Target], broken: _Broken) -> Route | None:
        """The Route, or None when it has an error (each recorded) or names a broken target."""
        before = len(self.out.errors)
        known = ", ".join(sorted({*targets, *broken.targets}))
        resolved: dict[str, list[Target]] = {"primary": [], "fallbacks": []}
        complete = True
        seen: set[str] = set()
        for group in ("primary", "fallbacks"):
            for i, tname in enumerate(getattr(spec, group)):
                where: Loc = ("routes", rname, group, i)
                if tname in seen:
                    self.out.error(where, f"target {tname!r} is listed twice", "list each target once per route")
                    continue
                seen.add(tname)
                if tname in targets:
                    resolved[group].append(targets[tname])
                elif tname in broken.targets:
                    complete = False  # its own errors are reported where it is defined
                else:
                    self.out.error(where, f"unknown target {tname!r}", f"define it under targets (known: {known})")
        keys = {t.key for t in resolved["primary"]}
        if len(keys) > 1:
            self.out.error(
                ("routes", rname, "primary"),
                "primary targets must be equivalent (same equivalence_key), got " + ", ".join(sorted(keys)),
                "give them one equivalence_key, or move the other models to fallbacks",
            )
        fallback_names = [str(t) for t in spec.fallbacks]
        for tname, share in spec.canary.items():
            at: Loc = ("routes", rname, "canary", tname)
            if tname not in fallback_names:
                what = "a primary target" if tname in spec.primary else "not a target of this route"
                self.out.error(
                    at,
                    f"{tname!r} is {what}; only fallbacks can be on canary",
                    f"list it under routes.{rname}.fallbacks first"
                    + (f" (fallbacks: {', '.join(fallback_names)})" if fallback_names else ""),
                )
            if not 0.0 < share <= 1.0:  # also rejects NaN
                self.out.error(
                    at,
                    f"share {share!r} is outside (0, 1]",
                    "give the share of eligible failures that may use it, e.g. 0.1 for 10% (1: fully enabled)",
                )
        for at, problem, fix in _weight_problems(rname, spec.primary, fallback_names, spec.weights, spec.balance):
            self.out.error(at, problem, fix)
        c = spec.contract
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
            self.out.error(("routes", rname, "contract"), str(exc), "correct the value it names")
        if not complete or len(self.out.errors) > before:
            return None
        return Route(
            name=rname,
            contract=contract,
            primary=tuple(resolved["primary"]),
            fallbacks=tuple(resolved["fallbacks"]),
            ranking=spec.ranking,
            balance=spec.balance,
            weights=tuple(spec.weights.items()),
            affinity=spec.affinity,
            hedge_after=spec.hedge_after,
            canary=tuple(spec.canary.items()),
            fallback_reserve=spec.fallback_reserve,
            replay_timeouts=spec.replay_timeouts,
            hold_tokens=spec.hold_tokens,
            hold_seconds=spec.hold_seconds,
            max_tokens_policy=spec.max_tokens_policy,
        )

    # --- shared policies -----------------------------------------------------------------

    def breakers(self, spec: BreakerSpec | None) -> BreakerSettings | None:
        if spec is None:
            return None
        fields = spec.model_dump(exclude={"overload_grace", "overload_min_success", "key_model"})
        config = key_config = None
        try:
            config = BreakerConfig(**fields)
        except ValueError as exc:
            self.out.error(("breakers",), str(exc), "correct the values it names (docs/health.md)")
        if spec.key_model is not None:
            try:
                key_config = BreakerConfig(**spec.key_model.model_dump())
            except ValueError as exc:
                self.out.error(("breakers", "key_model"), str(exc), "correct the values it names (docs/health.md)")
        if config is None:
            return None
        return BreakerSettings(
            config=config,
            key_config=key_config,
            overload_grace=spec.overload_grace,
            overload_min_success=spec.overload_min_success,
        )

    def state(self, spec: StateSpec) -> StateConfig:
        env = self.env
        if spec.url_env:
            self.need(f"env:{spec.url_env}")
            if self.offline and not env.get(spec.url_env):
                env = {**env, spec.url_env: _OFFLINE_REDIS}
        try:
            return state_config(spec, env)
        except ConfigError as exc:
            self.out.config_error(exc)
            return StateConfig()

    # --- warnings: allowed, but probably not meant ---------------------------------------

    def never_eligible(self, routes: Mapping[str, Route]) -> None:
        for rname, route in routes.items():
            need = frozenset(route.contract.capabilities)
            for group, members in (("primary", route.primary), ("fallbacks", route.fallbacks)):
                for i, t in enumerate(members):
                    why = contract_violation(t, route, need, 0, None)
                    if why is not None:
                        self.out.warning(
                            ("routes", rname, group, i),
                            f"{t.name!r} can never be eligible for this route's contract ({why}), "
                            "so it is never called",
                            "remove it from the route, or correct the target if it does meet the contract",
                        )

    def unpriced(self, spec: ConfigSpec) -> None:
        g = spec.gateway
        if g is None:
            return
        routes = spec.routes  # as written: a route with an error elsewhere still names its targets
        bounds: dict[str, list[str]] = {r: [] for r in routes}
        for r in routes:
            if g.envelope.max_cost is not None:
                bounds[r].append("gateway.envelope.max_cost")
            for tname, tenant in g.tenants.items():
                if tenant.budget_usd is not None and ("*" in tenant.routes or r in tenant.routes):
                    bounds[r].append(f"gateway.tenants.{tname}.budget_usd")
        for name, t in spec.targets.items():
            if "price" in t.model_fields_set:
                continue
            on = [r for r, route in routes.items() if bounds[r] and name in (*route.primary, *route.fallbacks)]
            if not on:
                continue
            limits = sorted({b for r in on for b in bounds[r]})
            self.out.warning(
                ("targets", name, "price"),
                f"no price, so {' and '.join(limits)} cannot limit what it spends on route "
                f"{', '.join(on)}: its attempts count as free",
                "set price: {input_per_mtok: ..., output_per_mtok: ...} in USD per million tokens "
                "(0 and 0 if it really is free)",
            )

    def keyless(self, spec: ConfigSpec) -> None:
        for name, t in spec.targets.items():
            if {"api_key_env", "api_key_file"} & t.model_fields_set:  # given, or `null` on purpose
                continue
            if t.auth is not None or t.vertex is not None or t.dialect is Dialect.BEDROCK:  # a cloud chain
                continue
            if t.base_url is None or _loopback(t.base_url) or _CREDENTIAL_HEADERS & {h.lower() for h in t.headers}:
                continue
            self.out.warning(
                ("targets", name),
                "no credential: its requests carry no API key",
                "name where its key comes from with api_key_env (or api_key_file); "
                "for a server that needs no key, write api_key_env: null",
            )

    # --- the file ------------------------------------------------------------------------

    def run(self) -> Config | None:
        data = self.doc.data
        if data is None:
            self.out.error((), "the file is empty", "start with targets: and routes: (docs/config.md)")
            return None
        if not isinstance(data, Mapping):
            self.out.error((), "the configuration is not a mapping", "start with `targets:` and `routes:`")
            return None
        broken = _Broken()
        spec: ConfigSpec | None = None
        try:
            spec = ConfigSpec.model_validate(data)
        except ValidationError as exc:
            self.out.validation(exc, ConfigSpec)
            for fine in (True, False):  # the checks across entries still run on the rest
                pruned, broken = _prune(data, exc.errors(), fine)
                if pruned is None:
                    return None
                try:
                    spec = _RestSpec.model_validate(pruned)
                    break
                except ValidationError:
                    continue
            if spec is None:  # what remains cannot be checked across entries
                return None
            # a check of what contains a removed key may fail only because it was removed
            # ("the tenant has no key" once its bad key_sha256 is out): not reported
            self.out.shadowed = [tuple(p) for p in broken.paths]
        targets = {name: self.target(name, t) for name, t in spec.targets.items()}
        routes: dict[str, Route] = {}
        for rname, r in spec.routes.items():
            route = self.route(rname, r, targets, broken)
            if route is not None:
                routes[rname] = route
        breakers = self.breakers(spec.breakers)
        state = self.state(spec.state)
        if spec.gateway is not None:
            for keys in (spec.gateway.admin, *spec.gateway.tenants.values()):
                if keys.key_env:
                    self.need(f"env:{keys.key_env}")
            check_gateway(spec.gateway, {*spec.routes, *broken.routes}, self.env, self.offline, self.out)
        if spec.ledger is not None:
            if spec.ledger.url_env:
                self.need(f"env:{spec.ledger.url_env}")
            check_ledger(spec.ledger, self.env, self.offline, self.out)
        self.never_eligible(routes)
        self.unpriced(spec)
        self.keyless(spec)
        if self.out.errors:
            return None
        return Config(
            routes=routes,
            targets=targets,
            breakers=breakers,
            retry_budget=RetryBudget(**spec.retry_budget.model_dump()),
            backoff=Backoff(**spec.backoff.model_dump()),
            state=state,
            upstream=None if spec.upstream is None else UpstreamSettings(**spec.upstream.model_dump()),
            gateway=spec.gateway,
            ledger=spec.ledger,
            warnings=tuple(self.out.warnings),
        )


def check_config(
    source: str | os.PathLike[str] | Document | Any,
    *,
    env: Mapping[str, str] | None = None,
    offline: bool = False,
) -> ConfigReport:
    """Check a whole config file (a path, or already-parsed data) and report every problem.

    Never raises for a problem in the file: an unreadable file and bad YAML are reported too.
    ``offline``: do not read credentials or the URLs named by ``*_env`` (a CI job, or a
    machine without the secrets, checks the structure); ``needs`` then lists what must be
    set where the file is used.
    """
    env = os.environ if env is None else env
    if isinstance(source, str | os.PathLike):
        try:
            doc = read_document(source)
        except ConfigError as exc:
            return ConfigReport(source=str(source), problems=exc.problems, config=None, offline=offline)
    elif isinstance(source, Document):
        doc = source
    else:
        doc = Document(data=source)
    check = _Check(doc, env, offline)
    config = check.run()
    ordered = sorted(check.out.items, key=lambda p: (p.severity != "error", p.line or 0, p.column or 0))
    return ConfigReport(
        source=doc.source,
        problems=tuple(ordered),
        config=config,
        offline=offline,
        needs=tuple(check.needs),
    )


def config_from_dict(data: Any, *, env: Mapping[str, str] | None = None) -> Config:
    """Build a Config from already-parsed data (a dict as YAML would give); a ConfigError lists
    every problem."""
    return check_config(Document(data=data), env=env).loaded()


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Config:
    """Load a YAML configuration file. Every problem is raised in one ConfigError (each with
    its field, line and column); warnings are logged on ``failover.config``."""
    return check_config(path, env=env).loaded()


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """The parsed YAML of ``path``; an unreadable file or bad syntax is a ConfigError naming the line."""
    return read_document(path).data


def _weight_problems(
    rname: str, primary: list[str], fallbacks: list[str], weights: dict[str, float], balance: str
) -> list[tuple[Loc, str, str]]:
    """``routes.<name>.weights``: primary targets only, finite and >= 0, with ``balance: weighted``."""
    out: list[tuple[Loc, str, str]] = []
    for tname, weight in weights.items():
        at: Loc = ("routes", rname, "weights", tname)
        if tname not in primary:
            what = "a fallback" if tname in fallbacks else "not a target of this route"
            out.append(
                (
                    at,
                    f"{tname!r} is {what}; weights share requests among the primary tier only",
                    f"list only routes.{rname}.primary targets ({', '.join(map(str, primary))})",
                )
            )
        if not 0.0 <= weight < float("inf"):  # also rejects NaN
            out.append((at, f"weight {weight!r} is not a finite number >= 0", "give a weight such as 1 or 3"))
    if weights and balance != "weighted":
        out.append(
            (
                ("routes", rname, "weights"),
                f"weights are only read with balance: weighted (this route has balance: {balance})",
                "set balance: weighted, or remove weights",
            )
        )
    return out
