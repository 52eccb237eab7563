from __future__ import annotations

import math

import pytest

from failover.model._money import usd


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (1e-10, "$0.0000000001"),
        (1.234e-7, "$0.000000123"),
        (0.000012, "$0.000012"),
        (0.0123456, "$0.0123"),
        (0.5, "$0.50"),
        (2.5, "$2.50"),
        (1234.5678, "$1234.57"),
        (0.0, "$0.00"),
        (0.00999999, "$0.01"),
        (-0.0004, "$-0.0004"),
        (math.inf, "$inf"),
    ],
)
def test_small_amounts_keep_their_significant_digits(amount: float, text: str) -> None:
    assert usd(amount) == text
