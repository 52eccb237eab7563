"""Identifiers for requests, responses and completions."""

from __future__ import annotations

import random


def new_id(prefix: str) -> str:
    """``prefix`` and 24 random hex digits (96 bits): unique, not secret.

    From ``random``'s generator rather than ``os.urandom``: no system call per id (a gateway
    makes two or three per request), and Python seeds it again in a forked child, so worker
    processes never share a sequence. Nothing relies on these ids being unguessable.
    """
    return f"{prefix}{random.getrandbits(96):024x}"
