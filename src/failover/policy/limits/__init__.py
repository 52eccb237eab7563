"""Client-side rate limits: a limiter per provider quota, its buckets and queue, capacity planning.

``_limiter`` holds the board and the limiter; ``_buckets`` the arithmetic per rate dimension,
``_waiters`` the queue in front, ``_calibration`` what the provider's headers say, ``_shared``
a quota's buckets kept in a store for the fleet; ``_capacity`` plans a peak against the limits.
"""

from ._buckets import WindowBucket
from ._capacity import CapacityReport, plan_capacity, render
from ._limiter import LimiterBoard, LimitWaitTooLong, Reservation, TargetLimiter
from ._shared import SharedBuckets

__all__ = [
    "CapacityReport",
    "LimitWaitTooLong",
    "LimiterBoard",
    "Reservation",
    "SharedBuckets",
    "TargetLimiter",
    "WindowBucket",
    "plan_capacity",
    "render",
]
