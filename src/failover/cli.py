"""The ``failover`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._extras import extra_for
from .model import ConfigError

if TYPE_CHECKING:
    from .config import ConfigReport

# What `failover serve` answers: kept next to its --help and checked against the app's routes.
ENDPOINTS = (
    ("POST", "/v1/chat/completions", "OpenAI Chat Completions (plain and streamed)"),
    ("POST", "/v1/messages", "Anthropic Messages (plain and streamed)"),
    ("POST", "/v1/messages/count_tokens", "Anthropic token counting"),
    ("POST", "/v1/responses", "OpenAI Responses (plain and streamed; stateless)"),
    ("GET", "/v1/responses/{id}", "404 (also DELETE): failover keeps no responses"),
    ("POST", "/v1/embeddings", "OpenAI Embeddings (the route's model or an equivalent, never another)"),
    ("GET", "/v1/models", "the routes the caller may use, as models"),
    ("GET", "/v1/models/{name}", "one of them"),
    ("GET", "/healthz", "liveness"),
    ("GET", "/readyz", "readiness (503 while draining)"),
    ("GET", "/metrics", "Prometheus metrics (admin key unless configured otherwise)"),
    ("GET", "/admin/health", "breakers, limiters, tenants (admin key)"),
    ("GET", "/openapi.json", "the OpenAPI document"),
    ("GET", "/lab/", "the lab page (gateway.lab: true, or the embedded default)"),
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("failover")
    except PackageNotFoundError:  # pragma: no cover - run from a tree that was never installed
        return "unknown (not installed)"


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


def _print_problems(report: ConfigReport) -> None:
    for p in (*report.errors, *report.warnings):
        print(p, file=sys.stderr)


def _check(args: argparse.Namespace) -> int:
    from .config import check_config

    report = check_config(args.config, offline=args.offline)
    _print_problems(report)
    cfg = report.config
    if cfg is not None:
        for name, route in cfg.routes.items():
            chain = " -> ".join(t.name for t in route.primary)
            fb = ", ".join(t.name for t in route.fallbacks) or "none"
            print(f"route {name}: {chain} (fallbacks: {fb})")
        also = [s for s, present in (("gateway", cfg.gateway), ("ledger", cfg.ledger)) if present is not None]
        if cfg.state.backend != "memory":
            also.insert(0, f"state ({cfg.state.backend})")
        if also:
            print("also checked: " + ", ".join(also))
    if report.offline and report.needs:
        env = [n.removeprefix("env:") for n in report.needs if n.startswith("env:")]
        files = [n.removeprefix("file:") for n in report.needs if n.startswith("file:")]
        where = [f"environment variables {', '.join(env)}" if env else "", f"files {', '.join(files)}" if files else ""]
        print("not read (--offline); where it runs, set: " + "; ".join(w for w in where if w))
    errors, warnings = len(report.errors), len(report.warnings)
    counts = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    if errors:
        print(f"failover check-config: {args.config}: {counts}", file=sys.stderr)
        return 2
    print(f"{args.config}: ok ({counts})")
    return 0


def _capacity(args: argparse.Namespace) -> int:
    from .config import check_config
    from .policy import plan_capacity, render_capacity

    targets = []
    if args.config:
        report = check_config(args.config, offline=True)  # limits need no credentials
        _print_problems(report)
        cfg = report.config
        if cfg is None:
            print(f"failover capacity: {args.config}: {len(report.errors)} error(s)", file=sys.stderr)
            return 2
        if args.route:
            if args.route not in cfg.routes:
                raise ValueError(f"--route: no route {args.route!r} in {args.config}; routes: {', '.join(cfg.routes)}")
            targets = list(cfg.routes[args.route].targets)
        else:
            targets = list(cfg.targets.values())
    elif args.route:
        raise ValueError("--route needs --config: the file that defines the route")
    report_ = plan_capacity(args.qps, args.input, args.output, targets, args.safety, latency=args.latency)
    print(render_capacity(report_), end="")
    if not args.config:
        print("Pass --config FILE (and --route NAME) to compare this with each target's configured limits.")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from .lab import ReplayOptions, run_replay

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
    from .gateway import ServeOptions, serve

    opts = ServeOptions(
        config=args.config, host=args.host, port=args.port, workers=args.workers, log_level=args.log_level
    )
    serve(opts)
    return 0


def _lab(args: argparse.Namespace) -> int:
    from .lab import BadInput, CustomScenario, LabPolicies, SeedOptions, parse_custom_text, render, run_virtual

    policies = LabPolicies()
    if args.config is not None:
        from .config import check_config

        report = check_config(args.config, offline=True)  # the simulator sends nothing: no credentials
        _print_problems(report)
        cfg = report.config
        if cfg is None:
            print(f"failover lab: {args.config}: {len(report.errors)} error(s)", file=sys.stderr)
            return 2
        policies = LabPolicies.of(cfg.backoff, cfg.retry_budget, Path(args.config).name)
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
            print(render(run_virtual(SeedOptions(scenario="custom", custom=custom, policies=policies))))
            return 0
    import uvicorn

    from .lab import lab_app

    print(f"failover lab: http://{args.host}:{args.port}/", file=sys.stderr)
    uvicorn.run(lab_app(custom, policies=policies), host=args.host, port=args.port, log_level="warning")
    return 0


def _env_log_level() -> str:
    level = os.environ.get("FAILOVER_LOG_LEVEL", "").strip().lower()
    return level if level in ("critical", "error", "warning", "info", "debug") else "info"


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    endpoints = "\n".join(f"  {method:<5} {path:<27} {what}" for method, path, what in ENDPOINTS)
    srv = sub.add_parser(
        "serve",
        help="run the OpenAI- and Anthropic-compatible gateway (without --config: the embedded default)",
        description="Serve the routes of a config file under uvicorn, with these endpoints:\n\n"
        f"{endpoints}\n\n"
        "Without --config it serves the embedded default: routes chat and flaky over built-in fake providers, "
        "in-memory state, open on loopback only, with the lab page. Needs the gateway extra "
        "(pip install 'failover[gateway]'). See docs/gateway.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    srv.add_argument(
        "--config", default=None, help="the config file (routes, targets and the gateway:, ledger:, state: sections)"
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    srv.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default=_env_log_level(),
        help="the gateway's, uvicorn's and the HTTP libraries' log level (default info, or FAILOVER_LOG_LEVEL);"
        " credentials are left out of every line at every level",
    )
    srv.set_defaults(func=_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="failover", description="Dependable LLM API calls.")
    parser.add_argument("--version", action="version", version=f"failover {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run the seed scenarios against the built-in fake providers (virtual time)",
        description="Play the seed route A -> B -> C through failures (healthy, rate limited, timeouts, all "
        "failing) for each required capability, on virtual loop time against built-in fake providers, and print "
        "each path, its attempt timeline and the RouteRecord. Instant, and the same on every run for one --seed. "
        "Needs the gateway extra (its virtual clock, looptime).",
    )
    demo.add_argument(
        "--scenario",
        choices=["healthy", "rate_limited", "timeout", "all_failing"],
        help="only this scenario (default: all of them)",
    )
    demo.add_argument(
        "--capability",
        choices=["chat", "structured_output", "vision"],
        help="only this required capability (default: each of them)",
    )
    demo.add_argument("--budget", type=float, default=3.0, help="end-to-end budget in seconds (default 3.0)")
    demo.add_argument("--a-retries", type=int, default=1, help="extra retries allowed on A (default 1)")
    demo.add_argument("--attempt-cap", type=float, default=1.0, help="per-attempt cap in seconds (default 1.0)")
    demo.add_argument("--seed", type=int, default=0, help="backoff jitter seed (default 0)")
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

    check = sub.add_parser(
        "check-config",
        help="check a whole config file and list every problem",
        description="Check a config file as every entry point reads it (routes, targets, the shared policies, "
        "state:, upstream:, gateway:, ledger:) and list every problem, one per line, as FILE:LINE:COLUMN: field: "
        "problem. Fix: .... Warnings (allowed, but probably not meant) do not fail the check. Exit status: 0 "
        "when there is no error, 2 otherwise.",
    )
    check.add_argument("config", help="the config file (YAML)")
    check.add_argument(
        "--offline",
        action="store_true",
        help="check the structure only: do not read credentials or the variables and files named by *_env and "
        "api_key_file (for CI, or a machine without the secrets); what must be set where it runs is listed",
    )
    check.set_defaults(func=_check)

    cap = sub.add_parser(
        "capacity",
        help="the RPM / input TPM / output TPM a peak load needs, per target",
        description="What a peak load needs per minute, and (with --config) how far each target's configured "
        "limits cover it. Credentials are not needed.",
    )
    cap.add_argument("--qps", type=float, required=True, help="peak requests per second")
    cap.add_argument("--input", type=float, required=True, help="average input tokens per request")
    cap.add_argument("--output", type=float, required=True, help="average output tokens per request")
    cap.add_argument("--config", help="the config file: compare the need with each target's configured limits")
    cap.add_argument("--route", help="only the targets of this route (with --config)")
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
    rep.add_argument("--config", required=True, help="the config file holding the route and the candidates")
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
        "router on virtual time. Needs the gateway extra. See docs/lab.md.",
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
    lab.add_argument(
        "--config",
        metavar="FILE",
        help="a failover config file: checked whole (no credentials needed), and the simulator runs with its "
        "backoff and retry_budget",
    )
    lab.set_defaults(func=_lab)
    return parser


def _stdout_gone() -> int:
    """The reader of stdout left (``failover demo --json | head``): stop quietly, as a command
    killed by SIGPIPE would. Python would otherwise print a BrokenPipeError when it flushes
    stdout at exit, so stdout is pointed at /dev/null first."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass
    return 128 + 13  # what a shell reports for a command ended by SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        return _stdout_gone()
    except ConfigError as exc:
        if len(exc.problems) == 1:
            print(f"failover: configuration error: {exc}", file=sys.stderr)
        else:
            print(f"failover: {len(exc.problems)} configuration errors:", file=sys.stderr)
            for p in exc.problems:
                print(p, file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        extra = extra_for(exc)
        if extra is None:
            raise
        print(
            f"failover {args.command}: needs the {extra} extra ({exc.name} is not installed): "
            f"pip install 'failover[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except ValueError as exc:
        print(f"failover: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
