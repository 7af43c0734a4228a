"""Metric families kept as rows of label values, rendered straight to the text format.

prometheus_client turns every sample into a ``Sample`` with its own label dict, then sorts,
validates and escapes each label of each sample again while rendering. With thousands of queries
/metrics holds hundreds of thousands of samples that all share a few label sets, and that
per-sample work was most of a scrape's time and memory (see docs/benchmarks.md, "Scrape").
A :class:`RowFamily` keeps ``(label values, value)`` rows instead and renders each family from one
line template; :func:`generate` yields exactly the bytes of ``generate_latest`` (the tests
compare them), one family at a time. Its ``samples`` are still built on demand, so any other
prometheus_client consumer (``generate_latest``, ``get_sample_value``) sees an ordinary family.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

log = logging.getLogger(__name__)

LABEL_VALUE_MAX_CHARS = 256
"""Longer label values are cut (ending in an ellipsis): a series is never megabytes."""
DROPPED_FAMILY = "sparkwatch_exposition_series_dropped_total"
PIECE_LINES = 4096
"""Lines rendered and sent at a time (~1 MB)."""
Labels = Sequence[str]
Buckets = Sequence[tuple[str, float]]
_PLAIN = 1_000_000
"""Below this magnitude a number renders as Python's repr of its float (Go's exponent form
starts at 1e6 for positive values)."""


def go_float(value: Any) -> str:
    """``floatToGoString``, without its float round trip for plain ints and floats."""
    kind = type(value)
    if kind is int and -_PLAIN < value < _PLAIN:
        return f"{value}.0"
    if kind is float and -_PLAIN < value < _PLAIN:  # NaN compares false: not taken
        return repr(value)
    return str(floatToGoString(value))


def escape(value: str) -> str:
    """A label value as generate_latest escapes it (backslash, newline, double quote), cut to
    :data:`LABEL_VALUE_MAX_CHARS`."""
    if len(value) > LABEL_VALUE_MAX_CHARS:
        value = value[: LABEL_VALUE_MAX_CHARS - 1] + "\u2026"
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


class KeptLabels:
    """Label sets rendered by the last two scrapes, by content: a fleet's label sets hardly change
    between scrapes, so each is escaped and joined once, not once per scrape. Two generations
    bound it: what the scrape before last did not use again is forgotten."""

    def __init__(self) -> None:
        self._now: dict[tuple[Any, ...], Any] = {}
        self._before: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...]) -> Any:
        hit = self._now.get(key)
        if hit is None:
            hit = self._before.get(key)
            if hit is not None:
                self._now[key] = hit
        return hit

    def put(self, key: tuple[Any, ...], value: Any) -> None:
        self._now[key] = value

    def turn(self) -> None:
        """A new scrape begins. Concurrent scrapes may turn twice: that only costs renders."""
        self._before, self._now = self._now, {}


KEPT = KeptLabels()
"""The process's label sets, shared by every registry it renders (same content, same text)."""


class Bodies:
    """Rendered label sets (``a="x",b="y"``) of one scrape. A query's or operator's label values
    are one tuple passed to every family with the same label names, so each set is sorted and
    escaped once per scrape instead of once per sample (and once in two scrapes with ``kept``).
    Holds the tuples it has seen (their ids are keys), so use one per scrape."""

    def __init__(self, kept: KeptLabels | None = None) -> None:
        self._kept = kept
        self._plain: dict[tuple[int, int], tuple[Labels, Labels, str]] = {}
        self._around_le: dict[tuple[int, int], tuple[Labels, Labels, str, str]] = {}
        self._pairs: dict[tuple[str, str], str] = {}
        """``name="value"`` by (name, value): an app's or a query's values recur in every label
        set of its queries, operators and info series."""
        self.capped = False
        """Some label value was cut: two series may now render the same (see _unique)."""

    def plain(self, names: Labels, values: Labels) -> str:
        hit = self._plain.get((id(names), id(values)))
        if hit is None:
            body = self._rendered(("", names, values), names, values)[0]
            hit = self._plain[(id(names), id(values))] = (names, values, body)
        return hit[2]

    def _rendered(self, key: tuple[Any, ...], names: Labels, values: Labels) -> tuple[str, ...]:
        """``key``'s text: (body,) for a plain set, (before, after) around ``le``."""
        kept = self._kept.get(key) if self._kept is not None else None
        if kept is None:
            capped = bool(values) and max(map(len, values)) > LABEL_VALUE_MAX_CHARS
            pairs = _pairs(names, values, self._pairs)
            text: tuple[str, ...]
            if key[0]:
                k = sum(1 for name in dict(zip(names, values, strict=False)) if name < "le")
                text = ("".join(p + "," for p in pairs[:k]), "".join("," + p for p in pairs[k:]))
            else:
                text = (",".join(pairs),)
            kept = (capped, text)
            if self._kept is not None:
                self._kept.put(key, kept)
        if kept[0]:
            self.capped = True
        return kept[1]  # type: ignore[no-any-return]

    def around_le(self, names: Labels, values: Labels) -> tuple[str, str]:
        """The pairs before and after the ``le`` pair (both with their commas)."""
        hit = self._around_le.get((id(names), id(values)))
        if hit is None:
            before, after = self._rendered(("le", names, values), names, values)
            hit = self._around_le[(id(names), id(values))] = (names, values, before, after)
        return hit[2], hit[3]


def _pairs(names: Labels, values: Labels, seen: dict[tuple[str, str], str]) -> list[str]:
    # As prometheus_client: dict(zip(...)) (fewer values: fewer labels), sorted by name.
    labels = dict(zip(names, values, strict=False))
    out = []
    for item in sorted(labels.items()):
        pair = seen.get(item)
        if pair is None:
            pair = seen[item] = f'{_label_name(item[0])}="{escape(item[1])}"'
        out.append(pair)
    return out


_LABEL_NAMES: dict[str, str] = {}


def _label_name(name: str) -> str:
    escaped = _LABEL_NAMES.get(name)
    if escaped is None:
        escaped = _LABEL_NAMES[name] = escape_label_name(name)
    return escaped


class RowFamily(Metric):
    """One family of a custom collector: rows now, samples or text when asked."""

    _samples: list[Sample] | None

    def __init__(self, family: Metric, label_names: Sequence[str]) -> None:
        super().__init__(family.name, family.documentation, family.type)
        self._empty = family
        self._label_names = tuple(label_names)
        self.rows: list[tuple[Labels, float]] = []
        self.histograms: list[tuple[Labels, Buckets, float]] = []

    @property
    def label_names(self) -> tuple[str, ...]:
        """The names of the values in each row (scope labels first, then the family's)."""
        return self._label_names

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        if self._samples is None:
            self._samples = self._build_samples()
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value or None

    def add(self, labels: Labels, value: float) -> None:
        self.rows.append((labels, value))
        self._samples = None

    def add_histogram(self, labels: Labels, buckets: Buckets, total: float) -> None:
        self.histograms.append((labels, buckets, total))
        self._samples = None

    def _build_samples(self) -> list[Sample]:
        family = _copy_empty(self._empty, self._label_names)
        for labels, value in self.rows:
            if self.type == "info":
                family.add_metric(list(labels), {})  # type: ignore[attr-defined]
            else:
                family.add_metric(list(labels), value)  # type: ignore[attr-defined]
        for labels, buckets, total in self.histograms:
            family.add_metric(list(labels), buckets, total)  # type: ignore[attr-defined]
        return list(family.samples)

    def text(self, bodies: Bodies | None = None) -> str:
        """The family as generate_latest renders it."""
        return "".join(self.pieces(bodies or Bodies()))

    def pieces(self, bodies: Bodies) -> Iterator[str]:
        """:meth:`text` in pieces of at most :data:`PIECE_LINES` lines: a family of many queries
        is megabytes, never built whole."""
        if self.histograms and "le" in self._label_names:  # collides with the bucket label
            yield str(generate_latest(_Fixed(self)).decode())
            return
        yield generate_latest(_Fixed(_copy_empty(self._empty, self._label_names))).decode()
        seen: set[str] = set()
        for start in range(0, len(self.rows), PIECE_LINES):
            lines = self._row_lines(bodies, self.rows[start:start + PIECE_LINES])
            yield "".join(_unique(lines, seen) if bodies.capped else lines)
        per_piece = max(1, PIECE_LINES // 16)  # a histogram is a dozen lines or so
        for start in range(0, len(self.histograms), per_piece):
            yield "".join(self._histogram_lines(bodies,
                                                self.histograms[start:start + per_piece]))

    def _row_lines(self, bodies: Bodies, rows: list[tuple[Labels, float]]) -> list[str]:
        suffix = {"counter": "_total", "info": "_info"}.get(self.type, "")
        name, names, body = escape_metric_name(self.name + suffix), self._label_names, bodies.plain
        info = self.type == "info"  # InfoMetricFamily's samples are worth 1
        # The hot loop of a scrape: one f-string per sample, no call but the two lookups.
        return [
            f"{name}{{{b}}} {go_float(1 if info else value)}\n"
            if (b := body(names, labels)) else f"{name} {go_float(1 if info else value)}\n"
            for labels, value in rows
        ]

    def _histogram_lines(self, bodies: Bodies,
                         histograms: list[tuple[Labels, Buckets, float]]) -> list[str]:
        names = self._label_names
        bucket, count, sum_ = (escape_metric_name(self.name + suffix)
                               for suffix in ("_bucket", "_count", "_sum"))
        out, les = [], _LE_PAIRS
        for labels, buckets, total in histograms:
            before, after = bodies.around_le(names, labels)
            for le, n in buckets:
                pair = les.get(le)
                if pair is None:
                    pair = les[le] = f'le="{escape(le)}"'
                out.append(f"{bucket}{{{before}{pair}{after}}} {go_float(n)}\n")
            # HistogramMetricFamily's rule: no _count/_sum with negative buckets.
            if float(buckets[0][0]) >= 0 and total is not None:
                body = bodies.plain(names, labels)
                out.append(_line(count, body, buckets[-1][1]))
                out.append(_line(sum_, body, total))
        return out


_LE_PAIRS: dict[str, str] = {}
"""``le="..."`` by bound: a few bounds, rendered for every histogram of every scrape."""


def _unique(lines: list[str], seen: set[str]) -> list[str]:
    """Lines whose series was not rendered before in this family: cut label values can make two
    series one, which the text format forbids. The later ones are left out and counted."""
    out = []
    for line in lines:
        series = line.rsplit(" ", 1)[0]
        if series in seen:
            DROPPED.add(1)
            continue
        seen.add(series)
        out.append(line)
    return out


def _line(name: str, body: str, value: Any) -> str:
    if body:
        return f"{name}{{{body}}} {go_float(value)}\n"
    return f"{name} {go_float(value)}\n"


def _copy_empty(family: Metric, label_names: Sequence[str]) -> Metric:
    kind = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily,
            "histogram": HistogramMetricFamily, "info": InfoMetricFamily}[family.type]
    return kind(family.name, family.documentation, labels=label_names)


class _Fixed(Collector):
    def __init__(self, *metrics: Metric) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics


def generate(registry: Collector) -> Iterator[bytes]:
    """``generate_latest(registry)``, family by family."""
    return render(registry.collect())


def render(metrics: Iterable[Metric], report_dropped: bool = False) -> Iterator[bytes]:
    """The text of collected ``metrics``, one family at a time: row families rendered here, any
    other metric by prometheus_client itself. Collect first (``list(registry.collect())``) to
    take the snapshot, and its errors, before streaming. ``report_dropped``: end with the
    process's count of series left out (:data:`DROPPED`), once there is one."""
    KEPT.turn()
    bodies = Bodies(KEPT)
    for metric in metrics:
        if isinstance(metric, RowFamily):
            for piece in metric.pieces(bodies):
                yield _encoded(piece)
        else:
            try:
                yield generate_latest(_Fixed(metric))
            except Exception:  # noqa: BLE001 - one family never costs the others
                DROPPED.add(max(1, len(metric.samples)))
                log.exception("left the family %s out of the exposition", metric.name)
    if report_dropped and DROPPED.total:
        yield DROPPED.text().encode()


def _encoded(piece: str) -> bytes:
    """A piece as UTF-8; a line that cannot be (a lone surrogate in a label value, which the
    validation contract refuses at the door) is left out and counted, not the whole body."""
    try:
        return piece.encode()
    except UnicodeEncodeError:
        kept = []
        for line in piece.splitlines(keepends=True):
            try:
                kept.append(line.encode())
            except UnicodeEncodeError:
                DROPPED.add(1)
        return b"".join(kept)


class Dropped:
    """Series left out of /metrics since the process started, itself rendered as a counter
    (only once there is one: an exposition that dropped nothing is unchanged)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.total += n

    def text(self) -> str:
        return (f"# HELP {DROPPED_FAMILY} Series left out of the exposition because they could "
                "not be rendered (text that is not valid Unicode, or the same series twice once "
                "label values were cut).\n"
                f"# TYPE {DROPPED_FAMILY} counter\n{DROPPED_FAMILY} {float(self.total)}\n")


DROPPED = Dropped()


GZIP_LEVEL = 1
"""The exposition is so repetitive that the fastest level already shrinks it ~40×; level 6
saves another ~15 % of the bytes for ~2.5× the CPU."""


def gzipped(chunks: Iterable[bytes], level: int = GZIP_LEVEL) -> Iterator[bytes]:
    """One gzip stream over ``chunks``, compressed as they come."""
    stream = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for chunk in chunks:
        out = stream.compress(chunk)
        if out:
            yield out
    yield stream.flush()
