"""The fault-injection kit: scripted fake LLM providers that speak the real wire dialects.

Test your own code (or a failover Router) against providers that rate-limit, hang, reset
connections, refuse, truncate or answer with broken tool arguments, exactly when you say so::

    from failover.testing import FakeNetwork, FakeProvider, Reply, Script

    a = FakeProvider("a", "openai", [Reply.rate_limit(retry_after=2), Reply.ok("hi")])
    b = FakeProvider("b", "anthropic", Script.always("overloaded"))
    net = FakeNetwork(a, b)                 # in-process Transport: a.base_url == "http://a.fake/v1"

    async with FakeServer(a, b) as srv:     # or real HTTP on loopback, for any client or SDK
        client = openai.AsyncOpenAI(base_url=srv.base_url_for(a), api_key="sk-test")

Streams are delivered over time on the loop clock, and fail exactly when scripted::

    c = FakeProvider("c", "anthropic", [Reply.ok("hi there", chunk_interval=0.05), "stall_after(3, 10)",
                                        Reply.drop_after(2), "error_event_after(4)", "heartbeats_only(1)"])
    async with net.stream(request, connect_timeout=1) as resp:     # FakeNetwork is a StreamingTransport
        async for chunk in resp.aiter_bytes(): ...

Scenarios are data (``Scenario.from_dict`` reads the mapping a YAML file holds), every
request is recorded (``provider.calls``) with loop-clock times, redacted credentials and,
for streams, the number of events delivered. Fake Bedrock and Vertex AI targets need no cloud
account: ``Router(..., auth=fake_authorizers())`` signs and authorises with fixed test
credentials. See docs/testing.md.
"""

from ._auth import FAKE_AWS_KEY_ID, FAKE_AWS_SECRET, FAKE_TOKEN, fake_authorizers
from ._kinds import ReplyKind
from ._network import FakeNetwork
from ._provider import FakeProvider
from ._records import Outcome, ReceivedCall
from ._reply import FakeToolCall, Reply
from ._scenario import ProviderPlan, Scenario
from ._script import Script
from ._server import FakeServer

__all__ = [
    # scenario data
    "Reply",
    "ReplyKind",
    "FakeToolCall",
    "Script",
    "Scenario",
    "ProviderPlan",
    # fakes
    "FakeProvider",
    "FakeNetwork",
    "FakeServer",
    # records
    "ReceivedCall",
    "Outcome",
    # cloud credentials for fake Bedrock, Vertex AI and Entra targets
    "fake_authorizers",
    "FAKE_AWS_KEY_ID",
    "FAKE_AWS_SECRET",
    "FAKE_TOKEN",
]
