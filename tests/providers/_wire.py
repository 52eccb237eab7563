"""Load wire-corpus samples (/work/shared/wire) as HttpResponses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from failover.model import Dialect, Secret, Target
from failover.transport._types import HttpResponse

_STATUS_IN_NAME = re.compile(r"-error-(\d{3})-")


def load_http(path: Path) -> HttpResponse:
    """A ``.http`` sample: status line, CRLF headers (names lower-cased), blank line, body bytes.

    Repeated headers (Set-Cookie, Vary) are joined with ", " as HTTP allows.
    """
    raw = path.read_bytes()
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:  # tolerate a sample saved with bare LF line endings
        head, _, body = raw.partition(b"\n\n")
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return HttpResponse(status=status, headers=headers, body=body)


def load_json(path: Path, status: int | None = None) -> HttpResponse:
    """A ``.json`` body sample: 200 unless given, or the status its file name states (``-error-429-``)."""
    if status is None:
        match = _STATUS_IN_NAME.search(path.name)
        status = int(match.group(1)) if match else 200
    return HttpResponse(status=status, headers={"content-type": "application/json"}, body=path.read_bytes())


def load(wire: Path, name: str) -> HttpResponse:
    path = wire / name
    return load_http(path) if path.suffix == ".http" else load_json(path)


_DEFAULTS = {
    Dialect.OPENAI: ("gpt-4o", "https://api.openai.com/v1"),
    Dialect.OPENAI_RESPONSES: ("gpt-5-mini", "https://api.openai.com/v1"),
    Dialect.ANTHROPIC: ("claude-sonnet-4-5", "https://api.anthropic.com/v1"),
    Dialect.GEMINI: ("gemini-2.5-flash", "https://generativelanguage.googleapis.com/v1beta"),
}


def target(dialect: Dialect, *, api_key: str | None = "sk-test-KEY-123", **kw: Any) -> Target:
    model, base_url = _DEFAULTS[dialect]
    kw.setdefault("model", model)
    kw.setdefault("base_url", base_url)
    return Target(name=f"t-{dialect}", dialect=dialect, api_key=Secret(api_key) if api_key else None, **kw)


def response(status: int, body: bytes | str, **headers: str) -> HttpResponse:
    data = body.encode() if isinstance(body, str) else body
    return HttpResponse(status=status, headers={k.replace("_", "-").lower(): v for k, v in headers.items()}, body=data)
