"""The router authorises each request of a target whose cloud needs it, through one chain per Auth."""

from __future__ import annotations

from dataclasses import replace

import pytest

from failover import Envelope, FailureKind, Request, Route, Router, Unavailable
from failover.auth import AuthError, Authorizers, effective_auth
from failover.model import Auth, AuthKind, Dialect, Target, Vertex
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.transport import HttpRequest

pytestmark = pytest.mark.looptime


class Stamp:
    """A chain that stamps a header, and counts how often it was made and used."""

    made = 0

    def __init__(self, auth: Auth, *, fail: bool = False) -> None:
        Stamp.made += 1
        self.auth, self.fail, self.used = auth, fail, 0

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        self.used += 1
        if self.fail:
            raise AuthError(f"{self.auth.kind.value} credentials: none found (set a profile)")
        return replace(request, headers={**request.headers, "authorization": f"Bearer {self.auth.kind.value}-token"})

    async def aclose(self) -> None:
        pass


def test_which_chain_a_target_goes_through() -> None:
    base = Target(name="t", dialect=Dialect.OPENAI, model="m", base_url="http://x")
    assert effective_auth(base) is None
    vertex = replace(base, dialect=Dialect.GEMINI, vertex=Vertex(project="p", location="global"))
    assert effective_auth(vertex) == Auth(kind=AuthKind.GOOGLE)
    assert effective_auth(replace(base, dialect=Dialect.BEDROCK)) == Auth(kind=AuthKind.AWS)
    entra = replace(base, auth=Auth(kind=AuthKind.AZURE, tenant_id="t1"))
    assert effective_auth(entra) == Auth(kind=AuthKind.AZURE, tenant_id="t1")


async def test_one_chain_per_auth_shared_by_its_targets_and_keyed_targets_untouched() -> None:
    Stamp.made = 0
    auth = Authorizers({AuthKind.AZURE: Stamp})
    a = Target(name="a", dialect=Dialect.OPENAI, model="m", base_url="http://x", auth=Auth(kind=AuthKind.AZURE))
    b = replace(a, name="b")
    plain = replace(a, name="plain", auth=None)
    http = HttpRequest(method="POST", url="http://x", headers={"content-type": "application/json"}, json={})
    for t in (a, b, a):
        signed = await auth.authorize(t, http)
        assert signed.headers["authorization"] == "Bearer azure-token"
    assert Stamp.made == 1
    assert await auth.authorize(plain, http) is http


async def test_a_chain_that_cannot_authorise_fails_the_attempt_as_authentication_and_falls_back() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("from a")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    ta = replace(a.target(tokenizer="estimate"), auth=Auth(kind=AuthKind.AZURE))
    route = Route(name="r", primary=(ta,), fallbacks=(b.target(tokenizer="estimate"),))
    router = Router(
        [route], transport=FakeNetwork(a, b), auth=Authorizers({AuthKind.AZURE: lambda x: Stamp(x, fail=True)})
    )
    resp = await router.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "from b" and len(a.calls) == 0  # nothing was sent without credentials
    assert resp.record is not None
    first = resp.record.attempts[0]
    assert first.target == "a" and first.failure is not None
    assert first.failure.kind is FailureKind.AUTHENTICATION_OR_PERMISSION
    assert "set a profile" in first.failure.message


async def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import failover.auth

    monkeypatch.setitem(failover.auth._MODULES, AuthKind.AZURE, ("._not_installed", "azure", "azure-identity"))
    t = Target(name="t", dialect=Dialect.OPENAI, model="m", base_url="http://x", auth=Auth(kind=AuthKind.AZURE))
    router = Router([Route(name="r", primary=(t,))], transport=FakeNetwork())
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", Request.simple("hi"), Envelope(budget=2.0))
    failure = ei.value.record.attempts[0].failure
    assert failure is not None and failure.kind is FailureKind.AUTHENTICATION_OR_PERMISSION
    assert "failover[azure]" in failure.message
