"""Garbage-collector and allocator settings for the collector process (and its history writer).

Ingest allocates a few hundred short-lived, acyclic objects per progress event (decoded JSON,
parsed records, rows), all freed by reference counting. With CPython's default threshold a
young-generation collection runs every ~2 events, and the older generations are re-scanned
while the collector holds its large, long-lived metric state: ~20 % of ingest CPU in
``python -m bench ingest`` (docs/benchmarks.md, "Collector ingest"). Objects alive at startup are
moved out of the collector's sight, and collections run less often; cycles are still collected.
"""

from __future__ import annotations

import ctypes
import gc
import sys

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 1 << 20
"""Allocations from this size get pages of their own, returned to the system when freed."""
ARENA_MAX = 2
YOUNG_THRESHOLD = 50_000
"""Allocations between young-generation collections (CPython's default: 700)."""
OLDER_THRESHOLDS = (20, 10)


def tune_gc() -> None:
    """Call once the service is built, before it serves."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    tune_malloc()


def tune_malloc() -> bool:
    """glibc's allocator, for requests of many MiB (bodies, their inflated and decoded forms):
    a fixed mmap threshold (by default it rises to the largest block freed, up to 32 MiB, after
    which freed bodies stay in the heap), and two arenas (each thread decoding a request would
    otherwise keep an arena of its own, fragmented). ``python -m bench memory``: eight requests
    of 16 MiB at once peaked at +148 MiB over idle without, +96 MiB with. False where it does not
    apply (not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and others: their own allocator, left alone
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX,
                                                                             ARENA_MAX))


def release_memory() -> bool:
    """Give the allocator's free pages back to the system (glibc ``malloc_trim``): after a burst
    of large writes the history writer would otherwise keep its last batches' working set (about
    40 MiB for 1,000-event batches of 7 KB events, ``python -m bench memory``) for as long as it
    runs. Cheap (a few ms); called only when the writer has caught up. False where it does not
    apply (not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    return bool(malloc_trim(0))
