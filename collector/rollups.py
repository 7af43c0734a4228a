"""The collector's rollups job: :func:`sparkwatch.history.rollups.recompute`, run once per slot
across replicas by :mod:`.leases` (the listener's history sink runs the same computation when
there is no collector)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from sparkwatch.history.rollups import recompute


@dataclass(frozen=True, slots=True)
class Rollups:
    lookback_seconds: float

    def __call__(self, conn: sa.Connection, now: datetime) -> int:
        """Recompute the buckets overlapping [now - lookback, now); returns rows upserted."""
        return recompute(conn, now, self.lookback_seconds)
