"""A loopback token endpoint (Google's OAuth token URI, Entra's /oauth2/v2.0/token, Azure's
managed identity endpoint) served from a thread, so the cloud libraries' own HTTP code talks
to it: google-auth from its worker thread, azure-identity from the event loop."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    """One request the endpoint received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    form: dict[str, list[str]] = field(default_factory=dict)


Handler = Callable[[Seen], tuple[int, dict[str, Any]]]


@dataclass
class TokenServer:
    url: str
    seen: list[Seen]


@contextmanager
def token_server(handler: Handler, *, tls: ssl.SSLContext | None = None) -> Iterator[TokenServer]:
    seen: list[Seen] = []

    class _Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            request = Seen(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                form=parse_qs(raw),
            )
            seen.append(request)
            status, body = handler(request)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls is not None else "http"
    try:
        yield TokenServer(url=f"{scheme}://127.0.0.1:{server.server_address[1]}", seen=seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
