"""A bound on the ingest request bytes the collector holds at once (``max_inflight_body_bytes``).

A request at the body limit costs a few times its size while it is decoded, so N large requests
at once would cost N times that: each request reserves its bytes (the body, and what a gzip body
inflates to) before it is read and decoded, waits briefly when the bound is taken, and is answered
503 with Retry-After when no room frees up in time. Used from the event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Busy(Exception):
    """No room for the request within the wait; nothing of it was accepted."""


class InflightBytes:
    def __init__(self, capacity: int, wait_seconds: float) -> None:
        self.capacity = capacity
        self.wait_seconds = wait_seconds
        self.used = 0
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def reserve(self, n: int) -> AsyncIterator[Reservation]:
        """Hold ``n`` bytes (resizable) for the block; raises :class:`Busy`."""
        held = Reservation(self)
        await held.resize(n)
        try:
            yield held
        finally:
            await held.resize(0)

    async def _take(self, n: int) -> None:
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.used + n <= self.capacity),
                    self.wait_seconds)
            except TimeoutError:
                raise Busy(f"{self.used} bytes of requests are being decoded; {n} more would "
                           f"exceed max_inflight_body_bytes ({self.capacity})") from None
            self.used += n

    async def _give(self, n: int) -> None:
        async with self._changed:
            self.used -= n
            self._changed.notify_all()


class Reservation:
    def __init__(self, owner: InflightBytes) -> None:
        self._owner = owner
        self.bytes = 0

    async def resize(self, n: int) -> None:
        """Hold ``n`` bytes instead: giving back is immediate, taking more may wait (Busy). At
        most the whole bound: a request larger than it runs alone."""
        n = min(n, self._owner.capacity)
        if n > self.bytes:
            await self._owner._take(n - self.bytes)
        elif n < self.bytes:
            await self._owner._give(self.bytes - n)
        self.bytes = n
