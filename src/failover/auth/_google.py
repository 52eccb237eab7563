"""Google credentials for Vertex AI: an OAuth access token from google-auth, as a bearer header.

Where the credentials come from is google-auth's: a file named by ``auth.credentials_file``
(a service account's JSON key, or an authorized-user file), else application default
credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth application-default login``,
the metadata server of a Google Cloud VM, workload identity federation).
The scope is ``auth.scope`` or ``https://www.googleapis.com/auth/cloud-platform``.

google-auth is blocking (it loads files, may probe the metadata server, and posts to the
token endpoint), so loading and refreshing run in a worker thread, each call to the token
endpoint bounded by :data:`REFRESH_TIMEOUT`. The token is kept by a
:class:`~failover.auth._token.TokenCache`: refreshed five minutes before it expires (or
halfway through a shorter life), one refresh at a time, the old token kept if an early
refresh fails. The token is never logged and never in a repr or an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import google.auth
import google.auth.exceptions
import google.auth.transport.requests
import google.oauth2.credentials
import google.oauth2.service_account

from ..model import Auth, Target
from ..transport import HttpRequest
from . import AuthError
from ._token import MARGIN, Token, TokenCache

__all__ = ["SCOPE", "GoogleAuthorizer", "authorizer"]

logger = logging.getLogger("failover.auth")

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
REFRESH_TIMEOUT = 30.0  # seconds one HTTP call to the token endpoint may take (google-auth's: 120)

_FIX = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, run "
    "`gcloud auth application-default login`, or set auth.credentials_file on the target"
)


class _BoundedRequest(google.auth.transport.requests.Request):
    """google-auth's requests transport, with each call to the token endpoint bounded."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self._bound = timeout

    def __call__(
        self, url: Any, method: Any = "GET", body: Any = None, headers: Any = None, timeout: Any = None, **kwargs: Any
    ) -> Any:
        bound = self._bound if not isinstance(timeout, int | float) else min(timeout, self._bound)
        call: Any = super().__call__  # untyped in google-auth
        return call(url, method=method, body=body, headers=headers, timeout=bound, **kwargs)


class GoogleAuthorizer:
    """Adds ``Authorization: Bearer <token>`` from google-auth credentials to each request.

    ``load`` makes the credentials (blocking; called once, in a worker thread). ``clock``
    answers unix seconds, the clock google-auth's ``expiry`` (naive UTC) is read on.
    """

    def __init__(
        self,
        load: Callable[[], Any],
        *,
        source: str,
        margin: float = MARGIN,
        clock: Callable[[], float] = time.time,
        refresh_timeout: float = REFRESH_TIMEOUT,
    ) -> None:
        self._load = load
        self._source = source  # where the credentials come from, for messages (never a secret)
        self._request = _BoundedRequest(refresh_timeout)
        self._credentials: Any = None
        self.tokens = TokenCache(self._fetch, clock=clock, margin=margin)

    def __repr__(self) -> str:
        return f"GoogleAuthorizer({self._source}, refreshes={self.tokens.fetches})"

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        del target  # one chain serves every target that names it
        token = await self.tokens.get()
        headers = dict(request.headers)
        # apply() writes the bearer header, and x-goog-user-project when the credentials bill
        # another project (user credentials with a quota project).
        self._credentials.apply(headers, token=token)
        return replace(request, headers=headers)

    async def aclose(self) -> None:
        await self.tokens.aclose()
        self._request.session.close()

    async def _fetch(self) -> Token:
        return await asyncio.to_thread(self._refresh)

    def _refresh(self) -> Token:
        """Load the credentials (first time) and get a new token: blocking, in a worker thread."""
        if self._credentials is None:
            self._credentials = self._load()
        creds = self._credentials
        try:
            creds.refresh(self._request)
        except google.auth.exceptions.RefreshError as exc:
            raise AuthError(f"google credentials ({self._source}) could not be refreshed: {_short(exc)}") from None
        except google.auth.exceptions.TransportError as exc:
            raise AuthError(
                f"google credentials ({self._source}): the token endpoint could not be reached: {_short(exc)}"
            ) from None
        except (google.auth.exceptions.GoogleAuthError, ValueError) as exc:  # e.g. a malformed key
            raise AuthError(f"google credentials ({self._source}) are not usable: {_short(exc)}; {_FIX}") from None
        expiry: datetime | None = creds.expiry
        expires_at = None if expiry is None else expiry.replace(tzinfo=UTC).timestamp()
        logger.debug("google credentials (%s): new access token, expires %s", self._source, expiry)
        return Token(value=str(creds.token or ""), expires_at=expires_at, obtained_at=self.tokens.clock())


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def _from_file(path: str, scopes: list[str]) -> Any:
    """Credentials from a service account key or an authorized-user file, each read by its own
    google-auth loader (google-auth deprecates the generic loader: a configuration file of
    another type, such as external_account, can make it run commands or fetch URLs)."""

    def refuse(why: str) -> AuthError:
        return AuthError(
            f"google credentials: cannot use auth.credentials_file {path}: {why}; point it at a service "
            "account's JSON key file, or remove it to use application default credentials"
        )

    try:
        info = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise refuse(exc.strerror or type(exc).__name__) from None
    except ValueError:
        raise refuse("it is not JSON") from None
    kind = info.get("type") if isinstance(info, dict) else None
    try:
        load: Any = None  # google-auth's loaders are untyped
        if kind == "service_account":
            load = google.oauth2.service_account.Credentials.from_service_account_info
        elif kind == "authorized_user":
            load = google.oauth2.credentials.Credentials.from_authorized_user_info
        if load is not None:
            return load(info, scopes=scopes)
    except (ValueError, google.auth.exceptions.GoogleAuthError) as exc:
        raise refuse(_short(exc)) from None
    raise refuse(
        f"its type is {kind!r}, not service_account or authorized_user (for workload identity federation, "
        "set GOOGLE_APPLICATION_CREDENTIALS to the configuration instead)"
    )


def _default(scopes: list[str]) -> Any:
    try:
        credentials, _ = google.auth.default(scopes=scopes)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise AuthError(
            f"google credentials: no usable application default credentials ({_short(exc)}); {_FIX}"
        ) from None
    return credentials


def authorizer(auth: Auth, *, clock: Callable[[], float] = time.time, margin: float = MARGIN) -> GoogleAuthorizer:
    """The chain for ``auth``: ``auth.credentials_file`` or application default credentials."""
    scopes = [auth.scope or SCOPE]
    path = auth.credentials_file
    if path:
        return GoogleAuthorizer(lambda: _from_file(path, scopes), source=f"file {path}", clock=clock, margin=margin)
    return GoogleAuthorizer(lambda: _default(scopes), source="application default", clock=clock, margin=margin)
