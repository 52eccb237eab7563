"""Fixtures for the gateway tests that talk to ONE real uvicorn server per module
(test_sdk.py with the openai SDK, test_messages.py with the anthropic SDK).

``served`` is module-scoped: starting a server per test costs more than the tests. ``kit``
hands each test that module's kit, reset (see :meth:`Kit.reset`). A module that builds its
own ``Kit()`` per test simply does not ask for these fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._kit import Kit, ServerThread


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Kit, ServerThread]]:
    kit = Kit()
    with ServerThread(kit.app) as server:
        yield kit, server


@pytest.fixture
def kit(served: tuple[Kit, ServerThread]) -> Kit:
    return served[0].reset()
