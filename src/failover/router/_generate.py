"""A generation, plain or streamed: the work of :meth:`Router.complete` and :meth:`Router.stream`.

Generation(call, request)
  tokens       input_tokens(target): the provider's own count where one was asked for
               (near a known window: declared, or stated by the provider), else the
               target's local count, cached per tokenizer
  plan()       the plan (policy.plan: contract filter -> cool-downs, breakers -> ranking)
  compact()    when nothing fits a window, one compaction of the request (then a new plan)
  exchange()   on the history the target can read: plain (dialect.build -> auth.authorize
               -> transport.send -> dialect.parse) or streamed (_stream.stream_exchange),
               then the route's contract (validation) and its quality gate
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from dataclasses import replace

from ..auth import AuthError
from ..model import Capability, Embeddings, EmbedRequest, Failure, FailureKind, Request, Response, Target, watch_connect
from ..model import Validation as Checked
from ..policy import Plan, caps_max_tokens, max_tokens_for, plan
from ..tokens import count_exactly, counter_for, counts_remotely, near_window, observe_usage, reserved_output
from ..transport import TransportError
from ..validation import checks_anything, validate
from ._conclude import CONTRACT_KINDS
from ._exchange import exchange_failure, maybe_billed, plain_exchange
from ._history import readable_history
from ._load import RequestLoad, balancer
from ._stream import StreamTimers, stream_exchange
from ._work import Call, Exchanged

log = logging.getLogger("failover.router")


class Generation:
    """What a chat request asks, and how one attempt sends it (see the module docstring)."""

    compactable = True

    def __init__(self, call: Call, request: Request, tokens: Mapping[str, int] | None = None) -> None:
        self.call = call
        self.request = request
        self.cap = caps_max_tokens(call.route, call.env)  # max_tokens above a target's max output: capped
        self._tokens: dict[str, int] = dict(tokens) if tokens else {}  # counter name -> input tokens
        self._exact: dict[str, int] = {}  # target name -> the provider's own count
        self._sent: dict[str, tuple[Request, Request]] = {}  # target name -> (request, as capped for it)

    # -- tokens and the request each target is sent ----------------------------------------

    def request_for(self, target: Target) -> Request:
        """The request as ``target`` is sent it: with the route's (or the envelope's)
        ``max_tokens_policy`` ``cap``, a max_tokens above its max output becomes that max."""
        want = max_tokens_for(target, self.request.max_tokens, self.cap)
        if want == self.request.max_tokens:
            return self.request
        base, sent = self._sent.get(target.name, (None, self.request))
        if base is not self.request:  # none yet, or one from before a compaction
            sent = replace(self.request, max_tokens=want)
            self._sent[target.name] = (self.request, sent)
        return sent

    def capped_to(self, sent: int | None) -> int | None:
        """``sent``, the max_tokens of an attempt's request, when it is less than the caller
        asked for (a capped request, or its repair); None when it is what the caller asked."""
        asked = self.request.max_tokens
        return sent if asked is not None and sent is not None and sent < asked else None

    def input_tokens(self, target: Target) -> int:
        if self._exact:  # a provider's own count, near a window: rare
            exact = self._exact.get(target.name)
            if exact is not None:
                return exact
        return self.local_tokens(target)

    def local_tokens(self, target: Target) -> int:
        counter = counter_for(target)
        n = self._tokens.get(counter.name)
        if n is None:
            n = self._tokens[counter.name] = counter.count(self.request)
        return n

    def output_reserve(self, target: Target, request: Request | EmbedRequest) -> int:
        """The output tokens the limiter holds for an attempt until its usage is known."""
        assert isinstance(request, Request)
        return request.max_tokens or target.max_output_tokens

    async def count_near_window(self) -> None:
        """Ask the providers that count (Anthropic, Gemini) where the local count is near a window."""
        call = self.call
        router = call.router
        timeout = min(router.count_timeout, call.deadline.remaining(call.loop.time()) / 4)
        groups: dict[tuple[str, str, str], list[Target]] = {}
        for t in call.route.targets:
            window = router.windows.known(t)  # an unknown window: nothing to be near
            if window is None or t.name in self._exact or not counts_remotely(t, router.dialect(t)):
                continue
            out = reserved_output(t, self.request_for(t))
            if near_window(self.local_tokens(t), out, window):
                groups.setdefault((t.dialect, t.model, t.base_url), []).append(t)
        if not groups or timeout <= 0:
            return
        counts = await asyncio.gather(
            *(
                count_exactly(
                    ts[0],
                    self.request,
                    router.transport,
                    timeout=timeout,
                    dialect=router.dialect(ts[0]),
                    authorize=router.auth.authorize if router.auth.needed(ts[0]) else None,
                )
                for ts in groups.values()
            )
        )
        for ts, n in zip(groups.values(), counts, strict=True):
            if n is not None:
                self._exact.update((t.name, n) for t in ts)

    # -- the plan ----------------------------------------------------------------------------

    def overflows(self, required: frozenset[Capability]) -> list[tuple[Target, int]]:
        """The targets that could serve but for their window, and by how many tokens they are over."""
        call = self.call
        out = []
        for t in call.route.targets:
            if not required <= t.capabilities or (t not in call.route.primary and not call.env.allow_fallback):
                continue
            window = call.router.windows.known(t)
            if window is None:  # an unknown window keeps nothing out
                continue
            over = self.input_tokens(t) + reserved_output(t, self.request_for(t)) - window
            if over > 0:
                out.append((t, over))
        return out

    async def plan(self) -> Plan:
        """The route's candidates for this request now."""
        await self.count_near_window()
        call = self.call
        router = call.router
        route = call.route
        balanced = None
        if len(route.primary) > 1:  # one deployment: nothing to balance, nothing built for it
            view = RequestLoad(router.load, router.limiters, self.input_tokens, self.limiter_output)
            balanced = balancer(route, view, call.t0, router.balance_rng, self.request, call.env)
        return plan(
            call.route,
            self.request,
            call.env,
            input_tokens=self.input_tokens,
            health=router.health,
            now=call.t0,
            breakers=router.breakers,
            windows=router.windows,
            balanced=balanced,
        )

    def limiter_output(self, target: Target) -> int:
        return self.output_reserve(target, self.request)

    async def compact(self, over: list[tuple[Target, int]]) -> bool:
        """The compaction hook, once, on the candidate nearest to fitting its window."""
        hook = self.call.router.compaction
        if hook is None or not over:
            return False
        best, tokens_over = min(over, key=lambda to: to[1])
        shorter = await hook(self.request, best, tokens_over)
        if shorter is None:
            return False
        self.request = shorter
        self._tokens.clear()
        self._exact.clear()
        return True

    # -- one exchange ------------------------------------------------------------------------

    def streams(self, target: Target, request: Request) -> bool:
        """Stream this attempt? Always for a streaming caller; for a plain call only when the
        caller's own ``max_tokens`` promises a generation longer than a silent connection should
        be trusted with (``stream_threshold`` seconds at the target's output rate)."""
        if self.call.output.sink is not None:
            return True
        threshold = self.call.router.stream_threshold
        if threshold is None or request.max_tokens is None or Capability.STREAMING not in target.capabilities:
            return False
        return request.max_tokens / max(target.output_tps, 1e-9) > threshold

    async def exchange(
        self, target: Target, request: Request | EmbedRequest, start: float, until: float, quiet: float
    ) -> Exchanged:
        """One attempt's exchange, checked (see the module docstring)."""
        assert isinstance(request, Request)
        call = self.call
        router, output = call.router, call.output
        left = call.deadline.remaining(start)
        total = min(target.attempt_cap(), max(0.0, until - start))
        connect = min(target.timeouts.connect, total)
        asked = request
        request, stripped = readable_history(request, target.key, router.dialect(target).reasoning_source)
        streamed = self.streams(target, request)
        outcome: Response | Failure
        status: int | None = None
        first_event: float | None = None
        timers: StreamTimers | None = None
        paused = 0.0  # seconds a stream was held back for the caller
        connected = watch_connect()  # a transport that can tell reports when it connected
        try:
            if streamed:
                timers = StreamTimers(
                    start=start,
                    first_event=target.timeouts.first_event,
                    idle=target.timeouts.idle,
                    quiet=quiet,
                    uncommitted_end=start + total,
                    committed_end=min(start + target.attempt_cap(), call.deadline.at),
                )
                output.committed_at = None
                status, outcome, first_event, streamed, paused = await stream_exchange(
                    router, output, target, request, timers, connect
                )
            else:
                status, outcome = await plain_exchange(router, target, request, total, connect)
        except (TimeoutError, TransportError, AuthError) as exc:
            outcome = exchange_failure(exc, total, left, target)
        outcome, contract_ok, task_ok = await self.check(request, outcome, until)
        if timers is not None and isinstance(outcome, Failure) and not output.started:
            output.discard_attempt()  # held whole and refused by the contract or the gate: never shown
        end = call.loop.time()
        usage = outcome.usage  # a failed 200 (truncation, refusal) was paid for too
        cost, estimated = 0.0, False
        if usage is not None:
            cost = target.price.cost(usage.input_tokens, usage.output_tokens)
            if asked is self.request_for(target) and usage.input_tokens > 0:  # not a repaired request
                observe_usage(target, self.local_tokens(target), usage.input_tokens)
        elif isinstance(outcome, Failure) and maybe_billed(outcome):
            cost, estimated = target.price.cost(self.input_tokens(target), 0), True
        checked = None
        if isinstance(outcome, Response):
            judged = checks_anything(request, call.route.contract)
            checked = Checked(transport=True, contract=True if judged else None, task=task_ok)
        committed = None
        if timers is not None:  # an answer held whole is shown (committed) as the attempt succeeds
            committed = output.committed_at
            if committed is None and isinstance(outcome, Response):
                committed = end
        return Exchanged(
            outcome=outcome,
            connect=connect,
            total=total,
            status=status,
            usage=usage,
            cost=cost,
            estimated=estimated,
            connected=connected[0] if connected else None,
            streamed=streamed,
            first_event=first_event,
            quiet=timers.quiet if timers is not None else math.inf,
            committed=committed,
            contract_ok=contract_ok,
            task_ok=task_ok,
            stripped=stripped,
            dropped=(
                request.passthrough.dropped(target.dialect, takes=target.passthrough)
                if request.passthrough is not None
                else ()
            ),
            capped_to=self.capped_to(asked.max_tokens),
            checked=checked,
            paused=paused,
        )

    async def check(
        self, request: Request, outcome: Response | Failure, until: float = math.inf
    ) -> tuple[Response | Failure, bool | None, bool | None]:
        """The route's contract and quality gate on what came back: ``(outcome, contract_ok,
        task_ok)``, None where nothing was judged. A gate that gives no verdict by ``until`` (the
        deadline once the output is committed), or raises, fails: a typed contract failure of
        the gate, as a verdict that fails would be."""
        call = self.call
        contract_ok: bool | None = None
        task_ok: bool | None = None
        if isinstance(outcome, Response):
            outcome = validate(request, outcome, call.route.contract)
            contract_ok = isinstance(outcome, Response)
        elif outcome.kind in CONTRACT_KINDS:
            contract_ok = False
        gate = call.router.gates.get(call.route.name)
        if isinstance(outcome, Response) and gate is not None:
            # The gate (a judge model, say) has its own budget, but its time is the attempt's: until
            # the output is committed it ends by ``until``, so the next candidate keeps its share.
            outcome_at = call.loop.time()
            end = call.deadline.at if call.output.started else min(until, call.deadline.at)
            why: str | None = None
            try:
                async with asyncio.timeout(max(end - call.loop.time(), 0.0)) as cut:
                    verdict = await gate(request, outcome)
            except Exception as exc:  # a judge that cannot judge fails the gate (fail closed), typed
                if isinstance(exc, TimeoutError) and cut.expired():
                    why = f"the judge gave no verdict within the {max(0.0, end - outcome_at):.3f}s this attempt had"
                else:
                    why = f"the judge raised {type(exc).__name__}: {exc}"
                why = f"quality gate could not judge the answer: {why}"
                log.warning("request %s: %s", call.rec.request_id, why)
            else:
                if not verdict.passed:
                    why = f"quality gate failed: {verdict.reason or 'no reason given'}"
            task_ok = why is None
            if why is not None:
                outcome = Failure(
                    kind=FailureKind.CONTRACT_FAILURE,
                    message=why,
                    status=200,
                    usage=outcome.usage,
                    response=outcome,
                    provider_request_id=outcome.provider_request_id,
                    provider_code="quality_gate",
                    quality_gate=True,
                )
        return outcome, contract_ok, task_ok

    def answer(self, outcome: Response | Embeddings) -> Response:
        assert isinstance(outcome, Response)
        return outcome


__all__ = ["Generation"]
