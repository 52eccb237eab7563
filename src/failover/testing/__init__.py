"""The fault-injection kit: scripted fake LLM providers that speak the real wire dialects.

Test your own code (or a failover Router) against providers that rate-limit, hang, reset
connections, refuse, truncate or answer with broken tool arguments, exactly when you say so::

    from failover.testing import FakeNetwork, FakeProvider, Reply, Script

    a = FakeProvider("a", "openai", [Reply.rate_limit(retry_after=2), Reply.ok("hi")])
    b = FakeProvider("b", "anthropic", Script.always("overloaded"))
    net = FakeNetwork(a, b)                 # in-process Transport: a.base_url == "http://a.fake/v1"

    async with FakeServer(a, b) as srv:     # or real HTTP on loopback, for any client or SDK
        client = openai.AsyncOpenAI(base_url=srv.base_url_for(a), api_key="sk-test")

Scenarios are data (``Scenario.from_dict`` reads the mapping a YAML file holds), every
request is recorded (``provider.calls``) with loop-clock times and redacted credentials.
See docs/testing.md.
"""

from ._provider import FakeNetwork, FakeProvider, ReceivedCall
from ._script import FakeToolCall, Outcome, ProviderPlan, Reply, ReplyKind, Scenario, Script
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
]
