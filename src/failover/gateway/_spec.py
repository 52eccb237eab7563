"""Reading one section of a gateway config (``gateway:``, ``ledger:``) into its pydantic model.

Both sections refuse bad input the same way: a :class:`~failover.model.ConfigError` naming the
first offending key by its path in the file and saying how to fix it, so this is written once.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..model import ConfigError

_M = TypeVar("_M", bound=BaseModel)


def validate_section(model: type[_M], data: Any, section: str, docs: str) -> _M:
    """``data`` as ``model``; the first problem is a ConfigError at ``section.key[i]...``: an
    unknown key points at ``docs`` for the spelling, a bad value asks for a correct one."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = section + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        fix = f"remove it, or check its spelling against {docs}"
        if first["type"] != "extra_forbidden":
            fix = f"correct the value of {loc}"
        raise ConfigError(loc, first["msg"], fix) from None


__all__ = ["validate_section"]
