"""Fake providers served over real HTTP/1.1 on loopback, in the test's own event loop.

    async with FakeServer(openai_fake, claude_fake) as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url_for(openai_fake), api_key="sk-test")
        ...

Why ``asyncio.start_server`` + ``h11`` rather than an ASGI server (uvicorn) or a thread:

* **Same loop, same clock.** The server runs as tasks of the CURRENT event loop, so the
  times it records (``asyncio.get_running_loop().time()``) are on the same clock as the
  client's timeouts, including looptime's virtual clock: a client that gives up after 5 s
  of loop time is recorded as disconnecting at exactly 5.0. A server in another thread or
  process has another clock.
* **Exact disconnect observation.** While a reply hangs, waits or streams, the handler keeps
  a read pending on the socket; the client closing the connection (EOF or reset) wakes it at
  once, the pending answer is cancelled and the call is recorded ``client_disconnected`` with
  the loop time of the close (and, mid-stream, the ``events_sent`` so far). An ASGI server
  only reports ``http.disconnect`` to an app that polls ``receive()``, and hides when the
  socket actually closed.
* **Control of the bytes.** ``reset`` must close the connection with no response at all,
  and 529 must go out with an arbitrary status; h11 is a sans-I/O HTTP/1.1 state machine
  (the one httpx's own stack uses), so framing, keep-alive and chunked encoding are correct
  without writing a parser, and nothing else stands between the script and the socket.
  A stream goes out one HTTP chunk per event (or per ``split_bytes`` piece), each flushed
  at its scripted loop time; ``drop_after`` closes the socket in the middle of the body.

Paths: ``/<provider>/v1/chat/completions``, ``/<provider>/v1/messages``,
``/<provider>/v1beta/models/<model>:generateContent`` (and the streaming and token-count
variants). :meth:`FakeServer.base_url_for` gives the base URL each official SDK expects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from http import HTTPStatus
from types import TracebackType
from typing import Any

import h11

from ..model import Dialect, Secret, Target
from ._exchange import Rendered
from ._provider import _INVALID_JSON, FakeProvider, _ConnectFailed, _events_in, _Reset
from ._records import Outcome, ReceivedCall, _Slot
from ._stream import Dropped, Playback

__all__ = ["FakeServer"]

_MAX_BODY = 64 * 1024 * 1024
_READ = 65536


def _reason(status: int) -> bytes:
    if status == 529:
        return b"Site Overloaded"
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


class FakeServer:
    """Serve fake providers over HTTP/1.1 on ``host:port`` (port 0: any free port).

    >>> async with FakeServer(a, b) as srv:
    ...     srv.base_url_for(a)      # 'http://127.0.0.1:43121/a/v1' for an OpenAI fake
    ...     srv.base_url_for(b)      # 'http://127.0.0.1:43121/b'    for an Anthropic fake

    Keep-alive and pipelined requests are supported. Closing the connection while a reply
    hangs, waits or streams is recorded as ``client_disconnected`` at the loop time of the
    close; calls still pending when the server shuts down are recorded ``aborted``. Streams
    are chunked, an event per chunk, each at its scripted loop time. For code that is not
    async, :meth:`run_in_thread` runs the server in a thread with its own loop.
    """

    def __init__(self, *providers: FakeProvider, host: str = "127.0.0.1", port: int = 0) -> None:
        self._providers: dict[str, FakeProvider] = {}
        for p in providers:
            if p.name in self._providers and self._providers[p.name] is not p:
                raise ValueError(f"FakeServer already has a provider named {p.name!r}")
            self._providers[p.name] = p
        self.host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._log: list[_Slot] = []
        self._accepted = 0

    # -- addresses ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeServer is not started: use `async with FakeServer(...) as srv`")
        return self._port

    @property
    def root_url(self) -> str:
        """``http://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _provider(self, provider: FakeProvider | str) -> FakeProvider:
        name = provider if isinstance(provider, str) else provider.name
        try:
            return self._providers[name]
        except KeyError:
            raise KeyError(f"FakeServer serves no provider {name!r} (has: {', '.join(self._providers)})") from None

    def url_for(self, provider: FakeProvider | str) -> str:
        """``http://host:port/<name>``: the provider's root, without an API version."""
        return f"{self.root_url}/{self._provider(provider).name}"

    def api_url_for(self, provider: FakeProvider | str) -> str:
        """The root plus the API version: ``.../<name>/v1`` (Gemini: ``.../<name>/v1beta``;
        Bedrock: the root, its endpoints have no version). This is the convention of
        :class:`~failover.model.Target` ``base_url``."""
        p = self._provider(provider)
        if p.dialect is Dialect.BEDROCK:
            return self.url_for(p)
        return f"{self.url_for(p)}/{'v1beta' if p.dialect is Dialect.GEMINI else 'v1'}"

    def base_url_for(self, provider: FakeProvider | str) -> str:
        """The ``base_url`` the provider's official SDK expects: ``openai`` wants ``.../v1``;
        ``anthropic``, ``google-genai`` and boto3's ``bedrock-runtime`` (``endpoint_url``) append
        the rest themselves, so they get the root."""
        p = self._provider(provider)
        return self.api_url_for(p) if p.dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES) else self.url_for(p)

    def target_for(self, provider: FakeProvider | str, model: str | None = None, **overrides: Any) -> Target:
        """A Target that reaches ``provider`` through this server (see FakeProvider.target)."""
        p = self._provider(provider)
        root = overrides.get("vertex") is not None  # Vertex paths start at the root: /v1/projects/...
        fields: dict[str, Any] = {"base_url": self.url_for(p) if root else self.api_url_for(p)}
        if p.dialect is not Dialect.BEDROCK:  # Bedrock: signed with AWS credentials, no key
            fields["api_key"] = Secret(f"sk-fake-{p.name}")
        fields.update(overrides)
        return p.target(model, **fields)

    @property
    def providers(self) -> tuple[FakeProvider, ...]:
        return tuple(self._providers.values())

    @property
    def connections_accepted(self) -> int:
        """How many TCP connections the server has accepted (keep-alive reuses one)."""
        return self._accepted

    @property
    def calls(self) -> list[ReceivedCall]:
        """Every call this server received, across providers, in arrival order."""
        return [s.record for s in self._log]

    def __repr__(self) -> str:
        where = self.root_url if self._server is not None else "not started"
        return f"FakeServer({', '.join(repr(n) for n in self._providers)}, {where})"

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> FakeServer:
        if self._server is not None:
            return self
        self._closing = False
        # A deep accept queue: a load test opens hundreds of connections at once, and a connect
        # beyond asyncio's default backlog (100) waits for a TCP retransmission, a second of real
        # time that virtual time cannot skip (its request would time out for no fault of its own).
        self._server = await asyncio.start_server(self._on_connection, self.host, self._port, backlog=4096)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        """Stop listening, abort open connections; pending calls are recorded ``aborted``."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> FakeServer:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @contextlib.contextmanager
    def run_in_thread(self) -> Iterator[FakeServer]:
        """Run the server in a background thread with its own event loop, for sync code.

        >>> with FakeServer(a).run_in_thread() as srv:
        ...     openai.OpenAI(base_url=srv.base_url_for(a), api_key="sk-test").chat.completions.create(...)

        Recorded times are on that thread's loop clock.
        """
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # reported to the caller's thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.aclose())
                loop.close()

        thread = threading.Thread(target=main, name=f"failover-fake-server-{id(self):x}", daemon=True)
        thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)

    # -- one connection -----------------------------------------------------------------------

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._accepted += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_BODY)
        try:
            while True:
                request = await self._read_request(conn, reader)
                if request is None:
                    break
                head, body = request
                if not await self._exchange(conn, reader, writer, head, body):
                    break
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (ConnectionError, h11.ProtocolError, OSError):
            pass
        except asyncio.CancelledError:
            # aclose() cancels connections; a connection task must not END cancelled, or
            # asyncio's stream callback (task.exception()) raises on Python 3.11.
            if not self._closing:
                raise
        finally:
            if task is not None:
                self._tasks.discard(task)
            if self._closing:
                writer.transport.abort()
            else:
                writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader
    ) -> tuple[h11.Request, bytes] | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(_READ))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > _MAX_BODY:
                    return None
            elif isinstance(event, h11.EndOfMessage):
                return (head, bytes(body)) if head is not None else None
            else:  # ConnectionClosed or PAUSED
                return None

    async def _exchange(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: h11.Request,
        raw: bytes,
    ) -> bool:
        """Answer one request. False when the connection must be closed."""
        loop = asyncio.get_running_loop()
        target = head.target.decode("latin-1")
        path, _, query = target.partition("?")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
        _, name, rest = path.split("/", 2) if path.count("/") >= 2 else ("", path.strip("/"), "")
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(f"/{n}/" for n in self._providers) or "none"
            body = json.dumps({"error": f"no fake provider at /{name}/ (serving: {known})"}).encode()
            await self._write(conn, writer, 404, (("content-type", "application/json"),), body, ())
            return True
        parsed: Any = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = _INVALID_JSON

        answer = asyncio.ensure_future(
            provider._respond(
                head.method.decode("latin-1"),
                "/" + rest,
                query,
                headers,
                parsed,
                on_cancel=self._cancel_outcome,
                log=self._log,
                wire=(head.method.decode("latin-1"), f"http://{headers.get('host', self.host)}{target}", raw),
            )
        )
        gone = await self._watching(conn, reader, answer)
        if gone:
            if answer.done() and not answer.cancelled() and answer.exception() is None:
                slot, _ = answer.result()
                FakeProvider._finish(slot, Outcome.CLIENT_DISCONNECTED, loop.time())
            return False
        try:
            slot, rendered = answer.result()
        except (_Reset, _ConnectFailed):
            writer.close()
            return False
        if rendered.timing is not None:
            return await self._stream(conn, reader, writer, slot, rendered)
        try:
            await self._write(conn, writer, rendered.status, rendered.headers, rendered.body, rendered.chunks)
        except (ConnectionError, OSError):
            FakeProvider._finish(slot, Outcome.CLIENT_DISCONNECTED, loop.time())
            return False
        FakeProvider._finish(slot, Outcome.COMPLETED, loop.time(), events=_events_in(rendered))
        return True

    async def _watching(self, conn: h11.Connection, reader: asyncio.StreamReader, work: asyncio.Future[Any]) -> bool:
        """Wait for ``work`` while a read stays pending on the socket. True when the client
        went away first (EOF or reset); ``work`` is then cancelled. Bytes of a pipelined
        request are kept for h11's next cycle."""
        watch: asyncio.Future[bytes] | None = None
        gone = False
        try:
            while not work.done():
                if watch is None:
                    watch = asyncio.ensure_future(reader.read(_READ))
                await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
                if watch.done():
                    try:
                        data = watch.result()
                    except (ConnectionError, OSError):
                        data = b""
                    watch = None
                    if not data:  # EOF or reset: the client went away
                        gone = True
                        break
                    conn.receive_data(data)  # a pipelined request: kept for the next cycle
        finally:
            if watch is not None:
                # Settle the pending read before anyone reads again; bytes it may have
                # taken are fed to h11, and an EOF it saw means the client is gone.
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                    data = await watch
                    if data:
                        conn.receive_data(data)
                    else:
                        gone = True
            if not work.done():
                work.cancel()
                with contextlib.suppress(
                    asyncio.CancelledError, _Reset, _ConnectFailed, Dropped, ConnectionError, OSError
                ):
                    await work
            # The suppressions above are for the inner futures' own cancellation; if THIS
            # task was cancelled meanwhile (server shutdown), that must not be swallowed, or
            # the connection would go on to wait for a next request forever.
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise asyncio.CancelledError
        return gone

    async def _stream(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        slot: _Slot,
        rendered: Rendered,
    ) -> bool:
        """Send an answer delivered over time: the headers now, then each piece as an HTTP
        chunk at its loop time, watching for the client going away meanwhile."""
        assert rendered.timing is not None
        loop = asyncio.get_running_loop()
        try:
            writer.write(conn.send(_response(rendered.status, rendered.headers, length=None)))
            await writer.drain()
        except (ConnectionError, OSError):
            FakeProvider._finish(slot, Outcome.CLIENT_DISCONNECTED, loop.time())
            return False
        playback = Playback(slot, rendered.chunks, rendered.timing, start=loop.time())
        pump = asyncio.ensure_future(self._pump(conn, writer, playback))
        try:
            gone = await self._watching(conn, reader, pump)
        except asyncio.CancelledError:  # the server is shutting down (or the loop is)
            playback.abandon(self._cancel_outcome())
            raise
        if gone:
            playback.abandon(Outcome.CLIENT_DISCONNECTED)
            return False
        failure = pump.exception()
        if isinstance(failure, Dropped):
            writer.close()  # FIN in the middle of a chunked body: the client sees it incomplete
            return False
        if isinstance(failure, ConnectionError | OSError):
            playback.abandon(Outcome.CLIENT_DISCONNECTED)
            return False
        if failure is not None:
            raise failure
        return True

    @staticmethod
    async def _pump(conn: h11.Connection, writer: asyncio.StreamWriter, playback: Playback) -> None:
        while (piece := await playback.next()) is not None:
            writer.write(conn.send(h11.Data(data=piece)))  # one chunk per piece, flushed
            await writer.drain()
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()

    def _cancel_outcome(self) -> Outcome:
        return Outcome.ABORTED if self._closing else Outcome.CLIENT_DISCONNECTED

    @staticmethod
    async def _write(
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        status: int,
        headers: tuple[tuple[str, str], ...],
        body: bytes,
        chunks: tuple[bytes, ...],
    ) -> None:
        writer.write(conn.send(_response(status, headers, length=None if chunks else len(body))))
        if chunks:
            for chunk in chunks:  # one write per event, as a streaming server sends them
                writer.write(conn.send(h11.Data(data=chunk)))
                await writer.drain()
        elif body:
            writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()


def _response(status: int, headers: tuple[tuple[str, str], ...], *, length: int | None) -> h11.Response:
    """The status line and headers; without a ``length`` h11 frames the body as chunked."""
    fields = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    fields.append((b"server", b"failover-fake"))
    if length is not None:
        fields.append((b"content-length", str(length).encode()))
    return h11.Response(status_code=status, headers=fields, reason=_reason(status))
