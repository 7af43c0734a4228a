"""What one benchmark subprocess runs; passed to it as JSON on the command line."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

Kind = Literal["both", "sparkwatch", "public"]
KINDS: tuple[Kind, ...] = ("sparkwatch", "public")


@dataclass(frozen=True, slots=True)
class RunConfig:
    kind: Kind
    """Which listener(s) to register: ``both`` (timing side by side) or one of them alone."""
    queries: int
    seconds: float
    """How long the queries run once all have started."""
    result_path: str
    workdir: str
    """Checkpoints and Spark scratch space; the parent deletes it."""
    trigger_ms: int = 300
    rows_per_batch: int = 50
    drain_seconds: float = 30.0
    """How long to wait after the queries stop for Spark's listener queue to empty."""
    probe_e2e: bool = True
    """Measure sparkwatch's callback-to-/metrics latency (one probe in flight at a time)."""
    streams_capacity: int | None = None
    """``spark.scheduler.listenerbus.eventqueue.streams.capacity``; None keeps Spark's default."""
    history: bool = True
    """Both listeners also write the SQL history (SQLite in ``workdir``, the embedded default)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> RunConfig:
        return cls(**json.loads(raw))
