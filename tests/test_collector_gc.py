"""The collector process collects garbage less often than CPython's default (docs/benchmarks.md)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sparkwatch.collector.gctune import OLDER_THRESHOLDS, YOUNG_THRESHOLD, tune_gc, tune_malloc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()


def test_tuning_raises_the_young_threshold_and_freezes_startup_objects(restored_gc: None) -> None:
    survivor = [object()]
    tune_gc()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    assert gc.get_freeze_count() > 0
    assert YOUNG_THRESHOLD > 700 and gc.isenabled()  # cycles are still collected
    assert survivor


def test_the_allocator_is_tuned_for_large_requests_on_glibc() -> None:
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's allocator only")
    assert tune_malloc() is True
