"""Offline replay: recorded requests through one candidate at a time, compared side by side.

``failover replay requests.jsonl --config failover.yaml --route R --candidate M`` reads
recorded OpenAI Chat Completions request bodies, sends each one to the route's primary and
to every candidate through the real router -- a route with that one target, the contract
of route R, the target's own replays and the router's one repair -- and prints, per
candidate: transport / contract / task success, latency p50 / p95 and cost. A fallback is
proven on the traffic it will get before the outage that needs it.

With ``--fake scenario.yaml`` the targets are served by the fault kit's fake providers
(target name -> script) on virtual loop time: no network, no keys, instant.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import math
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TextIO

import yaml

from ..config import load_config
from ..inbound import WireError
from ..inbound import openai as inbound_openai
from ..model import (
    Envelope,
    Request,
    Response,
    Route,
    RouteRecord,
    Secret,
    Target,
    Unavailable,
)
from ..policy import NoBreakers, Unlimited, contract_violation, required_capabilities
from ..policy._canary import answered
from ..router import Router
from ..testing import FakeNetwork, FakeProvider, Scenario
from ..tokens import counter_for
from ..transport import Http1Transport, Transport

Gate = Callable[[Request, Response], Awaitable[Any]]
"""A quality gate: ``await gate(request, response)`` returns a verdict with ``.passed``."""

Role = Literal["primary", "equivalent", "fallback", "candidate"]


# -- reading recorded requests ----------------------------------------------------------------


class ReplayInputError(ValueError):
    """A recorded request that cannot be converted: names the file, the line and the field."""

    def __init__(self, source: str, line: int, field: str, problem: str) -> None:
        super().__init__(f"{source}:{line}: {field}: {problem}")
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    line: int  # 1-based line in the JSONL file
    id: str  # the batch line's custom_id, or "line N"
    request: Request


_BATCH_KEYS = frozenset({"custom_id", "method", "url", "body"})

# The conversion is the gateway's (failover.inbound.openai). The gateway ignores a field that
# does not fit the normalized Request; a replay cannot: a candidate answering the request
# without it answers another request than the one recorded. These are the Chat Completions
# fields that change the answer and that the Request cannot carry, with what they do. A value
# that is the API's default (null, or the value below) changes nothing and is let through.
_NOT_REPLAYABLE: Mapping[str, str] = {
    "frequency_penalty": "a sampling penalty",
    "presence_penalty": "a sampling penalty",
    "logit_bias": "token biases",
    "top_logprobs": "log probabilities",
    "functions": "legacy function calling",
    "function_call": "legacy function calling",
    "audio": "audio output",
    "modalities": "output modalities",
    "prediction": "a predicted output",
    "web_search_options": "web search",
    "verbosity": "an answer length setting",
    "moderation": "output moderation",
}
_DEFAULTS: Mapping[str, object] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": {},
    "modalities": ["text"],
}
# The same inside an assistant message of the history (the gateway drops these keys).
_NOT_REPLAYABLE_TURN: Mapping[str, str] = {
    "refusal": "an assistant refusal in the history",
    "audio": "a reference to an earlier audio answer",
    "function_call": "a legacy function call in the history",
}
_NO_MODEL = "replay"  # a recording may leave out model: replay sends to its own targets


def read_requests(path: str | os.PathLike[str]) -> tuple[RecordedRequest, ...]:
    """Read a JSONL file of recorded requests; any problem raises :class:`ReplayInputError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReplayInputError(str(p), 0, "(file)", f"cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ReplayInputError(str(p), 0, "(file)", f"not UTF-8 text: {exc}") from None
    return parse_requests(text.splitlines(), source=str(p))


def parse_requests(lines: Iterable[str], *, source: str = "<input>") -> tuple[RecordedRequest, ...]:
    """Convert JSONL lines (blank lines skipped). Each line is a Chat Completions request body,
    or an OpenAI Batch API line ``{"custom_id", "method", "url", "body"}`` holding one."""
    out: list[RecordedRequest] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ReplayInputError(source, n, "(line)", f"not valid JSON: {exc}") from None
        rid = f"line {n}"
        prefix = ""
        try:
            if isinstance(data, Mapping) and "body" in data and "messages" not in data:
                extra = sorted(set(data) - _BATCH_KEYS)
                if extra:
                    raise _Bad(extra[0], f"unknown key in a batch line (expected {', '.join(sorted(_BATCH_KEYS))})")
                url = data.get("url", "/v1/chat/completions")
                if not isinstance(url, str) or not url.rstrip("/").endswith("/chat/completions"):
                    raise _Bad("url", f"only /v1/chat/completions requests can be replayed, got {url!r}")
                cid = data.get("custom_id")
                if cid is not None:
                    if not isinstance(cid, str) or not cid:
                        raise _Bad("custom_id", "must be a non-empty string")
                    rid = cid
                data, prefix = data["body"], "body."
            request = chat_request(data)
        except _Bad as bad:
            raise ReplayInputError(source, n, prefix + bad.field, bad.problem) from None
        out.append(RecordedRequest(line=n, id=rid, request=request))
    return tuple(out)


def chat_request(body: Any) -> Request:
    """Convert one recorded OpenAI Chat Completions request body into a :class:`Request`.

    The conversion is the gateway's (:mod:`failover.inbound.openai`): the same shapes are
    accepted and the same refusals name the field, so a request that replays is one the
    gateway serves. On top, replay refuses what it cannot reproduce (``_NOT_REPLAYABLE``);
    ``model`` may be left out.
    """
    if isinstance(body, dict) and "model" not in body:
        body = {**body, "model": _NO_MODEL}
    try:
        parsed = inbound_openai.parse_body(body)
        _refuse_unreplayable(body)
        return inbound_openai.to_request(parsed)
    except WireError as exc:
        raise _Bad(exc.param or "(body)", _problem(exc)) from None


def _refuse_unreplayable(body: Mapping[str, Any]) -> None:
    """The fields the gateway would ignore that change what the recorded call asked for."""
    for key, what in _NOT_REPLAYABLE.items():
        value = body.get(key)
        if value is not None and (key not in _DEFAULTS or value != _DEFAULTS[key]):
            raise _Bad(
                key,
                f"not supported by replay ({what}): the normalized Request cannot carry it, so every "
                "candidate would answer another request than the one recorded; remove it from the recording",
            )
    for i, message in enumerate(body["messages"]):  # parse_body checked: a list of objects
        if message.get("role") != "assistant":
            continue
        for key, what in _NOT_REPLAYABLE_TURN.items():
            if message.get(key) is not None:
                raise _Bad(f"messages[{i}].{key}", f"{what} cannot be replayed; remove it from the recording")


def _problem(exc: WireError) -> str:
    """The WireError's message without what the replay error already says (the field)."""
    text = exc.message.removeprefix("invalid request body: ")
    return text.removeprefix(f"{exc.param}: ") if exc.param else text


# -- the gate ---------------------------------------------------------------------------------


def load_gate(spec: str) -> Gate:
    """Import ``module:function``. An ``async def`` with the gate's signature is the gate;
    any other callable is a factory called once with no arguments that returns the gate."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"--gate: expected module:function, got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a console script does not see the working directory
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"--gate: cannot import module {module!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"--gate: module {module!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"--gate: {spec} is not callable")
    gate = obj if inspect.iscoroutinefunction(obj) else obj()
    if not callable(gate):
        raise ValueError(f"--gate: {spec}() returned {type(gate).__name__}, not a quality gate")
    return gate  # type: ignore[no-any-return]


async def _judge(gate: Gate, request: Request, response: Response) -> bool:
    verdict = await gate(request, response)
    passed = verdict if isinstance(verdict, bool) else getattr(verdict, "passed", None)
    if not isinstance(passed, bool):
        raise TypeError(f"the gate returned {type(verdict).__name__} without a boolean .passed")
    return passed


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestResult:
    """One recorded request on one candidate."""

    line: int
    id: str
    target: str
    excluded: str | None = None  # why the candidate cannot serve it under the contract (not sent)
    outcome: str = "ok"  # "ok", or the failure kind the router ended with
    message: str | None = None  # the router's explanation when not ok
    transport: bool = False  # a complete response arrived (usable or not)
    contract: bool = False  # the router returned a response that met the contract
    task: bool | None = None  # the quality gate passed (None: no gate ran)
    gate_error: str | None = None  # the gate raised: counted as a task failure
    attempts: int = 0
    latency_ms: float = 0.0  # end to end, replays and the repair included
    cost: float = 0.0  # USD, failed attempts included

    @property
    def sent(self) -> bool:
        return self.excluded is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "id": self.id,
            "excluded": self.excluded,
            "outcome": self.outcome,
            "message": self.message,
            "transport": self.transport,
            "contract": self.contract,
            "task": self.task,
            "gate_error": self.gate_error,
            "attempts": self.attempts,
            "latency_ms": round(self.latency_ms, 3),
            "cost": round(self.cost, 9),
        }


def _percentile(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]  # nearest rank


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateSummary:
    """One candidate's results over the whole set.

    Transport and contract success are over the requests sent (a request the candidate
    cannot serve under the contract is not sent and is listed as excluded); task success is
    over the requests a gate judged (with ``--gate``: every request sent; one that got no
    valid answer fails the task). Latency and cost are over the requests sent.
    """

    target: str
    model: str
    role: Role
    canary: float | None  # the candidate's canary share on the route, if on probation
    results: tuple[RequestResult, ...]

    @property
    def requests(self) -> int:
        return len(self.results)

    @property
    def sent(self) -> tuple[RequestResult, ...]:
        return tuple(r for r in self.results if r.sent)

    @property
    def transport_ok(self) -> int:
        return sum(r.transport for r in self.results)

    @property
    def contract_ok(self) -> int:
        return sum(r.contract for r in self.results)

    @property
    def task_checked(self) -> int:
        return sum(r.task is not None for r in self.results)

    @property
    def task_ok(self) -> int:
        return sum(r.task is True for r in self.results)

    def latency_ms(self, p: float) -> float | None:
        return _percentile([r.latency_ms for r in self.sent], p)

    @property
    def cost_total(self) -> float:
        return sum(r.cost for r in self.results)

    @property
    def cost_mean(self) -> float | None:
        n = len(self.sent)
        return self.cost_total / n if n else None

    @property
    def failures(self) -> dict[str, int]:
        """Requests by how they fell short: failure kinds, ``excluded``, ``task_failed``."""
        c: Counter[str] = Counter()
        for r in self.results:
            if r.excluded is not None:
                c["excluded"] += 1
            elif r.outcome != "ok":
                c[r.outcome] += 1
            elif r.task is False:
                c["task_failed"] += 1
        return dict(sorted(c.items()))

    def to_dict(self, *, results: bool = True) -> dict[str, Any]:
        n = len(self.sent)
        out: dict[str, Any] = {
            "target": self.target,
            "model": self.model,
            "role": self.role,
            "canary": self.canary,
            "requests": self.requests,
            "sent": n,
            "transport_ok": self.transport_ok,
            "contract_ok": self.contract_ok,
            "task_checked": self.task_checked,
            "task_ok": self.task_ok,
            "transport_rate": _rate(self.transport_ok, n),
            "contract_rate": _rate(self.contract_ok, n),
            "task_rate": _rate(self.task_ok, self.task_checked),
            "latency_p50_ms": _round(self.latency_ms(50), 3),
            "latency_p95_ms": _round(self.latency_ms(95), 3),
            "cost_total": round(self.cost_total, 9),
            "cost_mean": _round(self.cost_mean, 9),
            "failures": self.failures,
        }
        if results:
            out["results"] = [r.to_dict() for r in self.results]
        return out


def _rate(ok: int, n: int) -> float | None:
    return round(ok / n, 6) if n else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    source: str
    route: str
    requests: int
    concurrency: int
    gate: str | None
    fake: bool
    candidates: tuple[CandidateSummary, ...]

    def candidate(self, target: str) -> CandidateSummary:
        for c in self.candidates:
            if c.target == target:
                return c
        raise KeyError(target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "route": self.route,
            "requests": self.requests,
            "concurrency": self.concurrency,
            "gate": self.gate,
            "fake": self.fake,
            "candidates": [c.to_dict() for c in self.candidates],
        }

    def render(self, *, max_failures: int = 10) -> str:
        where = "fake providers, virtual time" if self.fake else "live providers"
        lines = [
            f"replay of {self.requests} requests from {self.source} on route {self.route} "
            f"({where}, concurrency {self.concurrency})",
            "",
        ]

        def ratio(ok: int, n: int) -> str:
            return "-" if not n else f"{ok}/{n} {100.0 * ok / n:.1f}%"

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.0f} ms"

        def usd(v: float | None) -> str:
            return "-" if v is None else f"${v:.6f}"

        def role(c: CandidateSummary) -> str:
            return c.role if c.canary is None else f"{c.role} (canary {c.canary:g})"

        table: list[tuple[str, ...]] = [
            ("", *(c.target for c in self.candidates)),
            ("role", *(role(c) for c in self.candidates)),
            ("model", *(c.model for c in self.candidates)),
            ("sent", *(f"{len(c.sent)}/{c.requests}" for c in self.candidates)),
            ("transport success", *(ratio(c.transport_ok, len(c.sent)) for c in self.candidates)),
            ("contract success", *(ratio(c.contract_ok, len(c.sent)) for c in self.candidates)),
            ("task success", *(ratio(c.task_ok, c.task_checked) for c in self.candidates)),
            ("latency p50", *(ms(c.latency_ms(50)) for c in self.candidates)),
            ("latency p95", *(ms(c.latency_ms(95)) for c in self.candidates)),
            ("cost total", *(usd(c.cost_total) for c in self.candidates)),
            ("cost mean", *(usd(c.cost_mean) for c in self.candidates)),
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        short = [
            (c, r) for c in self.candidates for r in c.results if r.excluded or r.outcome != "ok" or r.task is False
        ]
        if short:
            lines += ["", "not successful:"]
            per: Counter[str] = Counter()
            for c, r in short:
                per[c.target] += 1
                if per[c.target] > max_failures:
                    continue
                lines.append(f"  {c.target:<{widths[0] or 1}}  {_label(r)}: {_why(r)}")
            for target, n in per.items():
                if n > max_failures:
                    lines.append(f"  {target}: ... and {n - max_failures} more (see --json)")
        return "\n".join(lines)


def _label(r: RequestResult) -> str:
    return f"line {r.line}" if r.id == f"line {r.line}" else f"line {r.line} ({r.id})"


def _why(r: RequestResult) -> str:
    if r.excluded is not None:
        return f"not sent: {r.excluded}"
    if r.outcome != "ok":
        if not r.message:
            return r.outcome
        text = f"{r.outcome}: {r.message}"
        return text if len(text) <= 200 else text[:197] + "..."  # the whole message is in --json
    if r.gate_error is not None:
        return f"quality gate error: {r.gate_error}"
    return "quality gate failed"


# -- running ----------------------------------------------------------------------------------


def _role(target: Target, route: Route) -> Role:
    if route.primary and target.name == route.primary[0].name:
        return "primary"
    if any(t.name == target.name for t in route.primary):
        return "equivalent"
    if any(t.name == target.name for t in route.fallbacks):
        return "fallback"
    return "candidate"


async def replay(
    requests: Sequence[RecordedRequest],
    route: Route,
    targets: Sequence[Target],
    *,
    transport: Transport,
    concurrency: int = 4,
    gate: Gate | None = None,
    budget: float = 30.0,
    on_result: Callable[[RequestResult], None] | None = None,
    source: str = "<requests>",
    gate_name: str | None = None,
    fake: bool = False,
    seed: int = 0,
) -> ReplayReport:
    """Send every request to every target, one target per router, ``concurrency`` at a time.

    Each target gets its own Router over a route with that target alone as primary and
    ``route``'s contract: its own replays (``max_attempts``) and one repair, no failover,
    no fallback, no retry budget or breakers shared across requests. ``transport`` is
    shared and left open.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if budget <= 0:
        raise ValueError(f"budget must be > 0 seconds, got {budget}")
    routers: dict[str, tuple[Router, Route]] = {}
    for i, t in enumerate(targets):
        single = Route(name=route.name, contract=route.contract, primary=(t,))
        router = Router(
            [single],
            transport=transport,
            retry_budget=Unlimited(),
            breakers=NoBreakers(),
            rng=random.Random(seed + i),
        )
        routers[t.name] = (router, single)
    sem = asyncio.Semaphore(concurrency)
    results: dict[tuple[str, int], RequestResult] = {}

    async def one(target: Target, rec: RecordedRequest) -> None:
        async with sem:
            result = await _run_one(*routers[target.name], target, rec, gate=gate, budget=budget)
        results[(target.name, rec.line)] = result
        if on_result is not None:
            on_result(result)

    try:
        async with asyncio.TaskGroup() as tg:
            for rec in requests:  # request by request: every provider sees traffic from the start
                for t in targets:
                    tg.create_task(one(t, rec))
    except BaseExceptionGroup as group:
        first = group.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    shares = dict(route.canary)
    return ReplayReport(
        source=source,
        route=route.name,
        requests=len(requests),
        concurrency=concurrency,
        gate=gate_name,
        fake=fake,
        candidates=tuple(
            CandidateSummary(
                target=t.name,
                model=t.model,
                role=_role(t, route),
                canary=shares.get(t.name),
                results=tuple(results[(t.name, r.line)] for r in requests),
            )
            for t in targets
        ),
    )


async def _run_one(
    router: Router, route: Route, target: Target, rec: RecordedRequest, *, gate: Gate | None, budget: float
) -> RequestResult:
    request = rec.request
    base = RequestResult(line=rec.line, id=rec.id, target=target.name)
    envelope = Envelope(request_id=f"replay-{target.name}-{rec.line}", budget=budget)
    need = required_capabilities(route, request, envelope)
    why = contract_violation(target, route, need, counter_for(target).count(request), request.max_tokens)
    if why is not None:
        return replace(base, excluded=why, outcome="excluded")
    response: Response | None = None
    message: str | None = None
    try:
        response = await router.complete(route.name, request, envelope)
    except Unavailable as exc:
        record, outcome, message = exc.record, exc.reason.value, exc.message
    else:
        assert response.record is not None
        record, outcome, message = response.record, "ok", None
    task = _task(record)
    gate_error: str | None = None
    if gate is not None:
        task = False
        if response is not None:
            try:
                task = await _judge(gate, request, response)
            except Exception as exc:  # the user's gate: report it, keep replaying
                gate_error = f"{type(exc).__name__}: {exc}"
    return replace(
        base,
        outcome=outcome,
        message=message,
        transport=any(answered(a) for a in record.attempts),
        contract=response is not None,
        task=task,
        gate_error=gate_error,
        attempts=len(record.attempts),
        latency_ms=record.elapsed_ms,
        cost=record.total_cost,
    )


def _task(record: RouteRecord) -> bool | None:
    """What a quality gate run by the router itself said (None: none ran)."""
    for a in reversed(record.attempts):
        if a.task_ok is not None:
            return a.task_ok
    return record.validation.task


# -- fake providers -----------------------------------------------------------------------------


class _FakeKeys(Mapping[str, str]):
    """The environment, with a placeholder for every unset variable: fakes need no real keys."""

    def __getitem__(self, key: str) -> str:
        return os.environ.get(key) or "sk-fake-replay"

    def __iter__(self) -> Iterator[str]:
        return iter(os.environ)

    def __len__(self) -> int:
        return len(os.environ)


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a fault-kit Scenario (target name -> script) from a YAML or JSON file."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--fake {p}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--fake {p}: not valid YAML: {exc}") from None
    try:
        return Scenario.from_dict(data)
    except ValueError as exc:
        raise ValueError(f"--fake {p}: {exc}") from None


def fake_targets(
    scenario: Scenario, targets: Sequence[Target], *, source: str = "scenario"
) -> tuple[FakeNetwork, list[Target]]:
    """A FakeNetwork with one fake provider per target (scripted by the scenario entry of the
    same name, speaking the target's dialect) and the targets pointed at it."""
    names = set(scenario.names)
    missing = [t.name for t in targets if t.name not in names]
    if missing:
        raise ValueError(
            f"--fake {source}: no script for target(s) {', '.join(missing)}; "
            f"the scenario maps target names to scripts (it has: {', '.join(scenario.names) or 'none'})"
        )
    providers: list[FakeProvider] = []
    rewired: list[Target] = []
    used: set[str] = set()
    for t in targets:
        plan = scenario.plan(t.name)
        if plan.dialect is not None and plan.dialect != t.dialect:
            raise ValueError(
                f"--fake {source}: {t.name!r} is a {t.dialect.value} target, the scenario says {plan.dialect.value}"
            )
        label = _host_label(t.name, used)
        p = FakeProvider(label, t.dialect, plan.script, model=plan.model, latency=plan.latency)
        providers.append(p)
        rewired.append(replace(t, base_url=p.base_url, api_key=Secret(f"sk-fake-{label}")))
    return FakeNetwork(*providers), rewired


def _host_label(name: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:50] or "target"
    label, n = base, 1
    while label in used:
        n += 1
        label = f"{base}-{n}"
    used.add(label)
    return label


# -- progress ---------------------------------------------------------------------------------


class Progress:
    """A plain-text progress bar on a stream: redrawn in place on a terminal, otherwise a line
    at every tenth of the work (and at the end)."""

    def __init__(
        self,
        total: int,
        *,
        stream: TextIO,
        label: str = "replay",
        tty: bool | None = None,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.label = label
        self.tty = stream.isatty() if tty is None else tty
        self.interval = interval
        self.clock = clock
        self.done = 0
        self.short = 0  # results that were not a full success
        self._last_draw = -math.inf
        self._step = max(1, math.ceil(total / 10))
        self._closed = False

    def line(self) -> str:
        width = 24
        filled = width * self.done // self.total if self.total else width
        pct = 100 * self.done // self.total if self.total else 100
        bar = "#" * filled + "-" * (width - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total} {pct:3d}% | not successful {self.short}"

    def advance(self, result: RequestResult | None = None) -> None:
        self.done += 1
        if result is not None and (result.excluded or result.outcome != "ok" or result.task is False):
            self.short += 1
        last = self.done >= self.total
        if self.tty:
            now = self.clock()
            if last or now - self._last_draw >= self.interval:
                self._last_draw = now
                self.stream.write("\r" + self.line())
                self.stream.flush()
        elif last or self.done % self._step == 0:
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()


# -- the command ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOptions:
    """What ``failover replay`` takes."""

    requests: str
    config: str
    route: str
    candidates: tuple[str, ...] = ()  # none: the route's approved fallbacks
    concurrency: int = 4
    gate: str | None = None  # module:function
    fake: str | None = None  # a Scenario file: target name -> script
    budget: float = 30.0  # seconds per request


def run_replay(opts: ReplayOptions, *, progress: TextIO | None = None) -> ReplayReport:
    """Load everything, replay, and return the report (``progress``: where the bar goes)."""
    if opts.concurrency < 1:
        raise ValueError(f"--concurrency must be >= 1, got {opts.concurrency}")
    if opts.budget <= 0:
        raise ValueError(f"--budget must be > 0 seconds, got {opts.budget}")
    recorded = read_requests(opts.requests)
    if not recorded:
        raise ValueError(f"{opts.requests}: no requests to replay (the file is empty)")
    cfg = load_config(opts.config, env=_FakeKeys() if opts.fake else None)
    route = cfg.routes.get(opts.route)
    if route is None:
        raise ValueError(f"--route: no route {opts.route!r} in {opts.config}; routes: {', '.join(cfg.routes)}")
    if not route.primary:
        raise ValueError(f"--route: route {opts.route!r} has no primary target")
    names = [route.primary[0].name, *(opts.candidates or [t.name for t in route.fallbacks])]
    for n in names:
        if n not in cfg.targets:
            raise ValueError(f"--candidate: no target {n!r} in {opts.config}; targets: {', '.join(cfg.targets)}")
    targets = [cfg.targets[n] for n in dict.fromkeys(names)]  # the primary first, each once
    gate = load_gate(opts.gate) if opts.gate else None
    bar = Progress(len(recorded) * len(targets), stream=progress) if progress is not None else None
    common: dict[str, Any] = {
        "concurrency": opts.concurrency,
        "gate": gate,
        "budget": opts.budget,
        "on_result": bar.advance if bar is not None else None,
        "source": opts.requests,
        "gate_name": opts.gate,
    }
    try:
        if opts.fake:
            import looptime

            network, fakes = fake_targets(load_scenario(opts.fake), targets, source=opts.fake)
            loop = looptime.new_event_loop(start=0.0)
            try:
                return loop.run_until_complete(replay(recorded, route, fakes, transport=network, fake=True, **common))
            finally:
                loop.close()
        return asyncio.run(_live(recorded, route, targets, common))
    finally:
        if bar is not None:
            bar.close()


async def _live(
    recorded: Sequence[RecordedRequest], route: Route, targets: Sequence[Target], common: dict[str, Any]
) -> ReplayReport:
    transport = Http1Transport()
    try:
        return await replay(recorded, route, targets, transport=transport, **common)
    finally:
        await transport.aclose()


__all__ = [
    "CandidateSummary",
    "Gate",
    "Progress",
    "RecordedRequest",
    "ReplayInputError",
    "ReplayOptions",
    "ReplayReport",
    "RequestResult",
    "chat_request",
    "fake_targets",
    "load_gate",
    "load_scenario",
    "parse_requests",
    "read_requests",
    "replay",
    "run_replay",
]
