"""What every dialect provides: build a request, parse or classify a response."""

from __future__ import annotations

from typing import Protocol

from ..model import Failure, Request, Response, Target
from ..transport._types import HttpRequest, HttpResponse


class DialectAdapter(Protocol):
    """One wire dialect. The ONE place where a provider's format and errors are known."""

    name: str

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        """The HTTP request for ``request`` against ``target`` (model, URL, credential)."""
        ...

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        """A Response for an acceptable 200; a classified Failure for anything else.

        A 200 can be a Failure: truncation, refusal, content filter, a prompt block, or
        malformed tool-call arguments. Such a Failure keeps the Response and usage.
        """
        ...
