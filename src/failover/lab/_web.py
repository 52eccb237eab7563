"""The lab in the browser: a page over the seed scenarios, run by the real router on virtual time.

``lab_app()`` is a small Starlette app. ``GET /`` serves the page (plain HTML, CSS and JS
shipped in ``failover/lab/static``, no build step); ``POST /api/run`` takes the page's
settings (a built-in scenario, or ``"scenario": "custom"`` with the scenario's YAML/JSON text
in ``custom``), runs :func:`run_virtual` in a worker thread (it drives its own virtual-time
loop) and returns the RouteRecord plus the provider call counts and the text or error.
``POST /api/load`` runs the load mode (:func:`run_load`) and returns its per-second series.
The page renders only what the server returns: nothing about routing is re-implemented in
JavaScript. Bad input is a 400 ``{"error": "<field>: <problem and fix>", "field": ...}``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ._custom import EXAMPLE, BadInput, CustomScenario, parse_custom_text
from ._load import DEFAULT_SCHEDULE, MAX_CLIENTS, MAX_DURATION, MAX_REQUESTS, LoadResult, parse_load, run_load
from ._seed import CAPABILITIES, CUSTOM, SCENARIOS, SeedOptions, SeedResult, run_virtual

STATIC = Path(__file__).parent / "static"
MAX_BUDGET = 60.0  # seconds of virtual time; the page's slider stops well below
MAX_RETRIES = 10


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
    result = await asyncio.to_thread(run_virtual, opts)
    return JSONResponse(result_body(result))


async def _load(request: Request) -> Response:
    try:
        opts = parse_load(await _body(request))
    except BadInput as exc:
        return _bad(exc)
    result = await asyncio.to_thread(run_load, opts)
    return JSONResponse(load_body(result))


def lab_app(custom: CustomScenario | None = None) -> Starlette:
    """The lab's ASGI app: mount it anywhere (the page uses relative URLs).

    ``custom``: a scenario to preload into the page's custom editor (``failover lab --scenario``)."""

    async def meta(request: Request) -> Response:
        return JSONResponse(
            {
                "scenarios": [*SCENARIOS, CUSTOM],
                "capabilities": list(CAPABILITIES),
                "custom": custom.source if custom is not None else EXAMPLE,
                "preloaded": custom is not None,
                "schedule": DEFAULT_SCHEDULE,
                "limits": {"clients": MAX_CLIENTS, "duration": MAX_DURATION, "requests": MAX_REQUESTS},
            }
        )

    return Starlette(
        routes=[
            Route("/", _index, methods=["GET"]),
            Route("/api/meta", meta, methods=["GET"]),
            Route("/api/run", _run, methods=["POST"]),
            Route("/api/load", _load, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )


__all__ = ["BadInput", "lab_app", "load_body", "parse_options", "result_body"]
