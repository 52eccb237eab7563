"""Cloud credentials: authorise a request a dialect built, just before it is sent.

A target with an API key needs nothing here: its dialect puts the key in a header. A target
whose provider wants more (AWS Bedrock: a SigV4 signature over the exact request; Google
Vertex AI: an OAuth access token; Azure OpenAI with Microsoft Entra ID: an Entra token) names
its credential chain in ``Target.auth`` (Vertex and Bedrock targets get theirs by default), and
the router asks :class:`Authorizers` to authorise each request for it::

    http = dialect.build(target, request)
    http = await router.auth.authorize(target, http)

Each chain is the cloud's own library (botocore, google-auth, azure-identity), imported only
when a target uses it (extras ``bedrock``, ``vertex``, ``azure``). Tokens are cached and
refreshed before they expire, one refresh at a time and off the event loop where the library
blocks; credentials never appear in a log, an error or a repr. A chain that cannot produce
credentials raises :class:`AuthError`, which the router records as an
``authentication_or_permission`` failure of that attempt.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import Protocol

from ..model import Auth, AuthKind, Dialect, Target
from ..transport import HttpRequest

__all__ = ["AuthError", "Authorizer", "Authorizers", "effective_auth"]


class AuthError(Exception):
    """A credential chain could not authorise a request. The message says which chain and
    what to fix; it never holds a credential."""


class Authorizer(Protocol):
    """One credential chain: authorises requests for every target that uses it."""

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest: ...

    async def aclose(self) -> None: ...


def effective_auth(target: Target) -> Auth | None:
    """The chain a target's requests go through: its own ``auth``, else Google's for a Vertex
    target and AWS's for a Bedrock one; None: the dialect's API-key header is all."""
    if target.auth is not None:
        return target.auth
    if target.vertex is not None:
        return Auth(kind=AuthKind.GOOGLE)
    if target.dialect is Dialect.BEDROCK:
        return Auth(kind=AuthKind.AWS)
    return None


# Each kind's chain lives in its own module, imported on first use (its library is an extra).
_MODULES = {
    AuthKind.AWS: ("._aws", "bedrock", "botocore"),
    AuthKind.GOOGLE: ("._google", "vertex", "google-auth"),
    AuthKind.AZURE: ("._azure", "azure", "azure-identity"),
}

Factory = Callable[[Auth], Authorizer]


def _factory(kind: AuthKind) -> Factory:
    name, extra, library = _MODULES[kind]
    try:
        module = importlib.import_module(name, __name__)
    except ImportError as exc:
        raise AuthError(f"{kind.value} credentials need {library}: pip install 'failover[{extra}]' ({exc})") from None
    make: Factory = module.authorizer
    return make


class Authorizers:
    """One :class:`Authorizer` per distinct :class:`~failover.model.Auth`, made on first use.

    ``factories`` replaces how a kind's authorizer is made (tests, or a chain of your own).
    """

    def __init__(self, factories: dict[AuthKind, Factory] | None = None) -> None:
        self._factories = dict(factories or {})
        self._made: dict[Auth, Authorizer] = {}
        self._lock = asyncio.Lock()

    def needed(self, target: Target) -> bool:
        return effective_auth(target) is not None

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        """``request`` as it may be sent for ``target`` (unchanged when the target needs no chain)."""
        auth = effective_auth(target)
        if auth is None:
            return request
        chain = self._made.get(auth)
        if chain is None:
            async with self._lock:
                chain = self._made.get(auth)
                if chain is None:
                    make = self._factories.get(auth.kind) or _factory(auth.kind)
                    chain = self._made[auth] = make(auth)
        return await chain.authorize(target, request)

    async def aclose(self) -> None:
        made, self._made = self._made, {}
        for chain in made.values():
            await chain.aclose()
