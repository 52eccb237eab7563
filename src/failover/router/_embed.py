"""``Router.embed``: an embedding request through the same recovery engine as generation.

:class:`Embedding` is the run's work for an embedding request (see :mod:`._work`): the
deadline, the engine's decisions (replays with backoff and Retry-After, equivalent failover,
the time kept for the next tier), breakers, the limiter, the retry budget, hedging, hooks and
the RouteRecord are the very same :class:`~._run.Run` as a generation's. What differs:

* the candidates: :func:`~failover.policy.embedding_check` replaces the contract filter,
  so only equivalents of the route's first primary that give vectors of its size are ever
  tried, and the record says why every other target was left out;
* the token count: the inputs' own tokens (for the limiter, cost and each target's window);
  nothing is generated, so an attempt reserves and is estimated at no output;
* the exchange: the inputs are split into the provider's batch size, the batches sent
  concurrently within the attempt (its one timeout covers them all; the first failure ends
  it), and the vectors put back in input order.

Which targets can embed (:func:`cannot_embed`), decided before any call: the dialect has an
embeddings endpoint and its adapter knows nothing against the model (Bedrock: Titan Text and
Cohere Embed only), and the target is not a chat model: a model whose name says ``embed`` can;
one that declares a generation capability (``vision``, ``tools``, ``structured_output``,
``streaming``), or whose name is of a chat family (``gpt-``, ``o1``/``o3``/``o4``,
``chatgpt``, ``claude``, ``gemini-``), cannot; any other is tried. A route whose first primary
cannot embed is refused whole (:func:`route_cannot_embed`, the gateway's 400).

An answer that shows the target does not embed (a 404 ``model_not_found`` to the embeddings
call, or a 2xx that is not an embeddings answer) is marked ``not_target="cannot_embed"``: it
says what this request asked of the target, not how the target serves the chat requests that
share its breakers, so no breaker and no health score counts it (its kind still moves the run
on).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from dataclasses import replace

from ..auth import AuthError
from ..model import (
    CANNOT_EMBED,
    Capability,
    Embeddings,
    EmbedInput,
    EmbedRequest,
    ExclusionCode,
    Failure,
    FailureKind,
    InvalidRequest,
    Message,
    Request,
    Response,
    Route,
    Target,
    Usage,
    Validation,
    watch_connect,
)
from ..policy import Plan, Violation, embedding_check, plan
from ..providers.embeddings import EmbedAdapter, dimensions_of, embed_adapter_for
from ..tokens import counter_for
from ..transport import DEFAULT_MAX_RESPONSE_BYTES, HttpResponse, TransportError
from ._exchange import exchange_failure, maybe_billed
from ._work import Call, Exchanged

# Batches of one attempt in flight at once (Titan embeds one text a call: a request of 100
# texts is 100 calls, which must not all open a connection at the same moment).
PARALLEL_BATCHES = 8
# An answer larger than this is decoded in a worker thread: 8 batches of ~100 vectors of 3,072
# floats (3 MB each) ending together would otherwise be decoded one after another on the event
# loop in one turn of it (~25 ms each), stalling every other request for ~0.2 s.
HEAVY_ANSWER_BYTES = 1024 * 1024

# What one vector may take in a JSON answer, per dimension: OpenAI and Google pretty-print
# them, one float a line ("      -0.0069292834,\n"). A batch is kept to what the transport
# reads in one answer (max_response_bytes), at the size asked for, or at the largest usual
# size when the model's own is used: an answer cut at that limit would fail every attempt.
BYTES_PER_DIMENSION = 24
UNKNOWN_DIMENSIONS = 3072

# The plan's view of an embedding request: no messages, no max_tokens (nothing is generated).
_NO_REQUEST = Request(messages=())

# What only a generation model declares, and the names of the chat model families.
_GENERATES = frozenset({Capability.VISION, Capability.TOOLS, Capability.STRUCTURED_OUTPUT, Capability.STREAMING})
_CHAT_FAMILY = re.compile(r"^(gpt-|chatgpt|o[1-9](-|$)|claude|gemini-)")


def cannot_embed(target: Target) -> str | None:
    """Why ``target`` cannot embed, known before any call (None: it can, or may: its answer says).

    See the module docstring for the rule."""
    adapter = embed_adapter_for(target.dialect)
    if adapter is None:
        return f"the {target.dialect} dialect has no embeddings endpoint"
    why = adapter.unsupported(target)
    if why is not None:
        return why
    name = target.model.rsplit("/", 1)[-1].lower()
    if "embed" in name:
        return None
    generates = sorted(c.value for c in target.capabilities & _GENERATES)
    if generates:
        return f"{target.name} ({target.model}) is a chat model: it declares {', '.join(generates)}"
    if _CHAT_FAMILY.match(name):
        return f"{target.name} ({target.model}) is a chat model, not an embedding model"
    return None


def route_cannot_embed(route: Route) -> str | None:
    """Why no target of ``route`` can answer an embedding request (None: one may).

    Only the first primary and its equivalents answer embeddings, so the first primary decides."""
    if not route.primary:
        return "the route has no primary target"
    return cannot_embed(route.primary[0])


def _cannot_embed_answer(outcome: Failure) -> Failure:
    """``outcome`` marked as not the target's doing when it shows the model does not embed: a
    404 ``model_not_found``, or a 2xx that is no embeddings answer."""
    # (an error inside a 2xx keeps its own kind: a 429 in a 200 is still the key's)
    answered = outcome.status is not None and 200 <= outcome.status < 300
    unreadable = answered and outcome.kind is FailureKind.PROVIDER_SERVER_ERROR
    shows = outcome.kind is FailureKind.MODEL_NOT_FOUND or unreadable
    if not shows or outcome.not_target is not None:
        return outcome
    return replace(outcome, not_target=CANNOT_EMBED)


class Embedding:
    """What an embedding request asks, and how one attempt sends it (see the module docstring)."""

    compactable = False  # no compaction hook: an input is embedded whole or not at all

    def __init__(self, call: Call, request: EmbedRequest) -> None:
        self.call = call
        self.request = request
        self.embed = request
        self._counts: dict[str, list[int]] = {}  # counter name -> tokens of each input

    # -- tokens ----------------------------------------------------------------------------

    def counts(self, target: Target) -> list[int]:
        counter = counter_for(target)
        n = self._counts.get(counter.name)
        if n is None:
            text = getattr(counter, "count_text", None)
            if text is not None:
                n = [int(text(t)) for t in self.embed.inputs]
            else:
                n = [counter.count(Request(messages=(Message.user(t),))) for t in self.embed.inputs]
            self._counts[counter.name] = n
        return n

    def local_tokens(self, target: Target) -> int:
        return sum(self.counts(target))

    def input_tokens(self, target: Target) -> int:
        return self.local_tokens(target)  # no provider counts embedding inputs ahead

    def output_reserve(self, target: Target, request: Request | EmbedRequest) -> int:
        return 0  # an embedding generates nothing

    def request_for(self, target: Target) -> EmbedRequest:
        return self.embed

    def capped_to(self, sent: int | None) -> int | None:
        return None

    async def compact(self, over: list[tuple[Target, int]]) -> bool:
        return False

    def overflows(self, required: frozenset[Capability]) -> list[tuple[Target, int]]:
        """The route's embedding candidates that only an input longer than their window keeps out."""
        out = []
        for t in self.call.route.primary:
            window = self.call.router.windows.known(t)
            if window is None:  # an unknown window keeps nothing out
                continue
            over = max(self.counts(t)) - window
            if over > 0 and self.why_not(t) is None:
                out.append((t, over))
        return out

    # -- candidates ------------------------------------------------------------------------

    def why_not(self, target: Target) -> Violation | None:
        """Why ``target`` cannot embed this request, ignoring its window."""
        route = self.call.route
        unsupported = ExclusionCode.EMBEDDINGS_UNSUPPORTED
        if not route.primary:
            return Violation(unsupported, "the route has no primary target")
        why = cannot_embed(target)
        if why is not None:
            return Violation(unsupported, f"embeddings_unsupported: {why}")
        return None

    def violation(self, target: Target) -> Violation | None:
        route = self.call.route
        reason = embedding_check(
            target, route, route.primary[0], self.embed.dimensions, max(self.counts(target)), self.call.router.windows
        )
        return reason or self.why_not(target)

    async def plan(self) -> Plan:
        call = self.call
        if not call.route.primary:
            return Plan(candidates=(), excluded=(), required=frozenset())
        return plan(
            call.route,
            _NO_REQUEST,
            call.env,
            input_tokens=self.input_tokens,
            health=call.router.health,
            now=call.t0,
            breakers=call.router.breakers,
            violation=self.violation,
            windows=call.router.windows,
        )

    # -- one attempt -----------------------------------------------------------------------

    async def exchange(
        self, target: Target, request: Request | EmbedRequest, start: float, until: float, quiet: float
    ) -> Exchanged:
        del request, quiet  # one plain exchange of this request: there is no stream to be silent
        call = self.call
        left = call.deadline.remaining(start)
        total = min(target.attempt_cap(), max(0.0, until - start))
        connect = min(target.timeouts.connect, total)
        adapter = embed_adapter_for(target.dialect)
        assert adapter is not None  # the plan admitted only targets with one
        status: int | None = None
        outcome: Embeddings | Failure
        connected = watch_connect()
        try:
            async with asyncio.timeout(total):
                status, outcome = await self._send_all(target, adapter, connect, start + total)
        except (TimeoutError, TransportError, AuthError) as exc:
            outcome = exchange_failure(exc, total, left, target)
        if isinstance(outcome, Embeddings):
            outcome = _checked(outcome, target, self.embed, status)
        else:
            outcome = _cannot_embed_answer(outcome)
        usage: Usage | None = None
        cost, estimated = 0.0, False
        if isinstance(outcome, Embeddings):
            tokens = outcome.usage.input_tokens
            if tokens <= 0:  # the provider counted nothing: ours stands in, and says so
                tokens, estimated = self.local_tokens(target), True
            usage = Usage(input_tokens=tokens)
            cost = target.price.cost(tokens, 0)
            outcome = replace(outcome, usage=usage)
        elif maybe_billed(outcome):
            cost, estimated = target.price.cost(self.local_tokens(target), 0), True
        contract_ok: bool | None = True  # vectors of the size asked for
        if isinstance(outcome, Failure):
            contract_ok = False if outcome.kind is FailureKind.CONTRACT_FAILURE else None
        return Exchanged(
            outcome=outcome,
            connect=connect,
            total=total,
            status=status,
            usage=usage,
            cost=cost,
            estimated=estimated,
            connected=connected[0] if connected else None,
            contract_ok=contract_ok,
            checked=None if isinstance(outcome, Failure) else Validation(transport=True, contract=True),
        )

    def answer(self, outcome: Response | Embeddings) -> Embeddings:
        assert isinstance(outcome, Embeddings)
        return outcome

    async def _send_all(
        self, target: Target, adapter: EmbedAdapter, connect: float, until: float
    ) -> tuple[int | None, Embeddings | Failure]:
        """Every batch of the request; the first failure (in the order they end) ends the attempt."""
        size = self.batch_size(target, adapter)
        n = len(self.embed.inputs)
        parts = [self.embed.part(i, i + size) for i in range(0, n, size)]
        if len(parts) == 1:
            return await self._send(target, adapter, parts[0], connect, until)
        gate = asyncio.Semaphore(PARALLEL_BATCHES)

        async def one(part: EmbedRequest) -> tuple[int | None, Embeddings | Failure]:
            async with gate:
                return await self._send(target, adapter, part, connect, until)

        tasks = [asyncio.ensure_future(one(p)) for p in parts]
        position: dict[asyncio.Future[tuple[int | None, Embeddings | Failure]], int] = {
            task: i for i, task in enumerate(tasks)
        }
        answers: dict[int, Embeddings] = {}
        try:
            pending: set[asyncio.Future[tuple[int | None, Embeddings | Failure]]] = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    status, out = task.result()  # a transport error or timeout propagates
                    if isinstance(out, Failure):
                        return status, out
                    answers[position[task]] = out
        finally:
            for task in tasks:
                task.cancel()  # a no-op for the finished ones
            await asyncio.gather(*tasks, return_exceptions=True)
        return 200, _merged([answers[i] for i in range(len(tasks))])

    def batch_size(self, target: Target, adapter: EmbedAdapter) -> int:
        """The provider's batch size, or fewer, so that one answer fits the transport's limit."""
        dims = dimensions_of(target, self.embed) or UNKNOWN_DIMENSIONS
        room = getattr(self.call.router.transport, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
        fits = int(room * 0.9) // (dims * BYTES_PER_DIMENSION)
        return max(1, min(adapter.batch_size(target), fits))

    async def _send(
        self, target: Target, adapter: EmbedAdapter, part: EmbedRequest, connect: float, until: float
    ) -> tuple[int | None, Embeddings | Failure]:
        router = self.call.router
        http = adapter.build_embed(target, part)
        if router.auth.needed(target):
            http = await router.auth.authorize(target, http)
        total = max(0.0, until - self.call.loop.time())
        resp = await router.transport.send(http, connect_timeout=min(connect, total), total_timeout=total)
        if len(resp.body) > HEAVY_ANSWER_BYTES:  # ~100 vectors of 3,072: read in a worker thread (see the constant)
            return resp.status, await asyncio.to_thread(_decoded_alone, adapter, target, part, resp)
        return resp.status, adapter.parse_embed(target, part, resp)


# A large answer is decoded one vector per call (loads_strict's slices), so the event loop never
# waits for the GIL behind a whole answer (~30 ms for 3 MB); and one answer at a time: with six
# worker threads decoding at once, the loop got the GIL in turn with all six (a /healthz probe
# waited 110-160 ms, 12-33 ms with one).
_DECODING = threading.Lock()


def _decoded_alone(
    adapter: EmbedAdapter, target: Target, part: EmbedRequest, response: HttpResponse
) -> Embeddings | Failure:
    with _DECODING:
        return adapter.parse_embed(target, part, response)


def _merged(parts: Sequence[Embeddings]) -> Embeddings:
    first = parts[0]
    return Embeddings(
        vectors=tuple(v for p in parts for v in p.vectors),
        model=first.model,
        usage=Usage(input_tokens=sum(p.usage.input_tokens for p in parts)),
        provider_request_id=first.provider_request_id,
        rate_limits=parts[-1].rate_limits,
    )


def _checked(result: Embeddings, target: Target, request: EmbedRequest, status: int | None) -> Embeddings | Failure:
    """Vectors of the size that was asked for, all of one size: vectors of another size are
    not comparable with the caller's, whatever else is right about them."""
    sizes = {len(v) for v in result.vectors}
    want = dimensions_of(target, request)
    if want is not None and sizes != {want}:
        got = ", ".join(str(s) for s in sorted(sizes))
        return Failure(
            kind=FailureKind.CONTRACT_FAILURE,
            message=f"{target.name} answered vectors of {got} dimensions; {want} were asked for",
            status=status,
            provider_request_id=result.provider_request_id,
            provider_code="dimensions_differ",
        )
    if len(sizes) > 1:
        return Failure(
            kind=FailureKind.PROVIDER_SERVER_ERROR,
            message=f"{target.name} answered vectors of different sizes ({', '.join(map(str, sorted(sizes)))})",
            status=status,
            provider_request_id=result.provider_request_id,
        )
    return result


def embed_request(
    inputs: str | Sequence[str] | EmbedRequest, dimensions: int | None, input_type: EmbedInput | str | None
) -> EmbedRequest:
    """The request ``Router.embed`` was given, checked (InvalidRequest naming the field)."""
    if isinstance(inputs, EmbedRequest):
        req = inputs
    else:
        kind: EmbedInput | None = None
        if input_type is not None:
            try:
                kind = EmbedInput(input_type)
            except ValueError:
                choices = ", ".join(e.value for e in EmbedInput)
                raise InvalidRequest(
                    "input_type", f"{input_type!r} is not known", f"use one of {choices}, or None"
                ) from None
        texts = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        req = EmbedRequest(inputs=texts, dimensions=dimensions, input_type=kind)
    req.check()
    return req


__all__ = ["PARALLEL_BATCHES", "Embedding", "cannot_embed", "embed_request", "route_cannot_embed"]
