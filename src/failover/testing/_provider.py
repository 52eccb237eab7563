"""Scripted fake providers that speak the real wire dialects.

A :class:`FakeProvider` answers each request with the next reply of its :class:`Script`,
rendered in its real wire dialect, and records every request it received as a
:class:`~._records.ReceivedCall`::

    a = FakeProvider("a", "openai", ["rate_limit(retry_after=2)", "ok"])
    ...
    assert [c.kind for c in a.calls] == ["rate_limit", "ok"]

Requests reach it through a :class:`~._network.FakeNetwork` (in process) or a
:class:`~._server.FakeServer` (real HTTP on loopback). Every time recorded is
``asyncio.get_running_loop().time()``.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..model import Dialect, Secret, Target, mark_connected
from ._dialects import SPOKEN, check_request, endpoint_for, fake_for, render, render_unknown_path, requested_model
from ._exchange import Exchange, Rendered
from ._kinds import ReplyKind
from ._quota import Quota, with_headers
from ._records import Outcome, ReceivedCall, _Slot, redact_headers, redact_query
from ._reply import Reply
from ._script import Script, ScriptSpec

__all__ = ["FakeProvider"]

_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


class _Reset(Exception):
    """The fake closes the connection without an answer."""


class _ConnectFailed(Exception):
    def __init__(self, timed_out: bool, after: float) -> None:
        super().__init__("connect timeout" if timed_out else "connection refused")
        self.timed_out = timed_out
        self.after = after


_INVALID_JSON = object()  # a request body that is not JSON


def _default_on_cancel() -> Outcome:
    return Outcome.CLIENT_DISCONNECTED


class FakeProvider:
    """A scripted model provider that speaks a real wire dialect.

    >>> p = FakeProvider("a", "openai", ["rate_limit(retry_after=2)", "ok"], model="gpt-4o-mini")
    >>> p.base_url
    'http://a.fake/v1'

    * ``script``: a :class:`Script`, or its data form (a list of replies, ``{"replies": ...,
      "default": ...}``, or one reply for every call). Default: ``ok`` to every call.
    * ``model``: the provider's model (what a Target names) and the model its answers report.
      Default: a typical name for the dialect (``gpt-4o-mini``, ``gpt-5-mini`` for Responses,
      ``claude-haiku-4-5``, ``gemini-2.5-flash``), and answers then echo whatever model the
      request named.
    * ``latency``: seconds added before every answer (on top of each reply's own).
    * ``connect_latency``: seconds the connection takes before the request is sent; one longer
      than the caller's connect timeout fails as a connect timeout. The moment it is up is
      reported on the loop clock (``Attempt.connected`` in a RouteRecord).
    * ``api_key``: when given, a request must carry exactly this key where the dialect's
      clients put it (``Authorization: Bearer`` / ``api-key``, ``x-api-key``,
      ``x-goog-api-key`` or ``?key=``), or it gets the real "unauthorized" answer. On a Vertex
      AI path it is the access token, in ``Authorization: Bearer`` only. A callable is asked
      whether the credential presented is good (tokens that rotate: ``lambda t: t in live``).
    * ``secret_key``: Bedrock: with ``api_key`` (the access key id), the secret access key;
      the request's SigV4 signature is then recomputed with botocore, and a wrong one gets
      Bedrock's ``InvalidSignatureException``. (Without it only the key id is checked.)
    * ``validate``: answer like the real API when a request lacks a required field
      (``model``, ``messages``, Anthropic ``max_tokens`` and the ``anthropic-version``
      header, Gemini ``contents``, Responses ``input``; a Responses ``max_output_tokens``
      under 16) or is not JSON.

    * ``prefill``: False answers a conversation that ends with an assistant message (a prefill
      of the answer) with the 400 models that do not support it send ("This model does not
      support assistant message prefill. The conversation must end with a user message.").
    * ``rpm``: the provider's own request quota, over any 60 s of the loop clock. A request past
      it gets the real 429 (with ``retry-after`` until a slot frees) instead of its scripted
      reply, which it does not consume; every answer then carries the quota's rate-limit
      headers, as the real APIs send them (OpenAI and Responses ``x-ratelimit-limit-requests``
      / ``-remaining-requests`` / ``-reset-requests``, Anthropic
      ``anthropic-ratelimit-requests-limit`` / ``-remaining`` / ``-reset``).

    Calls rejected by ``api_key``, ``validate`` or ``prefill`` are recorded with ``scripted=False`` and do
    not consume a scripted reply.

    Requests to a path the dialect does not serve get the provider's real 404; Anthropic
    ``/messages/count_tokens`` and Gemini ``:countTokens`` are answered with the estimate.
    Neither consumes a scripted reply.

    A Gemini or Anthropic fake also answers as the model on Google Vertex AI, at Vertex's
    paths (``.../projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{model}:
    {generateContent|streamGenerateContent|countTokens|rawPredict|streamRawPredict}`` and
    Claude's ``count-tokens:rawPredict``): the same answers, Vertex's request rules, and
    Google's error envelope for what Vertex itself refuses. ``target(vertex=Vertex(...))``
    points a Target there.
    """

    def __init__(
        self,
        name: str,
        dialect: Dialect | str = Dialect.OPENAI,
        script: ScriptSpec | None = None,
        *,
        model: str | None = None,
        latency: float = 0.0,
        api_key: str | Callable[[str], bool] | None = None,
        validate: bool = True,
        connect_latency: float = 0.0,
        secret_key: str | None = None,
        prefill: bool = True,
        rpm: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(
                f"FakeProvider name {name!r} must be a lower-case DNS label (letters, digits, '-'): "
                "it becomes the host name <name>.fake and the path prefix /<name>/"
            )
        if not isinstance(latency, int | float) or not math.isfinite(latency) or latency < 0:
            raise ValueError(f"FakeProvider latency must be a finite number >= 0, got {latency!r}")
        if not isinstance(connect_latency, int | float) or not math.isfinite(connect_latency) or connect_latency < 0:
            raise ValueError(f"FakeProvider connect_latency must be a finite number >= 0, got {connect_latency!r}")
        spoken = {d.value: d for d in SPOKEN}
        found = spoken.get(str(dialect))
        if found is None:
            choices = ", ".join(sorted(spoken))
            raise ValueError(f"FakeProvider {name!r}: unknown dialect {dialect!r}; expected one of {choices}")
        self.dialect: Dialect = found
        if callable(api_key) and found is Dialect.BEDROCK:
            raise ValueError(f"FakeProvider {name!r}: a Bedrock fake checks an access key id: give api_key as a string")
        self.name = name
        self.model: str = model or fake_for(found).DEFAULT_MODEL
        self._report_model = model  # None: answers echo the model the request named
        self.latency = float(latency)
        self.connect_latency = float(connect_latency)
        self.validate = validate
        self.prefill = prefill
        self._api_key = api_key
        self._secret_key = secret_key
        self._script = Script.parse(script, where=f"FakeProvider {name!r} script")
        self.quota = Quota(rpm) if rpm is not None else None
        self._position = 0
        self._slots: list[_Slot] = []
        self._serial = 0

    # -- addresses ----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The host name FakeNetwork routes to this provider: ``<name>.fake``."""
        return f"{self.name}.fake"

    @property
    def root_url(self) -> str:
        """``http://<name>.fake``, without the API version."""
        return f"http://{self.host}"

    @property
    def base_url(self) -> str:
        """``http://<name>.fake/v1`` (Gemini: ``/v1beta``; Bedrock: the root, as its endpoint has
        no version): the Target base URL convention."""
        if self.dialect is Dialect.BEDROCK:
            return self.root_url
        return f"{self.root_url}/{'v1beta' if self.dialect is Dialect.GEMINI else 'v1'}"

    def target(self, model: str | None = None, **overrides: Any) -> Target:
        """A :class:`~failover.model.Target` that points at this provider through FakeNetwork.

        ``name`` defaults to the provider's name, ``model`` to the provider's model,
        ``api_key`` to ``Secret("sk-fake-<name>")`` (Bedrock: none, its requests are signed
        with AWS credentials, for ``region`` us-east-1); any other Target field can be given.
        With ``vertex``, the base URL is the root (Vertex adds ``/v1/projects/...``).
        """
        fields: dict[str, Any] = {
            "name": self.name,
            "dialect": self.dialect,
            "model": model or self.model,
            "base_url": self.root_url if overrides.get("vertex") is not None else self.base_url,
            "api_key": Secret(f"sk-fake-{self.name}"),
        }
        if self.dialect is Dialect.BEDROCK:
            fields.update(api_key=None, region="us-east-1")
        fields.update(overrides)
        return Target(**fields)

    # -- script -------------------------------------------------------------------------------

    @property
    def script(self) -> Script:
        return self._script

    @script.setter
    def script(self, script: ScriptSpec) -> None:
        self.load(script)

    def load(self, script: ScriptSpec, *, restart: bool = True) -> None:
        """Use a new script; by default its first reply answers the next call."""
        self._script = Script.parse(script, where=f"FakeProvider {self.name!r} script")
        if restart:
            self._position = 0

    @property
    def position(self) -> int:
        """How many scripted replies have been used (the index of the next one)."""
        return self._position

    @property
    def next_reply(self) -> Reply:
        return self._script.reply_for(self._position)

    def clear(self) -> None:
        """Forget every recorded call and restart the script."""
        self._slots = []
        self._position = 0

    # -- records ------------------------------------------------------------------------------

    @property
    def calls(self) -> list[ReceivedCall]:
        """Every request received, in arrival order (a fresh list of immutable records)."""
        return [s.record for s in self._slots]

    @property
    def kinds(self) -> list[str]:
        """The reply kind of each call (``"unscripted"`` for calls outside the script)."""
        return [s._base.kind.value if s._base.kind is not None else "unscripted" for s in self._slots]

    def __repr__(self) -> str:
        return (
            f"FakeProvider({self.name!r}, {self.dialect.value!r}, calls={len(self._slots)}, "
            f"next={self.next_reply!r}, model={self.model!r})"
        )

    # -- answering ----------------------------------------------------------------------------

    async def _respond(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: Any,
        *,
        connect_timeout: float = math.inf,
        on_cancel: Callable[[], Outcome] = _default_on_cancel,
        log: list[_Slot] | None = None,
        wire: tuple[str, str, bytes] | None = None,
    ) -> tuple[_Slot, Rendered]:
        """Answer one request. Raises _Reset / _ConnectFailed for the scripted transport
        failures; records a cancellation (timeout, disconnect) with the loop time. ``wire``:
        the request as received (method, absolute URL, body bytes), for signature checks."""
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        dialect = self.dialect
        endpoint = endpoint_for(dialect, path)
        data: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
        reply: Reply | None = None
        scripted = False
        if body is _INVALID_JSON:
            reply = Reply.invalid("We could not parse the JSON body of your request.")
        elif endpoint is None or endpoint.operation == "count_tokens":
            pass
        elif (
            self.validate
            and (
                problem := check_request(
                    dialect,
                    endpoint,
                    path,
                    headers,
                    query,
                    data,
                    api_key=self._api_key,
                    secret_key=self._secret_key,
                    wire=wire,
                )
            )
            is not None
        ):
            reply = problem
        elif not self.prefill and _ends_with_assistant(data):
            reply = Reply.invalid(PREFILL_REFUSED)
        elif self.quota is not None and (over := self.quota.admit(arrived)) is not None:
            reply = over
        else:
            reply = self._script.reply_for(self._position)
            self._position += 1
            scripted = True
        index = len(self._slots)
        self._serial += 1
        serial = self._serial
        model = requested_model(dialect, endpoint, data)
        if dialect in (Dialect.GEMINI, Dialect.BEDROCK):
            stream = endpoint is not None and endpoint.stream_path
        else:
            stream = data.get("stream") is True
        slot = _Slot(
            ReceivedCall(
                provider=self.name,
                index=index,
                time=arrived,
                method=method,
                path=path,
                query=redact_query(query),
                headers=redact_headers(headers),
                json=data if body is not None and body is not _INVALID_JSON else None,
                model=model,
                stream=stream,
                kind=reply.kind if reply is not None else None,
                reply=reply,
                scripted=scripted,
            )
        )
        self._slots.append(slot)
        if log is not None:
            log.append(slot)

        request_id = f"req_{self.name}_{serial}"
        if endpoint is None:
            rendered = render_unknown_path(dialect, method, path, request_id)
            slot.update(status=rendered.status)
            return slot, rendered

        try:
            kind = reply.kind if reply is not None else None
            if kind is not ReplyKind.CONNECT_ERROR:
                await self._connect(slot, connect_timeout)
            wait = self.latency + (reply.wait if reply is not None else 0.0)
            if kind is ReplyKind.CONNECT_ERROR:
                timed_out = wait >= connect_timeout
                after = connect_timeout if timed_out else wait
                if after > 0:
                    await asyncio.sleep(after)
                slot.update(outcome=Outcome.CONNECT_FAILED, disconnected_at=loop.time())
                raise _ConnectFailed(timed_out, after)
            if wait > 0:
                await asyncio.sleep(wait)
            if kind is ReplyKind.HANG:
                await loop.create_future()  # until cancelled
            if kind is ReplyKind.RESET:
                slot.update(outcome=Outcome.RESET, disconnected_at=loop.time())
                raise _Reset()
        except asyncio.CancelledError:
            slot.update(outcome=on_cancel(), disconnected_at=loop.time())
            raise

        exchange = Exchange(
            provider=self.name,
            dialect=dialect,
            endpoint=endpoint,
            path=path,
            method=method,
            body=data,
            model=self._report_model or model or self.model,
            request_id=request_id,
            response_id=fake_for(dialect).RESPONSE_ID.format(name=self.name, serial=serial),
            sse="alt=sse" in query,
            prompt_chars=fake_for(dialect).prompt_chars,
        )
        rendered = render(reply if reply is not None else Reply.ok(), exchange)
        if self.quota is not None:
            quota = self.quota.headers(dialect, loop.time())
            rendered = replace(rendered, headers=with_headers(rendered.headers, quota))
        slot.update(status=rendered.status)
        return slot, rendered

    async def _connect(self, slot: _Slot, connect_timeout: float) -> None:
        """The handshake: ``connect_latency`` on the loop clock, then report the connection up."""
        loop = asyncio.get_running_loop()
        if self.connect_latency > 0 and self.connect_latency >= connect_timeout:
            await asyncio.sleep(connect_timeout)
            slot.update(outcome=Outcome.CONNECT_FAILED, disconnected_at=loop.time())
            raise _ConnectFailed(True, connect_timeout)
        if self.connect_latency > 0:
            await asyncio.sleep(self.connect_latency)
        mark_connected(loop.time())

    @staticmethod
    def _finish(slot: _Slot, outcome: Outcome, at: float, *, events: int | None = None) -> None:
        if outcome is Outcome.COMPLETED:
            slot.update(outcome=outcome, answered_at=at, events_sent=events)
        else:
            slot.update(outcome=outcome, disconnected_at=at, events_sent=events)


PREFILL_REFUSED = (
    "This model does not support assistant message prefill. The conversation must end with a user message."
)


def _ends_with_assistant(body: Mapping[str, Any]) -> bool:
    """The request's conversation ends with an assistant turn (OpenAI / Anthropic ``messages``,
    Gemini ``contents`` with role ``model``)."""
    turns = body.get("messages", body.get("contents"))
    if not isinstance(turns, list) or not turns or not isinstance(turns[-1], Mapping):
        return False
    return turns[-1].get("role") in ("assistant", "model")


def _events_in(rendered: Rendered) -> int:
    """How many events an answer sent all at once holds."""
    return len(rendered.chunks) if rendered.chunks else 1
