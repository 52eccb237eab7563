"""Every failure kind on Gemini and Claude served by Vertex AI, injected by the fault kit over
real loopback HTTP: the same cases as the dialects' matrix (test_failure_kinds_over_http),
with Vertex's URLs, a bearer token from the target's credential chain, and the errors Vertex's
front end sends in Google's envelope (quota, billing, authentication, an unknown model), for
Claude too."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from failover import FailureKind, Route, Router, Timeouts, Unavailable, Workflow
from failover.auth import Authorizers
from failover.model import Auth, AuthKind, Envelope, Phase, Target, Vertex
from failover.policy import Backoff, Unlimited
from failover.testing import FakeProvider, FakeServer, Outcome, Script
from failover.transport import HttpRequest

from .test_failure_kinds_over_http import CAPS, CASES, good_reply, request_for

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

TOKEN = "ya29.vertex-test"


class Token:
    """A credential chain that always has the same token (google-auth's refresh is tested in tests/auth)."""

    def __init__(self, auth: Auth) -> None:
        self.auth = auth

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        return replace(request, headers={**request.headers, "authorization": f"Bearer {TOKEN}"})

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("dialect", ["gemini", "anthropic"])
@pytest.mark.parametrize("name", list(CASES))
async def test_failure_kind_on_vertex(dialect: str, name: str) -> None:
    case = CASES[name]
    a = FakeProvider("a", dialect, Script.of(case.reply, default=good_reply(case.request, "repaired")), api_key=TOKEN)
    if case.phase_used is not Phase.REPAIR:
        a.load(Script.always(case.reply))
    b = FakeProvider("b", "openai", Script.always(good_reply(case.request, "b")))
    async with FakeServer(a, b) as srv:
        ta = srv.target_for(
            a,
            vertex=Vertex(project="my-project", location="us-east5"),
            api_key=None,
            timeouts=Timeouts(connect=1.0, total=1.0),
            max_attempts=2,
            tokenizer="estimate",
            capabilities=CAPS,
        )
        tb = srv.target_for(  # its window holds what a's provider reports on an overflow (1,048,577 tokens)
            b,
            timeouts=Timeouts(connect=1.0, total=1.0),
            tokenizer="estimate",
            context_window=2 * 10**6,
            capabilities=CAPS,
        )
        router = Router(
            [Route(name="r", primary=(ta,), fallbacks=(tb,))],
            retry_budget=Unlimited(),
            backoff=Backoff(base=0.2, cap=0.2),
            rng=random.Random(3),
            auth=Authorizers({AuthKind.GOOGLE: Token}),
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        if case.caller == "ok":
            resp = await router.complete("r", request_for(case.request), Envelope(budget=10.0))
            rec = resp.record
            assert rec is not None
            assert rec.target_used == ("a" if case.phase_used is Phase.REPAIR else "b")
            assert rec.attempts[-1].phase is case.phase_used and rec.recovered
        else:
            with pytest.raises(Unavailable) as ei:
                await router.complete("r", request_for(case.request), Envelope(budget=10.0))
            assert ei.value.reason == FailureKind(case.caller)
            rec = ei.value.record
            assert rec.workflow is Workflow.STOP
        elapsed = loop.time() - t0
        await router.aclose()
    assert (len(a.calls), len(b.calls)) == (case.a_calls, case.b_calls)
    assert all(c.scripted for c in a.calls)  # the token was good every time: the script answered
    assert all("/publishers/" in c.path for c in a.calls)
    assert all(x.outcome == case.kind for x in rec.attempts if x.target == "a" and x.phase is Phase.PRIMARY)
    spent = sum(x.duration for x in rec.attempts) + sum(w.end - w.start for w in rec.waits)
    assert elapsed == pytest.approx(spent, abs=0.01)
    if case.kind == "timeout:total":
        assert [c.outcome for c in a.calls] == [Outcome.CLIENT_DISCONNECTED]
    if case.kind == "rate_limited":  # Google's RetryInfo is the wait, for Claude too
        assert [w.reason for w in rec.waits] == ["retry_after"]
        assert rec.waits[0].end - rec.waits[0].start == pytest.approx(0.5, abs=0.01)
