"""Garbage-collector settings for the collector process.

Ingest allocates a few hundred short-lived, acyclic objects per progress event (decoded JSON,
parsed records, rows), all freed by reference counting. With CPython's default threshold a
young-generation collection runs every ~2 events, and the older generations are re-scanned
while the collector holds its large, long-lived metric state: ~20 % of ingest CPU in
``python -m bench ingest`` (docs/benchmarks.md, "Collector ingest"). Objects alive at startup are
moved out of the collector's sight, and collections run less often; cycles are still collected.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
"""Allocations between young-generation collections (CPython's default: 700)."""
OLDER_THRESHOLDS = (20, 10)


def tune_gc() -> None:
    """Call once the service is built, before it serves."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
