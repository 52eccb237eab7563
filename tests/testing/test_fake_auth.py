"""fake_authorizers: fake cloud targets with no cloud account, with or without botocore."""

from __future__ import annotations

import sys

import pytest

from failover import Message, Request, Route, Router, Unavailable
from failover.model import Vertex
from failover.testing import (
    FAKE_AWS_KEY_ID,
    FAKE_AWS_SECRET,
    FAKE_TOKEN,
    FakeNetwork,
    FakeProvider,
    fake_authorizers,
)

REQUEST = Request(messages=(Message.user("hi"),), max_tokens=20)


async def _ask(provider: FakeProvider, **target: object) -> str:
    net = FakeNetwork(provider)
    async with Router(
        [Route(name="r", primary=(provider.target(**target),))], transport=net, auth=fake_authorizers()
    ) as router:
        return (await router.complete("r", REQUEST)).text


async def test_bedrock_requests_are_signed_so_the_fake_verifies_them() -> None:
    bedrock = FakeProvider("bedrock", "bedrock", api_key=FAKE_AWS_KEY_ID, secret_key=FAKE_AWS_SECRET)
    assert await _ask(bedrock)
    assert bedrock.calls[0].scripted  # the signature was recomputed and accepted
    assert bedrock.calls[0].headers["authorization"] == "***"  # recorded redacted


async def test_without_botocore_the_header_still_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("botocore.auth", "botocore.awsrequest", "botocore.credentials"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if botocore were not installed
    bedrock = FakeProvider("bedrock", "bedrock", api_key=FAKE_AWS_KEY_ID)
    assert await _ask(bedrock)
    assert bedrock.calls[0].scripted  # the fake read the key id out of the header and took it
    other = FakeProvider("bedrock", "bedrock", api_key="AKIASOMEONEELSE00000")
    with pytest.raises(Unavailable, match=r"UnrecognizedClientException|security token"):
        await _ask(other)


async def test_vertex_requests_carry_the_fixed_token_and_no_key() -> None:
    vertex = FakeProvider("vertex", "anthropic", api_key=FAKE_TOKEN)
    assert await _ask(vertex, api_key=None, vertex=Vertex(project="p", location="us-east5"))
    assert vertex.calls[0].scripted and "x-api-key" not in vertex.calls[0].headers
