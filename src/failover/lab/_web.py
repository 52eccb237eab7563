"""The lab in the browser: a page over the seed scenarios, run by the real router on virtual time.

``lab_app()`` is a small Starlette app. ``GET /`` serves the page (plain HTML, CSS and JS
shipped in ``failover/lab/static``, no build step); ``POST /api/run`` takes the page's
settings (a built-in scenario, or ``"scenario": "custom"`` with the scenario's YAML/JSON text
in ``custom``), runs :func:`run_virtual` in a worker thread (it drives its own virtual-time
loop) and returns the RouteRecord plus the provider call counts and the text or error.
``POST /api/load`` runs the load mode (:func:`run_load`) and returns its per-second series.
The page renders only what the server returns: nothing about routing is re-implemented in
JavaScript. Bad input is a 400 ``{"error": "<field>: <problem and fix>", "field": ...}``.

With a :class:`LiveView` (the gateway's ``gateway.lab_live``), the page also shows the
gateway's own last requests; every live endpoint asks ``LiveView.authorize`` first (the
gateway's admin key):

* ``GET /api/live/meta``: what the filters offer (routes, outcomes, workflows) and ``keep``;
* ``GET /api/live``: the kept records that match ``?route=&outcome=&workflow=`` (JSON);
* ``GET /api/live/stream``: the same as server-sent events: one ``snapshot``, then a ``record``
  event per request as it finishes (a viewer that fell behind gets a new ``snapshot``);
* ``GET /api/live/{request_id}/scenario``: that request's fault pattern as a custom scenario
  and the settings to run it with (:func:`~failover.lab._pattern.scenario_from_record`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from ._custom import EXAMPLE, BadInput, CustomScenario, parse_custom_text
from ._live import OUTCOMES, WORKFLOWS, LiveFilter, LiveRecords, TooManyViewers, Viewer, snapshot_event
from ._load import DEFAULT_SCHEDULE, MAX_CLIENTS, MAX_DURATION, MAX_REQUESTS, LoadResult, parse_load, run_load
from ._pattern import NothingToReplay, scenario_from_record
from ._seed import (
    BUILT_IN,
    CAPABILITIES,
    CUSTOM,
    MAX_BUDGET,
    MAX_RETRIES,
    SCENARIOS,
    LabPolicies,
    SeedOptions,
    SeedResult,
    run_virtual,
)

STATIC = Path(__file__).parent / "static"


def _number(body: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadInput(name, f"must be a number, got {value!r}")
    if not lo < value <= hi:
        raise BadInput(name, f"must be > {lo:g} and <= {hi:g}, got {value!r}")
    return float(value)


def parse_options(body: Any) -> SeedOptions:
    """The page's settings as SeedOptions; :class:`BadInput` names the first bad field."""
    if not isinstance(body, dict):
        raise BadInput("body", "must be a JSON object")
    fields = {"scenario", "capability", "budget", "a_extra_retries", "attempt_cap", "custom", "fallback_reserve"}
    unknown = sorted(set(body) - fields)
    if unknown:
        raise BadInput(unknown[0], "unknown field")
    scenario = body.get("scenario", "healthy")
    if scenario not in (*SCENARIOS, CUSTOM):
        raise BadInput("scenario", f"must be one of {', '.join((*SCENARIOS, CUSTOM))}, got {scenario!r}")
    custom = _custom(body.get("custom")) if scenario == CUSTOM else None
    capability = body.get("capability", "chat")
    if capability not in CAPABILITIES:
        raise BadInput("capability", f"must be one of {', '.join(CAPABILITIES)}, got {capability!r}")
    retries = body.get("a_extra_retries", 1)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise BadInput("a_extra_retries", f"must be an integer from 0 to {MAX_RETRIES}, got {retries!r}")
    budget = _number(body, "budget", 3.0, 0.0, MAX_BUDGET)
    reserve = body.get("fallback_reserve")
    if reserve is not None:
        if isinstance(reserve, bool) or not isinstance(reserve, int | float) or not 0 <= reserve <= budget:
            raise BadInput(
                "fallback_reserve", f"must be null (automatic) or seconds from 0 to the budget, got {reserve!r}"
            )
        reserve = float(reserve)
    return SeedOptions(
        scenario=scenario,
        capability=capability,
        budget=budget,
        a_extra_retries=retries,
        attempt_cap=_number(body, "attempt_cap", 1.0, 0.0, MAX_BUDGET),
        custom=custom,
        fallback_reserve=reserve,
    )


def _custom(text: Any) -> CustomScenario:
    """The custom scenario's text; an error's field is ``custom`` or ``custom.<path>``."""
    if text is None or text == "":
        raise BadInput("custom", "is empty; describe what A, B and C answer (see the example)")
    try:
        return parse_custom_text(text)
    except BadInput as exc:
        field = exc.field if exc.field == "custom" else f"custom.{exc.field}"
        raise BadInput(field, exc.problem) from None


def result_body(result: SeedResult) -> dict[str, Any]:
    """What ``POST /api/run`` returns: the RouteRecord's dict plus the run's options and outputs."""
    o = result.options
    return {
        **result.record.to_dict(),
        "options": {
            "scenario": o.scenario,
            "capability": o.capability,
            "budget": o.budget,
            "a_extra_retries": o.a_extra_retries,
            "attempt_cap": o.attempt_cap,
            "fallback_reserve": o.fallback_reserve,
            "stream": bool(o.custom and o.custom.stream),
        },
        "calls": dict(result.calls),
        "text": result.text,
        "error": result.error,
    }


def load_body(result: LoadResult) -> dict[str, Any]:
    """What ``POST /api/load`` returns: the options as run, the per-second series, the summary."""
    o = result.options
    return {
        "options": {
            "clients": o.clients,
            "duration": o.duration,
            "rate": o.rate,
            "budget": o.budget,
            "a_extra_retries": o.a_extra_retries,
            "rpm": o.rpm,
            "deployments": o.deployments,
            "balance": o.balance,
            "seed": o.seed,
        },
        "schedule": {
            name: [{"from": f.start, "to": f.end, "reply": f.reply.to_string()} for f in faults]
            for name, faults in o.schedule.items()
        },
        **result.to_dict(),
    }


async def _index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html")


async def _body(request: Request) -> Any:
    try:
        return json.loads(await request.body() or b"{}")
    except (ValueError, RecursionError):
        raise BadInput("body", "not valid JSON; send a JSON object") from None


def _bad(exc: BadInput) -> Response:
    return JSONResponse({"error": str(exc), "field": exc.field}, status_code=400)


async def _run(request: Request) -> Response:
    try:
        opts = parse_options(await _body(request))
    except BadInput as exc:
        return _bad(exc)
    policies: LabPolicies = request.app.state.policies
    result = await asyncio.to_thread(run_virtual, dataclasses.replace(opts, policies=policies))
    return JSONResponse(result_body(result))


async def _load(request: Request) -> Response:
    try:
        opts = parse_load(await _body(request))
    except BadInput as exc:
        return _bad(exc)
    result = await asyncio.to_thread(run_load, opts)
    return JSONResponse(load_body(result))


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveView:
    """What the page's live view needs from the gateway that serves it.

    ``authorize(request)``: None to let the request through, else the error response to send
    (the gateway's admin key check). ``routes()``: the route names to offer as a filter.
    ``closing()``: True while the gateway drains (no new stream is opened)."""

    records: LiveRecords
    authorize: Callable[[Request], Awaitable[Response | None]]
    routes: Callable[[], Sequence[str]] = lambda: ()
    closing: Callable[[], bool] = lambda: False


def _no_store(body: Any, status: int = 200) -> Response:
    return JSONResponse(body, status_code=status, headers={"cache-control": "no-store"})


def _live_routes(live: LiveView) -> list[Route]:
    """The live view's endpoints; each asks ``live.authorize`` before anything else."""

    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            refused = await live.authorize(request)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except BadInput as exc:
                return _bad(exc)

        return endpoint

    def choices() -> dict[str, Any]:
        return {
            "keep": live.records.keep,
            "routes": sorted(live.routes()),
            "outcomes": list(OUTCOMES),
            "workflows": list(WORKFLOWS),
        }

    async def meta(request: Request) -> Response:
        return _no_store(choices())

    async def records(request: Request) -> Response:
        flt = LiveFilter.parse(request.query_params)
        return _no_store({**choices(), "records": live.records.snapshot(flt)})

    async def stream(request: Request) -> Response:
        flt = LiveFilter.parse(request.query_params)
        if live.closing():
            return _no_store({"error": "the gateway is shutting down", "field": None}, 503)
        try:
            viewer = live.records.subscribe(flt)
        except TooManyViewers as exc:
            return _no_store({"error": str(exc), "field": None}, 503)
        return _EventStream(live.records, viewer)

    async def scenario(request: Request) -> Response:
        request_id = request.path_params["request_id"]
        rec = live.records.get(request_id)
        if rec is None:
            return _no_store(
                {"error": f"request {request_id[:80]!r} is not among the last {live.records.keep} kept", "field": None},
                404,
            )
        try:
            return _no_store(scenario_from_record(rec).to_dict())
        except NothingToReplay as exc:
            return _no_store({"error": str(exc), "field": None}, 422)

    return [
        Route("/api/live", guarded(records), methods=["GET"]),
        Route("/api/live/meta", guarded(meta), methods=["GET"]),
        Route("/api/live/stream", guarded(stream), methods=["GET"]),
        Route("/api/live/{request_id}/scenario", guarded(scenario), methods=["GET"]),
    ]


class _EventStream(StreamingResponse):
    """The live stream (``text/event-stream``): a snapshot, then each record as it finishes.

    Its own loop, not StreamingResponse's: that notices a client that left only at its next
    write (under ASGI 2.4), and an idle viewer writes every 15 s. Here a task waits for the
    disconnect and ends the stream at once, so the viewer's slot is freed at once too."""

    def __init__(self, records: LiveRecords, viewer: Viewer) -> None:
        super().__init__(
            iter(()),  # (the body is written by __call__; no content-length is set)
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )
        self.records = records
        self.viewer = viewer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        viewer = self.viewer

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            viewer.closed = True
            viewer.wake.set()

        gone = asyncio.ensure_future(disconnected())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            chunk: bytes | None = snapshot_event(self.records.entries(viewer.filter), self.records.keep)
            while chunk is not None:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                chunk = await self.records.watch(viewer)
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we wrote
        finally:
            gone.cancel()
            self.records.unsubscribe(viewer)


def lab_app(
    custom: CustomScenario | None = None, *, live: LiveView | None = None, policies: LabPolicies = BUILT_IN
) -> Starlette:
    """The lab's ASGI app: mount it anywhere (the page uses relative URLs).

    ``custom``: a scenario to preload into the page's custom editor (``failover lab --scenario``).
    ``live``: the gateway's live view of its own requests (off when None). ``policies``: the
    backoff and retry budget the simulator runs with (a config file's, or the lab's own)."""

    async def meta(request: Request) -> Response:
        return JSONResponse(
            {
                "scenarios": [*SCENARIOS, CUSTOM],
                "capabilities": list(CAPABILITIES),
                "custom": custom.source if custom is not None else EXAMPLE,
                "preloaded": custom is not None,
                "schedule": DEFAULT_SCHEDULE,
                "limits": {"clients": MAX_CLIENTS, "duration": MAX_DURATION, "requests": MAX_REQUESTS},
                "live": live is not None,
                "policies": policies.describe(),
            }
        )

    app = Starlette(
        routes=[
            Route("/", _index, methods=["GET"]),
            Route("/api/meta", meta, methods=["GET"]),
            Route("/api/run", _run, methods=["POST"]),
            Route("/api/load", _load, methods=["POST"]),
            *(_live_routes(live) if live is not None else []),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )
    app.state.policies = policies
    return app


__all__ = ["BadInput", "LiveView", "lab_app", "load_body", "parse_options", "result_body"]
