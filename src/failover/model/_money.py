"""USD amounts as people read them.

Per-request costs are tiny (a 1,000-token call to a cheap model costs $0.0001), so a fixed
number of decimals prints a cap of $1e-10 as "$0.000000" and makes "cost $0.000000 exceeds
max_cost $0.000000" unreadable. Three significant digits, and at least cents:

>>> usd(1e-10), usd(0.000012), usd(0.0123456), usd(2.5), usd(1234.5), usd(0)
('$0.0000000001', '$0.000012', '$0.0123', '$2.50', '$1234.50', '$0.00')
"""

from __future__ import annotations

import math


def usd(amount: float) -> str:
    """``amount`` with three significant digits (at least two decimals, no trailing zeros
    beyond them, never in scientific notation)."""
    if not math.isfinite(amount):
        return f"${amount}"
    if amount == 0:
        return "$0.00"
    decimals = max(2, 2 - math.floor(math.log10(abs(amount))))
    text = f"{amount:.{decimals}f}"
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    return f"${whole}.{frac}"
