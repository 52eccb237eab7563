"""``RouteRecord.model_used``: the model of the target that answered, which the gateway and the
SDK drop-in name as an answer's ``model`` (the route stays ``RouteRecord.route``)."""

from __future__ import annotations

import pytest

from failover import Envelope, Request, Unavailable
from failover.model import Completed
from failover.testing import FakeProvider, Reply, Script

from ._kit import ALL, C, router, target

pytestmark = pytest.mark.looptime


def _pair(a_script: Script) -> tuple[FakeProvider, FakeProvider]:
    return (
        FakeProvider("a", "openai", a_script, model="model-a"),
        FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")), model="model-b"),
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_model_used_is_the_fallbacks_model_after_a_503(stream: bool) -> None:
    a, b = _pair(Script.always(Reply.overloaded()))
    caps = ALL | {C.STREAMING}
    r = router([target(a, caps=caps)], [target(b, caps=caps)], a, b)
    if stream:
        async with r.stream("r", Request.simple("hi"), Envelope(budget=10)) as s:
            events = [e async for e in s]
        assert s.model == "model-b"  # the model whose output the caller was shown
        done = events[-1]
        assert isinstance(done, Completed)
        record = done.response.record
    else:
        record = (await r.complete("r", Request.simple("hi"), Envelope(budget=10))).record
    assert record is not None
    assert (record.route, record.target_used, record.model_used) == ("r", "b", "model-b")
    assert record.to_dict()["model_used"] == "model-b"


async def test_model_used_is_the_primarys_model_on_a_direct_answer() -> None:
    a, b = _pair(Script.always(Reply.ok("from a")))
    r = router([target(a)], [target(b)], a, b)
    record = (await r.complete("r", Request.simple("hi"), Envelope(budget=10))).record
    assert record is not None and (record.target_used, record.model_used) == ("a", "model-a")


async def test_no_answer_has_no_model_used() -> None:
    a, b = _pair(Script.always(Reply.server_error()))
    r = router([target(a)], [], a, b)
    with pytest.raises(Unavailable) as info:
        await r.complete("r", Request.simple("hi"), Envelope(budget=10))
    assert info.value.record.model_used is None and info.value.record.target_used is None
