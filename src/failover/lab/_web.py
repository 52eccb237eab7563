"""The lab in the browser: a page over the seed scenarios, run by the real router on virtual time.

``lab_app()`` is a small Starlette app. ``GET /`` serves the page (plain HTML, CSS and JS
shipped in ``failover/lab/static``, no build step); ``POST /api/run`` takes the page's
settings, runs :func:`run_virtual` in a worker thread (it drives its own virtual-time loop)
and returns the RouteRecord plus the provider call counts and the text or error. The page
renders only what the server returns: nothing about routing is re-implemented in JavaScript.
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

from ._seed import CAPABILITIES, SCENARIOS, SeedOptions, SeedResult, run_virtual

STATIC = Path(__file__).parent / "static"
MAX_BUDGET = 60.0  # seconds of virtual time; the page's slider stops well below
MAX_RETRIES = 10


class BadInput(ValueError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


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
    unknown = sorted(set(body) - {"scenario", "capability", "budget", "a_extra_retries", "attempt_cap"})
    if unknown:
        raise BadInput(unknown[0], "unknown field")
    scenario = body.get("scenario", "healthy")
    if scenario not in SCENARIOS:
        raise BadInput("scenario", f"must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    capability = body.get("capability", "chat")
    if capability not in CAPABILITIES:
        raise BadInput("capability", f"must be one of {', '.join(CAPABILITIES)}, got {capability!r}")
    retries = body.get("a_extra_retries", 1)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise BadInput("a_extra_retries", f"must be an integer from 0 to {MAX_RETRIES}, got {retries!r}")
    return SeedOptions(
        scenario=scenario,
        capability=capability,
        budget=_number(body, "budget", 3.0, 0.0, MAX_BUDGET),
        a_extra_retries=retries,
        attempt_cap=_number(body, "attempt_cap", 1.0, 0.0, MAX_BUDGET),
    )


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
        },
        "calls": dict(result.calls),
        "text": result.text,
        "error": result.error,
    }


async def _index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html")


async def _meta(request: Request) -> Response:
    return JSONResponse({"scenarios": list(SCENARIOS), "capabilities": list(CAPABILITIES)})


async def _run(request: Request) -> Response:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return JSONResponse({"error": "body: not valid JSON", "field": "body"}, status_code=400)
    try:
        opts = parse_options(body)
    except BadInput as exc:
        return JSONResponse({"error": str(exc), "field": exc.field}, status_code=400)
    result = await asyncio.to_thread(run_virtual, opts)
    return JSONResponse(result_body(result))


def lab_app() -> Starlette:
    """The lab's ASGI app: mount it anywhere (the page uses relative URLs)."""
    return Starlette(
        routes=[
            Route("/", _index, methods=["GET"]),
            Route("/api/meta", _meta, methods=["GET"]),
            Route("/api/run", _run, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )


__all__ = ["BadInput", "lab_app", "parse_options", "result_body"]
