"""``failover`` with the balancer switched off, for ``callgrind.py --off``: the plan gets no
balancer (the primary tier is ranked as before there was one) and the load board keeps no
books (requests in flight, latency, quota headers). Then the command line runs as usual.

    python bench/gateway_support/no_balancer.py serve --config failover.yaml
"""

from __future__ import annotations

import sys

from failover.cli import main
from failover.policy import LoadBoard
from failover.router import _generate


def _none(*args: object, **kwargs: object) -> None:
    """A plain function (a Mock would add its own bookkeeping to the instruction counts)."""


_generate.balancer = _none  # type: ignore[assignment]
LoadBoard.started = _none  # type: ignore[method-assign]
LoadBoard.ended = _none  # type: ignore[method-assign]
LoadBoard.observe = _none  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv[0] = "failover"
    sys.exit(main())
