"""Set-up for the rescue fault matrix (tests/e2e/test_rescue_matrix.py, bench/rescue.py).

One route ``chat``: primary = the faulty upstream model ``model-a``, approved fallback = a
healthy model ``model-b`` on the same OpenAI-compatible fake server (real loopback HTTP).
Everything at DEFAULT settings: default ``Target`` timeouts (connect 5 / first_event 30 /
idle 30 / total 60 s) and attempts (2 per target), the router's default policies, a 30 s
deadline (``Envelope(budget=30)`` in the library, ``deadline_ms=30000`` at the gateway), the
official SDKs at their default settings. A healthy answer is 60 text chunks at 50 tokens/s,
each model's words its own (``a00 a01 ... a59`` / ``b00 ... b59``), so a splice, a repeat or a
lost chunk shows in the text.

A cell = a fault (:data:`FAULTS`) x a client (:data:`CLIENTS`). :func:`run_cell` plays it and
returns what every request saw (:class:`Seen`) and when each upstream was called;
:func:`judge` compares that with the outcome the cell demands (:class:`Expect`: rescued
unless no rescue was possible) and returns the problems, empty when the cell holds.
:func:`run_cell` takes route overrides (``hold_tokens=0``, ``fallback_reserve=0``...) and
fallback target overrides (``context_window``), so the fixes can be turned off on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from failover.model import (
    Capability,
    Completed,
    Envelope,
    PartialOutput,
    Price,
    Request,
    Restarted,
    Route,
    RouteRecord,
    TextDelta,
    Unavailable,
    Workflow,
)
from failover.policy import Backoff, BreakerBoard, RetryBudget
from failover.router import Router
from failover.testing import FakeProvider, FakeServer, Reply, Script
from failover.transport import Http1Transport

from ._recovery import Records, gateway

ROUTE = "chat"  # the route's name: never a model's name, so "model names the route" shows
DEADLINE = 30.0  # seconds: the gateway's deadline_ms / 1000 and the library's Envelope budget
CHUNKS = 60
PACE = 0.02  # seconds between chunks: 50 tokens/s
STREAM_TIME = CHUNKS * PACE
MODELS = {"a": "model-a", "b": "model-b"}
PRICES = {"a": Price(input_per_mtok=1.0, output_per_mtok=2.0), "b": Price(input_per_mtok=3.0, output_per_mtok=15.0)}
USAGE = {"a": (900, 60), "b": (1000, 61)}  # (input, output) tokens each model reports
CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
MARGIN = {"library": 0.05, "gateway": 0.5}  # loop-clock margin over the deadline (see test_recovery_matrix)
RECOVERY_GRACE = 8.0  # after an outage ends, the primary must answer again within this many seconds


def text_of(name: str) -> str:
    """The answer of ``name``'s model: 60 words, one per stream chunk."""
    return " ".join(f"{name}{i:02d}" for i in range(CHUNKS))


def healthy(name: str, **kw: Any) -> Reply:
    return Reply.ok(text_of(name), chunk_interval=PACE, usage=USAGE[name], **kw)


def told(name: str) -> dict[str, Any]:
    """The content and pacing of a faulty stream: the same answer ``healthy`` sends."""
    return {"text": text_of(name), "chunk_interval": PACE, "usage": USAGE[name]}


# An OpenAI stream's events: the role chunk, then one per word, then finish, usage, [DONE].
# "after k of 60 chunks" is therefore after=1+k events.
def after_chunks(k: int) -> int:
    return 1 + k


# -- the cells ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What a cell demands. ``error`` None: a rescue (a complete answer from one of
    ``answered_by``); else that typed failure (the library's ``Unavailable.reason``) with
    ``status`` at the gateway, and no call to the fallback."""

    answered_by: frozenset[str] = frozenset({"b"})
    error: str | None = None
    status: int | None = None
    max_calls: Mapping[str, int] = field(default_factory=lambda: {"a": 2, "b": 1})
    min_gap_a: float = 0.0  # seconds between two calls to A (a Retry-After honoured)
    max_elapsed: float | None = None  # tighter than the deadline (seconds, per request)


@dataclass(frozen=True)
class Fault:
    name: str
    script: Callable[[], Any]  # A's script (built fresh per cell)
    expect: Expect
    fallback: Mapping[str, Any] = field(default_factory=dict)  # B's target overrides
    requests: int = 1
    fallback_provider: Mapping[str, Any] = field(default_factory=dict)  # B's FakeProvider options


RESCUED = Expect()
BY_EITHER = Expect(answered_by=frozenset({"a", "b"}))
OVERFLOW = Reply.context_overflow(prompt_tokens=9631, limit=8192)

FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        # a short Retry-After is waited out on A (then its second 429 goes to the fallback);
        # one longer than the fallback needs is not: the fallback answers at once
        Fault("429 retry-after 0.5", lambda: Script.always(Reply.rate_limit(retry_after=0.5)), Expect(min_gap_a=0.5)),
        Fault(
            "429 retry-after 20",
            lambda: Script.always(Reply.rate_limit(retry_after=20)),
            Expect(max_calls={"a": 1, "b": 1}, max_elapsed=2.0),
        ),
        Fault("429 no retry-after", lambda: Script.always(Reply.rate_limit()), RESCUED),
        Fault("500 once", lambda: Script.of(Reply.server_error(), default=healthy("a")), BY_EITHER),
        Fault("503 persistent", lambda: Script.always(Reply.overloaded()), RESCUED),
        Fault("reset before headers", lambda: Script.always(Reply.reset()), RESCUED),
        Fault("silent", lambda: Script.always(Reply.hang()), RESCUED),
        Fault(
            "silent 15s then closed",
            lambda: Script.always(Reply.reset(latency=15)),
            RESCUED,
        ),
        Fault(
            "first token after 20s",
            lambda: Script.always(Reply.stall_before_first(20, **told("a"))),
            BY_EITHER,
        ),
        Fault("cut after 40 of 60", lambda: Script.always(Reply.drop_after(after_chunks(40), **told("a"))), RESCUED),
        # continuing the cut answer as an assistant prefill is refused by this fallback (400):
        # the rescue must still be one whole answer, with one request to the fallback
        Fault(
            "cut after 40, fallback refuses prefill",
            lambda: Script.always(Reply.drop_after(after_chunks(40), **told("a"))),
            RESCUED,
            fallback_provider={"prefill": False},
        ),
        Fault("cut after 5 of 60", lambda: Script.always(Reply.drop_after(after_chunks(5), **told("a"))), RESCUED),
        Fault("stall after 20", lambda: Script.always(Reply.stall_after(after_chunks(20), None, **told("a"))), RESCUED),
        Fault(
            "undecodable after 10",
            lambda: Script.always(Reply.malformed_after(after_chunks(10), **told("a"))),
            RESCUED,
        ),
        # The openai SDK, read as the oracle (test_missing_done_is_complete_to_the_openai_sdk),
        # takes a stream that ends after its finish and usage chunks without [DONE] as a whole
        # answer: so must failover, without calling anyone else.
        Fault(
            "missing [DONE]",
            lambda: Script.always(Reply.end_after(10**6, **told("a"))),
            Expect(answered_by=frozenset({"a"}), max_calls={"a": 1, "b": 0}),
        ),
        Fault("overflow, fallback window undeclared", lambda: Script.always(OVERFLOW), RESCUED),
        Fault(
            "overflow, fallback window too small",
            lambda: Script.always(OVERFLOW),
            Expect(error="context_overflow", status=400, max_calls={"a": 1, "b": 0}, max_elapsed=1.0),
            fallback={"context_window": 9000},
        ),
        Fault(
            "content filter",
            lambda: Script.always(Reply.content_filter()),
            Expect(error="content_filtered", status=400, max_calls={"a": 1, "b": 0}, max_elapsed=1.0),
        ),
        Fault(
            "flapping",
            lambda: Script.always(Reply.overloaded()),  # replaced before each request (see flap)
            BY_EITHER,
            requests=20,
        ),
        Fault("outage 60s", lambda: Script.always(Reply.overloaded()), BY_EITHER, requests=20),
        Fault("fallback accounting", lambda: Script.always(Reply.overloaded()), RESCUED),
    )
}
OUTAGE = 60.0  # "outage 60s": A answers 503 until this loop second, then is healthy
SPACING = 4.0  # "outage 60s": one request every 4 s

CLIENTS = ("library stream", "library complete", "openai chat", "anthropic messages", "openai responses")
# The SDK subset beyond the openai chat stream: one fault of each family
SDK_SUBSET = (
    "429 retry-after 20",
    "503 persistent",
    "silent",
    "cut after 40 of 60",
    "overflow, fallback window undeclared",
    "content filter",
)


def cells() -> list[tuple[str, str]]:
    out = []
    for f in FAULTS:
        for c in CLIENTS:
            if c.startswith(("anthropic", "openai responses")) and f not in SDK_SUBSET:
                continue
            out.append((f, c))
    return out


# -- what a request saw --------------------------------------------------------------------------


@dataclass
class Seen:
    start: float  # loop time the request was sent
    elapsed: float  # loop seconds, as the caller measured
    text: str = ""
    ids: set[str] = field(default_factory=set)  # response ids the caller was shown
    models: set[str] = field(default_factory=set)  # the `model` the caller was shown
    usage: tuple[int, int] | None = None  # (input, output) the caller was told
    error: str | None = None  # the typed failure (FailureKind value), or what went wrong
    status: int | None = None  # the gateway's HTTP status of an error
    record: RouteRecord | None = None


@dataclass
class CellResult:
    fault: Fault
    client: str
    seen: list[Seen]
    calls: dict[str, list[float]]  # upstream -> loop times of its generation requests (from t0)
    overrides: Mapping[str, Any]


def route_of(a: FakeProvider, b: FakeProvider, srv: FakeServer, fault: Fault, overrides: Mapping[str, Any]) -> Route:
    def target(p: FakeProvider, name: str, **kw: Any) -> Any:
        return srv.target_for(
            p, model=MODELS[name], capabilities=CAPS, price=PRICES[name], tokenizer="estimate", **kw
        )  # default timeouts and max_attempts

    return Route(
        name=ROUTE, primary=(target(a, "a"),), fallbacks=(target(b, "b", **fault.fallback),), **dict(overrides)
    )


@contextlib.asynccontextmanager
async def rig(
    fault: Fault, overrides: Mapping[str, Any]
) -> AsyncIterator[tuple[FakeProvider, FakeProvider, Router, Records]]:
    a = FakeProvider("a", "openai", fault.script(), model=MODELS["a"])
    b = FakeProvider("b", "openai", Script.always(healthy("b")), model=MODELS["b"], **fault.fallback_provider)
    async with FakeServer(a, b) as srv:
        records = Records()
        router = Router(
            [route_of(a, b, srv, fault, overrides)],
            transport=Http1Transport(),
            retry_budget=RetryBudget(),
            breakers=BreakerBoard(),
            backoff=Backoff(),
            rng=random.Random(1),
            stats=records,
        )
        try:
            yield a, b, router, records
        finally:
            await router.aclose()


Caller = Callable[[], Awaitable[Seen]]


async def run_cell(
    fault_name: str,
    client: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    fallback: Mapping[str, Any] | None = None,
    envelope: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> CellResult:
    """Play one cell on the running loop (virtual time in the tests and the bench).
    ``overrides``: Route fields; ``fallback``: the fallback Target's fields; ``envelope``: the
    library's Envelope fields; ``headers``: extra headers every SDK request carries."""
    fault = FAULTS[fault_name]
    env = _envelope(envelope or {})
    if fallback:
        fault = dataclasses.replace(fault, fallback={**fault.fallback, **fallback})
    overrides = dict(overrides or {})
    loop = asyncio.get_running_loop()
    async with rig(fault, overrides) as (a, b, router, records), caller_for(router, client, env, headers or {}) as one:
        t0 = loop.time()
        seen: list[Seen] = []
        timer = None
        if fault.name == "outage 60s":
            timer = loop.call_at(t0 + OUTAGE, a.load, Script.always(healthy("a")))
        for i in range(fault.requests):
            if fault.name == "flapping":  # fails every other request, from the first
                a.load(Script.always(Reply.overloaded() if i % 2 == 0 else healthy("a")))
            if fault.name == "outage 60s":
                await asyncio.sleep(max(0.0, t0 + i * SPACING - loop.time()))
            n = len(records.records)
            s = await one()
            s.start -= t0
            for _ in range(200):  # a gateway observes the record as the run ends, maybe after the last byte
                if len(records.records) > n:
                    break
                await asyncio.sleep(0)
            if len(records.records) > n:
                s.record = records.records[-1]
            seen.append(s)
        if timer is not None:
            timer.cancel()
        calls = {p.name: [c.time - t0 for c in p.calls if c.kind is not None] for p in (a, b)}
    return CellResult(fault, client, seen, calls, overrides)


# -- the clients ---------------------------------------------------------------------------------


def _messages() -> Any:
    return [{"role": "user", "content": "hi"}]


def _envelope(fields: Mapping[str, Any]) -> Callable[[], Envelope]:
    """A fresh Envelope per request (its own request id): the 30 s budget and ``fields``."""
    return lambda: Envelope(budget=DEADLINE, **dict(fields))


@contextlib.asynccontextmanager
async def caller_for(
    router: Router, client: str, env: Callable[[], Envelope], headers: Mapping[str, str]
) -> AsyncIterator[Caller]:
    if client == "library stream":
        yield lambda: _library_stream(router, env)
        return
    if client == "library complete":
        yield lambda: _library_complete(router, env)
        return
    async with gateway(router, deadline_ms=int(DEADLINE * 1000)) as gw:
        if client == "anthropic messages":
            root = gw.base_url.removesuffix("/v1")
            async with anthropic.AsyncAnthropic(
                base_url=root, api_key="unused-on-an-open-gateway", default_headers=dict(headers)
            ) as ac:
                yield lambda: _anthropic_messages(ac)
            return
        async with gw.openai(default_headers=dict(headers)) as oc:  # DEFAULT settings
            yield (lambda: _openai_chat(oc)) if client == "openai chat" else (lambda: _openai_responses(oc))


def _now() -> float:
    return asyncio.get_running_loop().time()


async def _library_stream(router: Router, env: Callable[[], Envelope]) -> Seen:
    s0 = _now()
    seen = Seen(start=s0, elapsed=0.0)
    try:
        async with router.stream(ROUTE, Request.simple("hi"), env()) as s:
            async for ev in s:
                if isinstance(ev, TextDelta):
                    seen.text += ev.text
                    seen.ids.add(s.response_id)
                    if s.model:
                        seen.models.add(s.model)
                elif isinstance(ev, Restarted):
                    seen.ids |= {ev.previous_id, ev.response_id}
                elif isinstance(ev, Completed):
                    r = ev.response
                    if r.model:
                        seen.models.add(r.model)
                    seen.usage = (r.usage.input_tokens, r.usage.output_tokens)
                elif isinstance(ev, PartialOutput):
                    seen.error = "partial_output"
    except Unavailable as exc:
        seen.error = str(exc.reason)
    seen.elapsed = _now() - s0
    return seen


async def _library_complete(router: Router, env: Callable[[], Envelope]) -> Seen:
    s0 = _now()
    seen = Seen(start=s0, elapsed=0.0)
    try:
        r = await router.complete(ROUTE, Request.simple("hi"), env())
        seen.text = r.text
        seen.ids.add(r.response_id or "?")
        if r.model:
            seen.models.add(r.model)
        seen.usage = (r.usage.input_tokens, r.usage.output_tokens)
    except Unavailable as exc:
        seen.error = str(exc.reason)
    seen.elapsed = _now() - s0
    return seen


def _error_code(body: object) -> str | None:
    """The failure kind an error body names (``error.code`` / ``error.type`` / ``x-failover``)."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            for key in ("failover_reason", "reason", "code", "type"):
                if isinstance(err.get(key), str):
                    return str(err[key])
    return None


async def _openai_chat(oc: openai.AsyncOpenAI) -> Seen:
    s0 = _now()
    seen = Seen(start=s0, elapsed=0.0)
    try:
        chunks = await oc.chat.completions.create(
            model=ROUTE, messages=_messages(), stream=True, stream_options={"include_usage": True}
        )
        async for c in chunks:
            seen.ids.add(c.id)
            seen.models.add(c.model)
            for ch in c.choices:
                seen.text += ch.delta.content or ""
            if c.usage is not None:
                seen.usage = (c.usage.prompt_tokens, c.usage.completion_tokens)
    except openai.APIStatusError as exc:
        seen.status = exc.status_code
        seen.error = exc.response.headers.get("x-failover-reason") or _error_code(exc.body) or "http error"
    except openai.APIError as exc:  # an error event after the first byte
        seen.error = f"mid-stream: {_error_code(exc.body) or exc.message}"
    except Exception as exc:  # the stream broke under the SDK
        seen.error = f"broken: {type(exc).__name__}"
    seen.elapsed = _now() - s0
    return seen


async def _openai_responses(oc: openai.AsyncOpenAI) -> Seen:
    s0 = _now()
    seen = Seen(start=s0, elapsed=0.0)
    try:
        events = await oc.responses.create(model=ROUTE, input="hi", stream=True)
        async for ev in events:
            if ev.type in ("response.created", "response.completed"):
                seen.ids.add(ev.response.id)
                seen.models.add(ev.response.model)
                if ev.type == "response.completed" and ev.response.usage is not None:
                    u = ev.response.usage
                    seen.usage = (u.input_tokens, u.output_tokens)
            elif ev.type == "response.output_text.delta":
                seen.text += ev.delta
            elif ev.type in ("response.failed", "error", "response.incomplete"):
                seen.error = f"mid-stream: {ev.type}"
    except openai.APIStatusError as exc:
        seen.status = exc.status_code
        seen.error = exc.response.headers.get("x-failover-reason") or _error_code(exc.body) or "http error"
    except openai.APIError as exc:
        seen.error = f"mid-stream: {_error_code(exc.body) or exc.message}"
    except Exception as exc:
        seen.error = f"broken: {type(exc).__name__}"
    seen.elapsed = _now() - s0
    return seen


async def _anthropic_messages(ac: anthropic.AsyncAnthropic) -> Seen:
    s0 = _now()
    seen = Seen(start=s0, elapsed=0.0)
    try:
        events = await ac.messages.create(model=ROUTE, max_tokens=512, messages=_messages(), stream=True)
        inp = 0
        async for ev in events:
            if ev.type == "message_start":
                seen.ids.add(ev.message.id)
                seen.models.add(ev.message.model)
                inp = ev.message.usage.input_tokens
            elif ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                seen.text += ev.delta.text
            elif ev.type == "message_delta":
                seen.usage = (ev.usage.input_tokens or inp, ev.usage.output_tokens)
    except anthropic.APIStatusError as exc:
        seen.status = exc.status_code
        seen.error = exc.response.headers.get("x-failover-reason") or _error_code(exc.body) or "http error"
    except anthropic.APIError as exc:
        seen.error = f"mid-stream: {_error_code(exc.body) or exc.message}"
    except Exception as exc:
        seen.error = f"broken: {type(exc).__name__}"
    seen.elapsed = _now() - s0
    return seen


# -- the verdict ---------------------------------------------------------------------------------


def _gateway(client: str) -> bool:
    return not client.startswith("library")


def judge(r: CellResult) -> list[str]:
    """Every way the cell missed what it demands (empty: it holds)."""
    e = r.fault.expect
    out: list[str] = []
    margin = MARGIN["gateway" if _gateway(r.client) else "library"]
    for i, s in enumerate(r.seen):
        where = f"request {i}: " if len(r.seen) > 1 else ""
        out += [where + p for p in _judge_one(r, s, e, margin)]
    out += _judge_calls(r, e)
    out += _judge_series(r)
    return out


def _judge_one(r: CellResult, s: Seen, e: Expect, margin: float) -> list[str]:
    out: list[str] = []
    rec = s.record
    if rec is None:
        return [f"no RouteRecord was kept (error {s.error})"]
    if s.elapsed > DEADLINE + margin:
        out.append(f"over the deadline: {s.elapsed:.2f} s > {DEADLINE:g} s")
    if rec.elapsed_ms > (DEADLINE + 0.05) * 1000:
        out.append(f"the record's elapsed {rec.elapsed_ms:.0f} ms is over the deadline")
    if e.error is not None:
        if s.error is None:
            return [*out, f"an answer where the typed failure {e.error} was due"]
        if s.text:
            out.append(f"text reached the caller before the failure: {s.text[:30]!r}")
        if _gateway(r.client):
            if s.status != e.status:
                out.append(f"HTTP {s.status} instead of {e.status} for {e.error} ({s.error})")
        elif s.error != e.error:
            out.append(f"failure {s.error} instead of {e.error}")
        if rec.outcome != e.error:
            out.append(f"the record's outcome is {rec.outcome}, not {e.error}")
        if e.max_elapsed is not None and s.elapsed > e.max_elapsed:
            out.append(f"the failure took {s.elapsed:.2f} s (at most {e.max_elapsed:g} s)")
        return out
    # a rescue is due
    if e.max_elapsed is not None and s.elapsed > e.max_elapsed:
        out.append(f"the rescue took {s.elapsed:.2f} s (at most {e.max_elapsed:g} s)")
    if s.error is not None:
        return [*out, f"no complete answer: {s.error} after {s.elapsed:.2f} s (text {len(s.text.split())} words)"]
    used = rec.target_used
    if used not in e.answered_by:
        out.append(f"answered by {used}, expected {sorted(e.answered_by)}")
    want = text_of(used) if used in MODELS else None
    if s.text != want:
        out.append(f"not exactly {used}'s 60 chunks once: {len(s.text.split())} words, starts {s.text[:12]!r}")
    if len(s.ids) != 1:
        out.append(f"{len(s.ids)} response ids (one answer has one): {sorted(s.ids)}")
    if used in MODELS and s.models != {MODELS[used]}:
        out.append(f"`model` says {sorted(s.models)}, the answering model is {MODELS[used]}")
    if used in USAGE and s.usage is not None and s.usage != USAGE[used]:
        out.append(f"usage told {s.usage}, {used} reported {USAGE[used]}")
    failed = [a for a in rec.attempts if a.failure is not None]
    tier = Workflow.FALLBACK if used == "b" else (Workflow.RETRY_FAILOVER if failed else Workflow.DIRECT)
    if rec.workflow is not tier:
        out.append(f"workflow {rec.workflow} (expected {tier})")
    rescued = bool(failed) or used != "a"  # a failure, or the primary held away (an open breaker)
    if rescued != rec.recovered or (rescued and not rec.recovery_reason):
        out.append(f"recovered={rec.recovered} with {len(failed)} failed attempts, answered by {used}")
    ok = [a for a in rec.attempts if a.outcome == "ok"]
    if len(ok) != 1 or ok[0].target != used:
        out.append(f"attempts end {[(a.target, a.outcome) for a in rec.attempts]}, not one ok attempt on {used}")
    if r.fault.name == "fallback accounting" and used == "b":
        a_ok = ok[0] if ok else None
        billed = PRICES["b"].cost(*USAGE["b"])
        if a_ok is None or a_ok.usage is None or (a_ok.usage.input_tokens, a_ok.usage.output_tokens) != USAGE["b"]:
            out.append(f"the answering attempt's usage is {a_ok.usage if a_ok else None}, not b's {USAGE['b']}")
        if abs(rec.total_cost - billed) > 1e-9 + sum(a.cost for a in rec.attempts if a.target != "b"):
            out.append(f"total cost {rec.total_cost} is not b's {billed} (plus a's failed attempts)")
        if s.usage != USAGE["b"]:
            out.append(f"the caller was told usage {s.usage}, not b's {USAGE['b']}")
    return out


def _judge_calls(r: CellResult, e: Expect) -> list[str]:
    out: list[str] = []
    n = len(r.seen)
    for name, most in e.max_calls.items():
        got = len(r.calls[name])
        if got > most * n:
            out.append(f"{name} received {got} requests (at most {most * n})")
    a = r.calls["a"]
    gaps = [t2 - t1 for t1, t2 in itertools.pairwise(a)]
    if e.min_gap_a and gaps and min(gaps) < e.min_gap_a - 1e-6:
        out.append(f"a was called again {min(gaps):.3f} s after a Retry-After of {e.min_gap_a:g} s")
    return out


def _judge_series(r: CellResult) -> list[str]:
    """The many-request cells: the primary is not abandoned for good."""
    used = [s.record.target_used if s.record else None for s in r.seen]
    if r.fault.name == "flapping":
        late = used[len(used) // 2 :]
        if "a" not in late:
            return [f"flapping: the primary answered none of the last {len(late)} requests: {used}"]
    if r.fault.name == "outage 60s":
        back = [(round(s.start), u) for s, u in zip(r.seen, used, strict=True) if s.start >= OUTAGE + RECOVERY_GRACE]
        if not back or any(u != "a" for _, u in back):
            return [f"outage: the primary is not back {RECOVERY_GRACE:g} s after it recovered at {OUTAGE:g} s: {back}"]
    return []


def verdict(r: CellResult, problems: list[str]) -> str:
    """rescued / clean error / wrong, as bench/rescue.py counts them."""
    if problems:
        return "wrong"
    return "clean error" if r.fault.expect.error is not None else "rescued"
