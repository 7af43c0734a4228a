"""Metric profiles: which catalogue families /metrics exports, and with which histogram buckets.

Hosted Prometheus bills by active series, so the exposition has a budget. ``default`` is what
the generated dashboards and alert rules read and nothing more, but for two named
:data:`EXTRAS` (about 57 series per query with 4 stateful operators); ``full`` is the whole
catalogue (about 340). On top of the profile, allow and deny lists of metric-name regexes (full
match, as kube-state-metrics' ``--metric-allowlist`` / ``--metric-denylist``) add families to it
and take families out of it; deny wins.

What the default leaves out, for the record: the RocksDB and HDFS provider metrics, the
per-instance and unknown ``customMetrics`` keys (keys sparkwatch has never seen flow under
``full`` only), the last-batch gauges, the phase histograms, and the source and sink detail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics import custom
from sparkwatch.metrics.catalogue import BATCH_DURATION_BUCKETS, PHASE_DURATION_BUCKETS, MetricDef
from sparkwatch.settings import METRICS_PROFILES

EXTRAS: tuple[tuple[MetricDef, str], ...] = (
    (cat.QUERY_BATCHES, "batches completed: how every consumer (tests, scripts, the e2e "
     "checks) sees a query advance; one series per query"),
    (cat.LISTENER_ERRORS, "the listener's own failures (its /metrics port taken, no listener "
     "registered): the one signal of an attach that half failed; per app, not per query"),
    (cat.QUERY_BATCH_ID, "`sparkwatch top`'s BATCH column: which batch a query is at"),
    (cat.QUERY_LAST_BATCH_DURATION, "`sparkwatch top`'s TIME column: the last batch's duration"),
)
"""Default families that no dashboard or rule reads, and why they are kept anyway."""

_DEFAULT: tuple[MetricDef, ...] = (
    # The listener's own health (per app, not per query): the overview's listener row and the
    # delivery alerts.
    cat.LISTENER_INFO,
    cat.LISTENER_EVENTS_RECEIVED,
    cat.LISTENER_EVENTS_DROPPED,
    cat.LISTENER_DELIVERY_FAILURES,
    cat.LISTENER_QUEUE_SIZE,
    cat.LISTENER_QUEUE_CAPACITY,
    cat.LISTENER_WORKER_LAST_PROGRESS,
    # Spark's own listener bus (per app and queue): the overview's bus panels and the
    # SparkListenerBusDroppingEvents alert.
    cat.LISTENER_BUS_EVENTS_DROPPED,
    cat.LISTENER_BUS_QUEUE_SIZE,
    cat.LISTENER_BUS_QUEUE_CAPACITY,
    # Query status, throughput and latency: 28 series per query (16 of them the histogram).
    cat.QUERY_INFO,
    # The trigger (kind and interval): the batch-duration alert compares real-time batches
    # with their own interval.
    cat.QUERY_TRIGGER_INFO,
    cat.QUERY_TRIGGER_INTERVAL,
    cat.QUERY_ACTIVE,
    cat.QUERY_IDLE,
    cat.QUERY_FAILED,
    cat.QUERY_STALLED,
    cat.QUERY_FAILURES,
    cat.QUERY_START_TIME,
    cat.QUERY_LAST_PROGRESS,
    cat.QUERY_LAST_EVENT,
    cat.QUERY_INPUT_ROWS,
    cat.QUERY_INPUT_RATE,
    cat.QUERY_PROCESSED_RATE,
    cat.QUERY_BATCH_DURATION,
    # Event time and watermark.
    cat.QUERY_WATERMARK,
    cat.QUERY_WATERMARK_LAG,
    cat.QUERY_EVENT_TIME_MAX,
    cat.QUERY_EVENT_TIME_LAG,
    cat.QUERY_EVENT_TIME_SKEW,
    # State: six series per operator.
    cat.STATE_OPERATOR_INFO,
    cat.STATE_ROWS,
    cat.STATE_MEMORY,
    cat.STATE_ROWS_UPDATED,
    cat.STATE_ROWS_REMOVED,
    cat.STATE_ROWS_DROPPED,
    # Sources: rows read, and the Kafka backlog (only Kafka sources report it).
    cat.SOURCE_INPUT_ROWS,
    cat.SOURCE_MAX_BEHIND,
    cat.SOURCE_AVG_BEHIND,
    *(extra for extra, _ in EXTRAS),
)

_FULL: tuple[MetricDef, ...] = tuple(cat.ALL)
assert custom.KNOWN  # the custom families are in cat.ALL once custom is imported

PROFILES: dict[str, frozenset[str]] = {
    "default": frozenset(m.name for m in _DEFAULT),
    "full": frozenset(m.name for m in _FULL),
}
assert tuple(PROFILES) == METRICS_PROFILES
BY_NAME: dict[str, MetricDef] = {m.name: m for m in cat.ALL}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


@dataclass(frozen=True, slots=True)
class Selection:
    """What one exposition exports: family names and the two histograms' bounds (seconds)."""

    names: frozenset[str]
    batch_buckets: tuple[float, ...] = BATCH_DURATION_BUCKETS
    phase_buckets: tuple[float, ...] = PHASE_DURATION_BUCKETS

    def exports(self, metric: MetricDef) -> bool:
        return metric.name in self.names

    @property
    def filter(self) -> frozenset[str] | None:
        """The names for :class:`~sparkwatch.metrics.exposition.Families`; None when every
        family is exported (nothing to check per sample)."""
        return None if self.names == PROFILES["full"] else self.names


FULL = Selection(PROFILES["full"])
"""Everything, with the catalogue's buckets: what code that names no selection gets."""


def select(
    profile: str = "default",
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
    batch_buckets: tuple[float, ...] | None = None,
    phase_buckets: tuple[float, ...] | None = None,
) -> Selection:
    """The profile's families, plus those an ``allow`` regex matches, minus those a ``deny``
    regex matches (regexes match the whole exposed name, e.g. ``spark_streaming_state_rocksdb_.*``).
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown metrics profile {profile!r} (known: {', '.join(PROFILES)})")
    names = set(PROFILES[profile]) | matching(allow)
    names -= matching(deny)
    return Selection(
        frozenset(names),
        batch_buckets if batch_buckets is not None else BATCH_DURATION_BUCKETS,
        phase_buckets if phase_buckets is not None else PHASE_DURATION_BUCKETS,
    )


def matching(patterns: Iterable[str]) -> set[str]:
    """Catalogue names some pattern matches in full."""
    compiled = [re.compile(p) for p in patterns]
    return {m.name for m in cat.ALL if any(c.fullmatch(m.name) for c in compiled)}


_REFERENCE = re.compile(r"spark_streaming_[a-z0-9_]+")


def family_of(series: str) -> str | None:
    """The catalogue family a series or recording-rule name stands for: a histogram's
    ``_bucket``/``_count``/``_sum``, or a counter named without ``_total`` (as a recording rule
    does, ``sparkwatch_operator:<counter without _total>:ratio_5m``); None when it is none."""
    if series in BY_NAME:
        return series
    for suffix in HISTOGRAM_SUFFIXES:
        base = series.removesuffix(suffix)
        if base != series and base in BY_NAME:
            return base
    if series + "_total" in BY_NAME:
        return series + "_total"
    return None


def families_in(text: str) -> set[str]:
    """Catalogue families a PromQL expression (or any text) reads, recording rules included."""
    out = set()
    for series in _REFERENCE.findall(text):
        family = family_of(series)
        if family is not None:
            out.add(family)
    return out


def fits(text: str, names: frozenset[str]) -> bool:
    """Every family ``text`` reads is exported."""
    return families_in(text) <= names


class _MetricsSettings(Protocol):
    """The five metric settings the listener's and the collector's settings both have."""

    @property
    def metrics_profile(self) -> str: ...
    @property
    def metrics_allow(self) -> tuple[str, ...] | None: ...
    @property
    def metrics_deny(self) -> tuple[str, ...] | None: ...
    @property
    def metrics_batch_buckets(self) -> tuple[float, ...] | None: ...
    @property
    def metrics_phase_buckets(self) -> tuple[float, ...] | None: ...


def from_settings(settings: _MetricsSettings) -> Selection:
    return select(
        settings.metrics_profile,
        settings.metrics_allow or (),
        settings.metrics_deny or (),
        settings.metrics_batch_buckets,
        settings.metrics_phase_buckets,
    )
