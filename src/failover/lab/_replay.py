"""Offline replay: recorded requests through one candidate at a time, compared side by side.

``failover replay requests.jsonl --config failover.yaml --route R --candidate M`` reads
recorded OpenAI Chat Completions request bodies, sends each one to the route's primary and
to every candidate through the real router -- a route with that one target, the contract
of route R, the target's own replays and the router's one repair -- and prints, per
candidate: transport / contract / task success, latency p50 / p95 and cost. A fallback is
proven on the traffic it will get before the outage that needs it.

With ``--fake scenario.yaml`` the targets are served by the fault kit's fake providers
(target name -> script) on virtual loop time: no network, no keys, instant.

This module runs the replay and the command; reading the recorded requests is
``_replay_input``, the results and the report ``_replay_report``, the fake providers
``_replay_fake`` and the progress bar ``_progress``.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import random
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from ..config import load_config
from ..model import (
    Envelope,
    Request,
    Response,
    Route,
    RouteRecord,
    Target,
    Unavailable,
)
from ..policy import NoBreakers, Unlimited, answered, caps_max_tokens, contract_violation, required_capabilities
from ..router import Router
from ..tokens import counter_for
from ..transport import Http1Transport, Transport
from ._progress import Progress
from ._replay_fake import FakeKeys, fake_targets, load_scenario
from ._replay_input import RecordedRequest, ReplayInputError, chat_request, parse_requests, read_requests
from ._replay_report import CandidateSummary, ReplayReport, RequestResult, Role

Gate = Callable[[Request, Response], Awaitable[Any]]
"""A quality gate: ``await gate(request, response)`` returns a verdict with ``.passed``."""


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
    tokens = counter_for(target).count(request)
    why = contract_violation(target, route, need, tokens, request.max_tokens, cap=caps_max_tokens(route, envelope))
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
    cfg = load_config(opts.config, env=FakeKeys() if opts.fake else None)
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
