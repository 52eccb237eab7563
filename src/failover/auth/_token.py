"""A bearer token kept until it is due, fetched one fetch at a time (Google's and Entra's chains).

The decision is :func:`refresh_due`, a pure function of the token and the time. The cache
around it has one rule for concurrency: the first caller that finds the token due starts a
fetch task, and every caller until it ends awaits that same task, shielded, so one caller
giving up (its deadline, a cancelled hedge) does not cancel the fetch the others wait for.
A fetch that fails while the old token still has time left is not the requests' problem:
they keep using the old token until it expires.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from . import AuthError

__all__ = ["MARGIN", "Token", "TokenCache", "refresh_due"]

MARGIN = 300.0  # seconds before expiry a token is replaced (google-auth's own threshold: 225 s)
_KEEP_OLD = 10.0  # an old token still needs this many seconds left to stand in for a failed fetch


@dataclass(frozen=True, slots=True)
class Token:
    """An access token and when it expires (unix seconds; None: it does not)."""

    value: str = field(repr=False)
    expires_at: float | None
    obtained_at: float


def refresh_due(token: Token | None, now: float, margin: float = MARGIN) -> bool:
    """Whether ``token`` must be replaced at ``now``.

    Always without a token; never for one without an expiry; else from ``margin`` seconds
    before it expires, or from halfway through its life when that is later, so a short-lived
    token is not fetched again for every request.
    """
    if token is None or not token.value:
        return True
    if token.expires_at is None:
        return False
    life = token.expires_at - token.obtained_at
    lead = min(margin, life / 2) if life > 0 else margin
    return now >= token.expires_at - lead


class TokenCache:
    """One token from ``fetch``, replaced when :func:`refresh_due` says so.

    ``fetch`` raises :class:`AuthError` when it cannot produce a token. ``clock`` answers
    unix seconds (the clock tokens' expiry times are on).
    """

    def __init__(
        self,
        fetch: Callable[[], Awaitable[Token]],
        *,
        clock: Callable[[], float] = time.time,
        margin: float = MARGIN,
    ) -> None:
        self._fetch = fetch
        self.clock = clock
        self._margin = margin
        self._token: Token | None = None
        self._task: asyncio.Task[Token] | None = None
        self.fetches = 0  # tokens obtained so far

    def __repr__(self) -> str:
        expires = "none" if self._token is None else f"expires_at={self._token.expires_at}"
        return f"<TokenCache {expires} fetches={self.fetches}>"

    async def get(self) -> str:
        """A token that is not due (fetching one first if needed)."""
        token = self._token
        if not refresh_due(token, self.clock(), self._margin):
            assert token is not None
            return token.value
        task = self._task
        if task is None or task.done():
            task = self._task = asyncio.get_running_loop().create_task(self._run())
            task.add_done_callback(_retrieved)  # its failure is each waiter's to see, not the loop's
        try:
            return (await asyncio.shield(task)).value
        except AuthError:
            old = self._token
            if old is not None and old.expires_at is not None and self.clock() < old.expires_at - _KEEP_OLD:
                return old.value
            raise

    async def _run(self) -> Token:
        try:
            token = await self._fetch()
        finally:
            self._task = None
        if not token.value:
            raise AuthError("the credential chain gave an empty access token")
        self._token = token
        self.fetches += 1
        return token

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._token = None


def _retrieved(task: asyncio.Task[Token]) -> None:
    if not task.cancelled():
        task.exception()
