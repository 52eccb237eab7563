"""The ``failover`` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .model import ConfigError


def _reserve(text: str) -> float | None:
    """``--fallback-reserve``: ``auto`` or a number of seconds >= 0."""
    if text.strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the reserve is 0 seconds or more")
    return value


def _demo(args: argparse.Namespace) -> int:
    from .lab import CAPABILITIES, SCENARIOS, SeedOptions, render, run_virtual

    scenarios = [args.scenario] if args.scenario else list(SCENARIOS)
    capabilities = [args.capability] if args.capability else list(CAPABILITIES)
    reserves: list[float | None] = [args.fallback_reserve]
    if args.fallback_reserve is None and "timeout" in scenarios:
        reserves.append(0.0)  # the trade-off: the timeout scenario once more, with nothing kept for B
    out = []
    for reserve in reserves:
        for scenario in scenarios if reserve == args.fallback_reserve else ["timeout"]:
            for capability in capabilities:
                opts = SeedOptions(
                    scenario=scenario,
                    capability=capability,
                    budget=args.budget,
                    a_extra_retries=args.a_retries,
                    attempt_cap=args.attempt_cap,
                    seed=args.seed,
                    fallback_reserve=reserve,
                )
                result = run_virtual(opts)
                if args.json:
                    options = {"scenario": scenario, "capability": capability, "fallback_reserve": reserve}
                    out.append({"options": options, **result.record.to_dict()})
                else:
                    print(render(result))
                    print()
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        print(
            "Route seed: A (openai dialect, chat+structured+vision, retries) -> B (anthropic, no vision) -> "
            "C (gemini), one shared budget; all on virtual loop time against the built-in fake providers."
        )
    return 0


def _check(args: argparse.Namespace) -> int:
    from .config import load_config

    cfg = load_config(args.config)
    for name, route in cfg.routes.items():
        chain = " -> ".join(t.name for t in route.primary)
        fb = ", ".join(t.name for t in route.fallbacks) or "none"
        print(f"route {name}: {chain} (fallbacks: {fb})")
    return 0


def _capacity(args: argparse.Namespace) -> int:
    from .config import load_config
    from .policy import plan_capacity, render_capacity

    targets = []
    if args.config:
        cfg = load_config(args.config)
        if args.route:
            if args.route not in cfg.routes:
                raise ValueError(f"--route: no route {args.route!r} in {args.config}; routes: {', '.join(cfg.routes)}")
            targets = list(cfg.routes[args.route].targets)
        else:
            targets = list(cfg.targets.values())
    report = plan_capacity(args.qps, args.input, args.output, targets, args.safety, latency=args.latency)
    print(render_capacity(report))
    return 0


def _replay(args: argparse.Namespace) -> int:
    from .lab._replay import ReplayOptions, run_replay

    opts = ReplayOptions(
        requests=args.requests,
        config=args.config,
        route=args.route,
        candidates=tuple(args.candidate or ()),
        concurrency=args.concurrency,
        gate=args.gate,
        fake=args.fake,
        budget=args.budget,
    )
    report = run_replay(opts, progress=sys.stderr)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        print()
    else:
        print(report.render())
    return 0


def _serve(args: argparse.Namespace) -> int:
    import logging

    from .gateway import ServeOptions, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(ServeOptions(config=args.config, host=args.host, port=args.port, workers=args.workers))
    return 0


def _lab(args: argparse.Namespace) -> int:
    import uvicorn

    from .lab import SeedOptions, render, run_virtual
    from .lab._custom import BadInput, CustomScenario, parse_custom_text
    from .lab._web import lab_app

    custom: CustomScenario | None = None
    if args.once and args.scenario is None:
        print("failover lab: --once needs --scenario FILE (the scenario to run)", file=sys.stderr)
        return 2
    if args.scenario is not None:
        try:
            custom = parse_custom_text(args.scenario.read_text(encoding="utf-8"))
        except OSError as exc:
            print(f"failover lab: cannot read {args.scenario}: {exc.strerror}", file=sys.stderr)
            return 2
        except BadInput as exc:
            print(f"failover lab: {args.scenario}: {exc}", file=sys.stderr)
            return 2
        if args.once:
            print(render(run_virtual(SeedOptions(scenario="custom", custom=custom))))
            return 0
    print(f"failover lab: http://{args.host}:{args.port}/", file=sys.stderr)
    uvicorn.run(lab_app(custom), host=args.host, port=args.port, log_level="warning")
    return 0


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    srv = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible gateway (without --config: the embedded default over fake providers)",
        description="Serve POST /v1/chat/completions and GET /v1/models over the routes of a config file, under "
        "uvicorn. Without --config it serves the embedded default: routes chat and flaky over built-in fake "
        "providers, in-memory state, open on loopback only. See docs/gateway.md.",
    )
    srv.add_argument("--config", default=None, help="routes/targets YAML, with an optional gateway: section")
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    srv.set_defaults(func=_serve)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="failover", description="Dependable LLM API calls.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the seed scenarios against the built-in fake providers (virtual time)")
    demo.add_argument("--scenario", choices=["healthy", "rate_limited", "timeout", "all_failing"])
    demo.add_argument("--capability", choices=["chat", "structured_output", "vision"])
    demo.add_argument("--budget", type=float, default=3.0, help="end-to-end budget in seconds (default 3.0)")
    demo.add_argument("--a-retries", type=int, default=1, help="extra retries allowed on A (default 1)")
    demo.add_argument("--attempt-cap", type=float, default=1.0, help="per-attempt cap in seconds (default 1.0)")
    demo.add_argument("--seed", type=int, default=0, help="backoff jitter seed")
    demo.add_argument(
        "--fallback-reserve",
        type=_reserve,
        default=None,
        metavar="auto|SECONDS",
        help="time A's replays must leave to the next candidate: auto (default: its expected latency, and no "
        "replay after a timeout) or seconds; 0 lets A's retries spend the whole budget",
    )
    demo.add_argument("--json", action="store_true", help="print the RouteRecords as JSON")
    demo.set_defaults(func=_demo)

    check = sub.add_parser("check-config", help="load a routes/targets YAML file and report problems")
    check.add_argument("config")
    check.set_defaults(func=_check)

    cap = sub.add_parser("capacity", help="the RPM / input TPM / output TPM a peak load needs, per target")
    cap.add_argument("--qps", type=float, required=True, help="peak requests per second")
    cap.add_argument("--input", type=float, required=True, help="average input tokens per request")
    cap.add_argument("--output", type=float, required=True, help="average output tokens per request")
    cap.add_argument("--config", help="routes/targets YAML: compare against each target's configured limits")
    cap.add_argument("--route", help="only the targets of this route")
    cap.add_argument("--safety", type=float, default=0.9, help="usable share of each limit (default 0.9)")
    cap.add_argument("--latency", type=float, default=None, help="seconds per request, to check concurrency limits")
    cap.set_defaults(func=_capacity)

    rep = sub.add_parser(
        "replay",
        help="run recorded requests through the route's primary and each candidate, and compare them",
        description="Replay recorded OpenAI Chat Completions requests (JSONL) through the route's primary and "
        "each candidate, one target at a time, and print transport / contract / task success, latency and cost "
        "side by side.",
    )
    rep.add_argument("requests", help="JSONL file: one Chat Completions request body (or Batch API line) per line")
    rep.add_argument("--config", required=True, help="routes/targets YAML holding the route and the candidates")
    rep.add_argument("--route", required=True, help="the route whose contract the candidates must meet")
    rep.add_argument(
        "--candidate",
        action="append",
        metavar="TARGET",
        help="a target to compare with the route's primary (repeatable; default: the route's fallbacks)",
    )
    rep.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (default 4)")
    rep.add_argument("--gate", metavar="MODULE:FUNCTION", help="a function returning the quality gate (task level)")
    rep.add_argument("--fake", metavar="SCENARIO", help="fake providers: a YAML scenario of target name -> script")
    rep.add_argument("--budget", type=float, default=30.0, help="end-to-end seconds per request (default 30)")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    rep.set_defaults(func=_replay)
    _add_serve(sub)

    lab = sub.add_parser(
        "lab",
        help="serve the lab page: watch the seed route's path through failures (virtual time)",
        description="Serve the lab page: pick a scenario, a required capability, the budget and A's retries, "
        "and see the exclusions, the path, the attempt timeline and the RouteRecord, all computed by the real "
        "router on virtual time. See docs/lab.md.",
    )
    lab.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    lab.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    lab.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE",
        help="a custom scenario (YAML or JSON: what A, B and C answer; see examples/lab-scenario.yaml), "
        "preloaded into the page",
    )
    lab.add_argument(
        "--once", action="store_true", help="with --scenario: print one run as text and exit instead of serving"
    )
    lab.set_defaults(func=_lab)

    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"failover: configuration error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"failover: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
