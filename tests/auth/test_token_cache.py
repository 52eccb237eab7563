"""When a bearer token is replaced, and that concurrent callers share one fetch."""

from __future__ import annotations

import asyncio

import pytest

from failover.auth import AuthError
from failover.auth._token import Token, TokenCache, refresh_due

pytestmark = pytest.mark.looptime


def tok(expires_at: float | None, obtained_at: float = 0.0, value: str = "t") -> Token:
    return Token(value=value, expires_at=expires_at, obtained_at=obtained_at)


def test_refresh_due() -> None:
    assert refresh_due(None, 0.0)
    assert refresh_due(tok(3600.0, value=""), 0.0)  # an empty token is no token
    assert not refresh_due(tok(None), 10**9)  # no expiry: kept
    # an hour's token: replaced five minutes before it expires
    assert not refresh_due(tok(3600.0), 3299.0)
    assert refresh_due(tok(3600.0), 3300.0)
    assert refresh_due(tok(3600.0), 4000.0)
    # a two-minute token: halfway through its life, not at once
    assert not refresh_due(tok(120.0), 59.0)
    assert refresh_due(tok(120.0), 60.0)
    # an expiry in the past (a clock skew): due
    assert refresh_due(tok(10.0, obtained_at=20.0), 15.0)


def test_a_token_never_shows_in_a_repr() -> None:
    t = tok(3600.0, value="ya29.secret")
    assert "ya29" not in repr(t) and "ya29" not in str(t)


class Fetcher:
    """Hands out t1, t2... each living ``life`` seconds on the loop clock; ``gate`` holds a fetch."""

    def __init__(self, life: float = 3600.0) -> None:
        self.life = life
        self.calls = 0
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def __call__(self) -> Token:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise AuthError("the token endpoint said no")
        now = asyncio.get_running_loop().time()
        return Token(value=f"t{self.calls}", expires_at=now + self.life, obtained_at=now)


def cache(fetch: Fetcher) -> TokenCache:
    return TokenCache(fetch, clock=lambda: asyncio.get_running_loop().time())


async def test_one_fetch_serves_every_caller_that_waits_for_it() -> None:
    fetch = Fetcher()
    fetch.gate = asyncio.Event()
    c = cache(fetch)
    waiting = [asyncio.create_task(c.get()) for _ in range(20)]
    await asyncio.sleep(1)
    fetch.gate.set()
    assert await asyncio.gather(*waiting) == ["t1"] * 20
    assert fetch.calls == 1 and c.fetches == 1
    await asyncio.sleep(3299)
    assert await c.get() == "t1" and fetch.calls == 1  # still five minutes and more left
    await asyncio.sleep(1)
    assert await c.get() == "t2" and fetch.calls == 2


async def test_a_caller_that_gives_up_does_not_cancel_the_fetch_for_the_others() -> None:
    fetch = Fetcher()
    fetch.gate = asyncio.Event()
    c = cache(fetch)
    first = asyncio.create_task(c.get())
    second = asyncio.create_task(c.get())
    await asyncio.sleep(0.5)
    first.cancel()  # its deadline, a lost hedge
    await asyncio.sleep(0.5)
    fetch.gate.set()
    assert await second == "t1"
    assert first.cancelled() and fetch.calls == 1


async def test_a_failed_fetch_fails_every_waiter_and_the_next_call_tries_again() -> None:
    fetch = Fetcher()
    fetch.fail = True
    c = cache(fetch)
    results = await asyncio.gather(c.get(), c.get(), return_exceptions=True)
    assert all(isinstance(r, AuthError) for r in results) and fetch.calls == 1
    fetch.fail = False
    assert await c.get() == "t2"


async def test_the_old_token_serves_while_an_early_refresh_fails_and_not_after_it_expires() -> None:
    fetch = Fetcher()
    c = cache(fetch)
    assert await c.get() == "t1"
    fetch.fail = True
    await asyncio.sleep(3400)  # due (within five minutes of expiry), still valid
    assert await c.get() == "t1"
    assert fetch.calls == 2  # it did try
    await asyncio.sleep(195)  # 5 s left: too little to hand out
    with pytest.raises(AuthError, match="said no"):
        await c.get()


async def test_aclose_cancels_a_fetch_in_flight_and_forgets_the_token() -> None:
    fetch = Fetcher()
    c = cache(fetch)
    assert await c.get() == "t1"
    fetch.gate = asyncio.Event()
    await asyncio.sleep(3500)
    waiter = asyncio.create_task(c.get())
    await asyncio.sleep(0.1)
    await c.aclose()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    fetch.gate.set()
    assert await c.get() == "t3"  # nothing kept: a new fetch
