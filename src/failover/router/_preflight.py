"""One request's state, and what is worked out before its first attempt.

    Preflight(router, route, request, envelope)
      state        the deadline, the RouteRecord being built, the engine's RunState, the
                   Output a streaming caller is shown
      tokens       input_tokens(target): the provider's own count where one was asked for
                   (near a known window: declared, or stated by the provider), else the
                   target's local count, cached per tokenizer
      prepare()    the plan (policy.plan: contract filter -> cool-downs, breakers -> ranking),
                   and when nothing fits a window, one compaction of the request and a new plan

The attempts (:mod:`._attempt`) and the loop that carries out the engine's decisions
(:mod:`._run`) build on it; the embedding run (:mod:`._embed`) counts and plans its own way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from ..model import Attempt, Capability, Envelope, Request, Route, StreamEvent, Target
from ..policy import Deadline, Plan, Violation, caps_max_tokens, max_tokens_for, plan
from ..policy._canary import CanaryGate
from ..tokens import count_exactly, counter_for, counts_remotely, near_window, reserved_output
from ._engine import RunState
from ._parts import RouterParts
from ._record import Recorder
from ._stream import Output


class Preflight:
    """One request's state (see the module docstring); :class:`~._run._Run` carries it out."""

    def __init__(
        self,
        router: RouterParts,
        route: Route,
        request: Request,
        envelope: Envelope,
        *,
        stream: bool = False,
        restart_on_partial: bool = False,
    ) -> None:
        if stream:
            envelope = replace(envelope, required=envelope.required | {Capability.STREAMING})
        self.router = router
        self.route = route
        self.request = request
        self.env = envelope
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time()
        self.deadline = Deadline.after(now=self.t0, budget=envelope.budget)
        self.rec = Recorder(envelope.request_id, route.name, self.t0, listing=route)
        self.state = RunState(
            envelope=envelope,
            t0=self.t0,
            deadline_at=self.deadline.at,
            input_tokens=self.input_tokens,
            max_tokens=request.max_tokens,
            fallback_reserve=route.fallback_reserve,
            replay_timeouts=route.replay_timeouts,
        )
        self.policies = router.policies
        self.used: Attempt | None = None
        self._tokens: dict[str, int] = {}
        self._exact: dict[str, int] = {}  # target name -> the provider's own count
        self.compacted = False
        self.output = Output(None)
        self.output.hold(
            route.hold_tokens if envelope.hold_tokens is None else envelope.hold_tokens,
            route.hold_seconds if envelope.hold_seconds is None else envelope.hold_seconds,
            self.loop.time,
        )
        self.cap = caps_max_tokens(route, envelope)  # max_tokens above a target's max output: capped
        self._sent: dict[str, tuple[Request, Request]] = {}  # target name -> (request, as capped for it)
        self.canary = CanaryGate(route, router.canary_rng)  # draws only once an attempt failed
        self.restart_ok = restart_on_partial and envelope.allow_after_partial

    @property
    def sink(self) -> Callable[[StreamEvent], None] | None:
        return self.output.sink

    # -- preflight -------------------------------------------------------------------------

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
        exact = self._exact.get(target.name)
        return exact if exact is not None else self.local_tokens(target)

    def local_tokens(self, target: Target) -> int:
        counter = counter_for(target)
        n = self._tokens.get(counter.name)
        if n is None:
            n = self._tokens[counter.name] = counter.count(self.request)
        return n

    async def count_near_window(self) -> None:
        """Ask the providers that count (Anthropic, Gemini) where the local count is near a window."""
        timeout = min(self.router.count_timeout, self.deadline.remaining(self.loop.time()) / 4)
        groups: dict[tuple[str, str, str], list[Target]] = {}
        for t in self.route.targets:
            dialect = self.router.dialect(t)
            if t.name in self._exact or not counts_remotely(t, dialect):
                continue
            window = self.router.windows.known(t)  # an unknown window: nothing to be near
            out = reserved_output(t, self.request_for(t))
            if window is not None and near_window(self.local_tokens(t), out, window):
                groups.setdefault((t.dialect, t.model, t.base_url), []).append(t)
        if not groups or timeout <= 0:
            return
        counts = await asyncio.gather(
            *(
                count_exactly(
                    ts[0],
                    self.request,
                    self.router.transport,
                    timeout=timeout,
                    dialect=self.router.dialect(ts[0]),
                    authorize=self.router.auth.authorize if self.router.auth.needed(ts[0]) else None,
                )
                for ts in groups.values()
            )
        )
        for ts, n in zip(groups.values(), counts, strict=True):
            if n is not None:
                self._exact.update((t.name, n) for t in ts)

    def overflows(self, required: frozenset[Capability]) -> list[tuple[Target, int]]:
        """The targets that could serve but for their window, and by how many tokens they are over."""
        out = []
        for t in self.route.targets:
            if not required <= t.capabilities or (t not in self.route.primary and not self.env.allow_fallback):
                continue
            window = self.router.windows.known(t)
            if window is None:  # an unknown window keeps nothing out
                continue
            over = self.input_tokens(t) + reserved_output(t, self.request_for(t)) - window
            if over > 0:
                out.append((t, over))
        return out

    async def make_plan(self) -> Plan:
        await self.count_near_window()
        return self.planned()

    def planned(self, violation: Callable[[Target], Violation | None] | None = None) -> Plan:
        """The route's candidates for this request now (``violation``: in place of the contract
        filter, see :func:`failover.policy.plan`)."""
        return plan(
            self.route,
            self.request,
            self.env,
            input_tokens=self.input_tokens,
            health=self.router.health,
            now=self.t0,
            breakers=self.router.breakers,
            violation=violation,
            windows=self.router.windows,
        )

    async def prepare(self) -> Plan:
        """The plan; when no candidate fits its window, the compaction hook is called once (on
        the candidate nearest to fitting) and the shorter request is planned again."""
        p = await self.make_plan()
        hook = self.router.compaction
        if not p.candidates and hook is not None and not self.compacted:
            over = self.overflows(p.required)
            if over:
                best, tokens_over = min(over, key=lambda to: to[1])
                self.compacted = True
                shorter = await hook(self.request, best, tokens_over)
                if shorter is not None:
                    self.request = shorter
                    self.state.max_tokens = shorter.max_tokens
                    self._tokens.clear()
                    self._exact.clear()
                    p = await self.make_plan()
        return p
