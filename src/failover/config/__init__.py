"""Loading the config file: routes and targets, the shared policies, and the sections the
gateway reads, with every problem named by its field, line and column, and its fix."""

from ._gateway import GatewaySpec, LedgerSpec
from ._load import Config, ConfigReport, UpstreamSettings, check_config, config_from_dict, load_config, read_yaml

__all__ = [
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
