"""``failover serve``: the gateway under uvicorn (uvloop and httptools when installed)."""

from __future__ import annotations

import asyncio
import copy
import ctypes
import gc
import ipaddress
import logging
import os
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from starlette.applications import Starlette

from ..config import Config
from ..model import ConfigError
from ..router import Router
from ..telemetry import Hook, Hooks
from ._app import create_app
from ._default import embedded_router
from ._ledger import open_ledger
from ._logs import SecretFilter, configure_logging, guard_handlers
from ._settings import GatewaySettings, load_gateway_config

log = logging.getLogger("failover.gateway")

_CONFIG_ENV = "FAILOVER_GATEWAY_CONFIG"  # how worker processes find the config file
LOG_LEVEL_ENV = "FAILOVER_LOG_LEVEL"  # the log level, for worker processes too
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
GC_THRESHOLDS = (50_000, 20, 100)  # see tune_gc
# While a worker thread does a large body's or answer's work, the event loop waits for the GIL
# at each step of every other request (a /healthz probe takes a dozen steps): at Python's 5 ms
# interval a probe waited 90-150 ms behind a 2,048 x 3,072 embeddings answer, at 0.5 ms it
# waits a tenth of that. With no worker thread busy (every ordinary request) it costs nothing.
SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    config: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    log_level: str = "info"


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


Loaded = tuple[Config, GatewaySettings]


def build_app(config: str | None, *, loaded: Loaded | None = None) -> Starlette:
    """The app for a config file, or the embedded default when ``config`` is None.
    ``loaded``: the file as :func:`check` already read it (its warnings are logged once)."""
    router: Router
    reload = None
    if config is None:
        router, _ = embedded_router()
        router.hooks = Hooks(telemetry_hooks())
        settings = GatewaySettings(lab_enabled=True)  # loopback only, and only fake providers
        log.warning("no --config: serving the embedded default (fake providers a, b, c, x; routes chat, flaky; /lab)")
    else:
        path = config

        def build(cfg: Config, settings: GatewaySettings) -> tuple[Router, GatewaySettings]:
            ledger = open_ledger(settings.ledger)  # the store the agents write to (ledger: section)
            return Router.from_config(cfg, hooks=telemetry_hooks(), ledger=ledger), settings

        def reload() -> tuple[Router, GatewaySettings]:
            return build(*load_gateway_config(path))

        router, settings = build(*loaded) if loaded is not None else reload()
    configure_logging(settings.log_format, log_level())
    return create_app(router, settings, close_router=True, drain_on_signals=True, reload=reload)


def telemetry_hooks() -> list[Hook]:
    """OpenTelemetry spans per request and attempt, and the metrics of docs/telemetry.md, when
    asked for and the opentelemetry API is installed: ``FAILOVER_OTEL=1`` turns both on, an
    ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` other than ``none`` each its own. The
    application's tracer and meter providers (the SDK and its exporters) are used as configured
    globally. ``/metrics`` does not depend on this: it always has the same metrics."""
    forced = os.environ.get("FAILOVER_OTEL", "").strip().lower() in ("1", "true", "yes")
    traces = forced or os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() not in ("", "none")
    metrics = forced or os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() not in ("", "none")
    if not (traces or metrics):
        return []
    try:
        from ..telemetry import OpenTelemetryHook

        return [OpenTelemetryHook(traces=traces, metrics=metrics)]
    except ImportError:
        log.warning("OpenTelemetry was asked for but is not installed: pip install 'failover[otel]' and an SDK")
        return []


def log_level() -> str:
    """The level ``failover serve`` logs at: ``--log-level``, else ``FAILOVER_LOG_LEVEL``, else info."""
    level = os.environ.get(LOG_LEVEL_ENV, "").strip().lower()
    return level if level in LOG_LEVELS else "info"


def root_logging(level: str) -> None:
    """The root logger's stderr handler (the HTTP libraries log there), filtered for secrets."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level.upper())
    guard_handlers()


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, with a :class:`SecretFilter` on each of its handlers."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["secrets"] = {"()": SecretFilter}
    for handler in config.get("handlers", {}).values():
        handler["filters"] = [*handler.get("filters", []), "secrets"]
    return config


def app_factory() -> Starlette:
    """uvicorn's ``--factory`` entry point for worker processes (config path from the environment)."""
    root_logging(log_level())
    config = os.environ.get(_CONFIG_ENV) or None
    loaded = None if config is None else load_gateway_config(config)
    app = build_app(config, loaded=loaded)
    http_protocol(GatewaySettings() if loaded is None else loaded[1])  # this worker's deadline
    tune_gc()
    return app


def http_protocol(settings: GatewaySettings) -> type[asyncio.Protocol] | str:
    """httptools with the connection limits of the settings (:mod:`._protocol`), or h11
    where httptools is not installed (only its head-size cap and uvicorn's keep-alive)."""
    if find_spec("httptools") is None:
        log.warning(
            "httptools is not installed: serving with h11, without limits.header_timeout_s, max_headers"
            " and write_timeout_s"
        )
        return "h11"
    from ._protocol import HeadTimeoutProtocol

    HeadTimeoutProtocol.head_timeout_s = settings.header_timeout_s
    HeadTimeoutProtocol.max_head_bytes = settings.max_head_bytes
    HeadTimeoutProtocol.max_headers = settings.max_headers
    HeadTimeoutProtocol.write_timeout_s = settings.write_timeout_s
    return HeadTimeoutProtocol


def tune_gc() -> None:
    """Keep the cyclic garbage collector off the request path's tail latency.

    Everything that exists once the app is built (modules, config, router, pydantic schemas)
    lives for the whole process: ``gc.freeze()`` moves it out of the collector's sight, so a
    full collection walks only what requests created since. A larger first-generation
    threshold makes collections rarer; requests make few reference cycles, so memory does
    not grow by much. Measured in docs/benchmarks.md (gateway section)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    fix_mmap_threshold()
    sys.setswitchinterval(SWITCH_INTERVAL_S)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD_BYTES = 256 * 1024


def fix_mmap_threshold() -> None:
    """Keep every large buffer in its own mapping, returned to the system when freed.

    glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after
    one big answer or body, later big buffers come from the heap, where they leave holes that
    stay resident: measured, an 8 MiB upstream body and a few slow stream readers each left
    20-25 MiB that never came back. A fixed threshold turns that off. Only where the C library
    is glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def check(opts: ServeOptions) -> Loaded | None:
    """Refuse what must not run: a config file with errors, an open gateway (no tenants) on a
    non-loopback address. The file as loaded (None: the embedded default)."""
    settings = GatewaySettings()
    loaded = None
    if opts.config is not None:
        loaded = load_gateway_config(opts.config)  # also validates the file before forking workers
        settings = loaded[1]
    if settings.open and not is_loopback_host(opts.host):
        raise ConfigError(
            "--host",
            f"{opts.host} is not a loopback address, and no tenants are configured (the gateway would be open)",
            "configure gateway.tenants with hashed keys in the config file, or serve on 127.0.0.1",
        )
    if opts.workers < 1:
        raise ConfigError("--workers", "must be at least 1", "give a positive number of worker processes")
    return loaded


def serve(opts: ServeOptions) -> None:
    import uvicorn

    os.environ[LOG_LEVEL_ENV] = opts.log_level
    root_logging(opts.log_level)  # before the config's warnings are logged
    loaded = check(opts)  # the file is read once here; workers read it again, each for itself
    settings = GatewaySettings() if loaded is None else loaded[1]
    drain = settings.drain_seconds
    loop = "uvloop" if find_spec("uvloop") is not None else "asyncio"
    http = http_protocol(settings)
    common = {
        "host": opts.host,
        "port": opts.port,
        "loop": loop,
        "http": http,
        "log_level": opts.log_level,
        "log_config": uvicorn_log_config(),  # its lines pass the secret filter too
        "ws": "none",  # the gateway serves no WebSocket: an upgrade is a plain HTTP request
        "server_header": False,
        "date_header": False,  # one formatted date per response saved; clients do not need it
        "access_log": False,  # the gateway logs one access line per chat request itself
        "proxy_headers": False,  # an open gateway reads X-Forwarded-For itself (_auth.is_loopback)
        "timeout_keep_alive": settings.keep_alive_s,  # an idle connection is closed after this
        "h11_max_incomplete_event_size": settings.max_head_bytes,  # request line + headers (h11 fallback)
        "timeout_graceful_shutdown": int(drain) + 5,  # after our own drain: a last resort
    }
    if opts.workers > 1:
        if opts.config is not None:
            os.environ[_CONFIG_ENV] = os.path.abspath(opts.config)
        else:
            os.environ.pop(_CONFIG_ENV, None)
        uvicorn.run("failover.gateway._serve:app_factory", factory=True, workers=opts.workers, **common)  # type: ignore[arg-type]
    else:
        app = build_app(opts.config, loaded=loaded)  # create_app says once if the gateway is OPEN
        tune_gc()
        uvicorn.run(app, **common)  # type: ignore[arg-type]
