"""Rate quotas per tenant: events and request bytes per second, as token buckets.

A bucket holds ``burst_seconds`` of its rate; a request takes its cost from its tenant's buckets or
is refused whole (429) with the seconds after which the same request would fit (Retry-After).
A request costing more than a full bucket is let through when the bucket is full, so any
request within the body limits can eventually be sent.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class Bucket:
    rate: float
    capacity: float
    level: float
    at: float

    def take(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` fits (0: taken now)."""
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now
        cost = min(cost, self.capacity)
        if self.level >= cost:
            self.level -= cost
            return 0.0
        return (cost - self.level) / self.rate


class RateLimited(Exception):
    """Over a rate quota: nothing of the request was accepted; send it again after
    ``retry_after`` seconds."""

    status = 429

    def __init__(self, quota: str, tenant: str, retry_after: float) -> None:
        self.quota = quota
        self.tenant = tenant
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(f"tenant {tenant!r} is over its rate quota ({quota}): send again in "
                         f"{self.retry_after} s")


class Rates:
    """The buckets of every tenant, for one quota (e.g. ``max_events_per_second``)."""

    def __init__(self, quota: str, per_second: float, burst_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.quota = quota
        self._rate = per_second
        self._capacity = per_second * burst_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, Bucket] = {}

    def take(self, tenant: str, cost: float) -> None:
        """Take ``cost`` from ``tenant``'s bucket, or raise :class:`RateLimited`."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(tenant)
            if bucket is None:
                bucket = self._buckets[tenant] = Bucket(self._rate, self._capacity,
                                                        self._capacity, now)
            wait = bucket.take(cost, now)
        if wait > 0:
            raise RateLimited(self.quota, tenant, wait)
