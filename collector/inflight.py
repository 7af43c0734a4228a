"""A bound on the ingest request bytes the collector holds at once (``max_inflight_body_bytes``).

A request at the body limit costs a few times its size while it is decoded, so N large requests
at once would cost N times that: each request reserves its bytes (the body, and what a gzip body
inflates to) before it is read and decoded, waits briefly when the bound is taken, and is answered
503 with Retry-After when no room frees up in time. Used from the event loop only.

While the ingest tokens name more than one tenant, one tenant holds at most half of the bound: a
request reserves its declared size before a byte of its body arrives, so two slow requests of one
tenant declaring the body limit would otherwise hold all of it, and every other tenant's push would
wait and get 503, for as long as those requests take to time out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager


class Busy(Exception):
    """No room for the request within the wait; nothing of it was accepted."""


class InflightBytes:
    def __init__(self, capacity: int, wait_seconds: float,
                 tenants: Callable[[], int] = lambda: 1) -> None:
        self.capacity = capacity
        self.wait_seconds = wait_seconds
        self.used = 0
        self._held: dict[str, int] = {}
        self._tenants = tenants
        """how many tenants the ingest tokens name now (they can be reloaded)"""
        self._changed = asyncio.Condition()

    def share(self) -> int:
        """What one tenant may hold: the whole bound, or half of it while tenants share it."""
        return self.capacity if self._tenants() <= 1 else max(1, self.capacity // 2)

    @asynccontextmanager
    async def reserve(self, n: int, tenant: str = "") -> AsyncIterator[Reservation]:
        """Hold ``n`` bytes (resizable) for ``tenant`` for the block; raises :class:`Busy`."""
        held = Reservation(self, tenant)
        await held.resize(n)
        try:
            yield held
        finally:
            await held.resize(0)

    async def _take(self, n: int, tenant: str) -> None:
        share = self.share()

        def room() -> bool:
            return self.used + n <= self.capacity and self._held.get(tenant, 0) + n <= share

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(room), self.wait_seconds)
            except TimeoutError:
                raise Busy(self._why_busy(n, tenant, share)) from None
            self.used += n
            self._held[tenant] = self._held.get(tenant, 0) + n

    def _why_busy(self, n: int, tenant: str, share: int) -> str:
        held = self._held.get(tenant, 0)
        if share < self.capacity and held + n > share:
            return (f"{held} bytes of this tenant's requests are being decoded; {n} more would "
                    f"exceed its share of max_inflight_body_bytes ({share} of {self.capacity}: "
                    "tenants share it)")
        # Not the bytes every tenant's requests hold: any ingest token's holder reads this.
        return (f"{n} more bytes would exceed max_inflight_body_bytes ({self.capacity}), "
                "taken by the requests being decoded; this tenant's requests hold "
                f"{held} bytes of it")

    async def _give(self, n: int, tenant: str) -> None:
        async with self._changed:
            self.used -= n
            left = self._held.pop(tenant, 0) - n
            if left:
                self._held[tenant] = left
            self._changed.notify_all()


class Reservation:
    def __init__(self, owner: InflightBytes, tenant: str) -> None:
        self._owner = owner
        self._tenant = tenant
        self.bytes = 0

    async def resize(self, n: int) -> None:
        """Hold ``n`` bytes instead: giving back is immediate, taking more may wait (Busy). At
        most the tenant's share: a request larger than it runs alone."""
        n = min(n, self._owner.share())
        if n > self.bytes:
            await self._owner._take(n - self.bytes, self._tenant)
        elif n < self.bytes:
            await self._owner._give(self.bytes - n, self._tenant)
        self.bytes = n
