"""Loading the config file: routes and targets, the shared policies, and the sections the
gateway reads, with every problem named by its field, line and column, and its fix."""

from ._gateway import (
    REQUEST_HEADERS,
    CorsSpec,
    EnvelopeSpec,
    GatewaySpec,
    KeySpec,
    LedgerSpec,
    LimitsSpec,
    LogFormat,
    LoggingSpec,
    MetricsSpec,
    Period,
    ShutdownSpec,
    TenantSpec,
    check_gateway,
    check_ledger,
)
from ._load import Config, ConfigReport, UpstreamSettings, check_config, config_from_dict, load_config, read_yaml
from ._problems import Problems

__all__ = [
    "CorsSpec",
    "EnvelopeSpec",
    "KeySpec",
    "LimitsSpec",
    "LogFormat",
    "LoggingSpec",
    "MetricsSpec",
    "Period",
    "Problems",
    "REQUEST_HEADERS",
    "ShutdownSpec",
    "TenantSpec",
    "check_gateway",
    "check_ledger",
    "Config",
    "ConfigReport",
    "GatewaySpec",
    "LedgerSpec",
    "UpstreamSettings",
    "check_config",
    "config_from_dict",
    "load_config",
    "read_yaml",
]
