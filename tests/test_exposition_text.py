"""The direct text rendering of /metrics (sparkwatch.metrics.text) is byte for byte what
prometheus_client's generate_latest writes for the same families, on every real fixture and on
label values and numbers that need escaping or Go's number format."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from prometheus_client import Counter, generate_latest

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.exposition import Families, SparkwatchCollector
from sparkwatch.metrics.stats import ListenerStats
from sparkwatch.metrics.text import Bodies, KeptLabels, generate, go_float, gzipped, render
from sparkwatch.model.events import AppInfo
from tests.test_exposition import APP, FIXTURE_FILES, Scraper, run_events


def every_fixture() -> Scraper:
    stats = ListenerStats(app=APP, mode="jvm", version="0.1.0", received={"progress": 3},
                          dropped={"intake": 2}, queues={"intake": (0, 1000)})
    scraper = Scraper(listener_stats=[stats])
    for index, path in enumerate(FIXTURE_FILES):
        app = AppInfo(name=f"capture-{index}", id=f"local-{index}", spark_version="4.3.0")
        scraper.apply(run_events(json.loads(path.read_text()), index % 2 == 0, app))
    return scraper


def test_every_fixture_renders_as_generate_latest_does() -> None:
    registry = every_fixture().registry
    Counter("plain_requests", "An ordinary prometheus_client metric.", registry=registry).inc()
    expected = generate_latest(registry)
    assert b"spark_streaming_state_rows{" in expected
    assert b"".join(generate(registry)) == expected


class _Families:
    def __init__(self, families: Families) -> None:
        self._families = families

    def collect(self) -> list[object]:
        return list(self._families)


ODD = ('say "hi"', "back\\slash", "two\nlines", "", "ünïcödé", "{braces}", "%s %d {0}")
NUMBERS = (0, 1, -1, 7, 999_999, 1_000_000, -1_000_000, 123_456_789, 2**60, 0.5, -0.0, 1e-7,
           999_999.5, 1e6, 1.5e16, -2.5e20, math.inf, -math.inf, math.nan, True, False)


def test_odd_label_values_numbers_and_arities_render_as_generate_latest_does() -> None:
    out = Families()
    for i, value in enumerate(NUMBERS):
        labels = (ODD[i % len(ODD)], f"id-{i}", "q", ODD[(i + 3) % len(ODD)])
        out.add(cat.QUERY_ACTIVE, labels, value)
        out.add(cat.QUERY_BATCHES, labels, value)
    out.add(cat.APP_INFO, ("app", 'i"d', "4.3.0"), 1)
    out.add(cat.QUERY_RUNS, ("only", "two"), 3)  # fewer values than labels, as zip() allows
    out.add(cat.QUERY_FAILURES, (), 1)
    buckets = [("0.5", 1), ("1.0", 2), ("+Inf", 3)]
    out.add_histogram(cat.QUERY_BATCH_DURATION, ("a", 'b"', "c", "d\n"), buckets, 2.5)
    out.add_histogram(cat.QUERY_PHASE_DURATION, ("a", "b", "c", "d", "getBatch"), buckets, 0.0)
    source = _Families(out)
    assert b"".join(generate(source)) == generate_latest(source)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", NUMBERS)
def test_numbers_are_formatted_as_prometheus_client_does(value: float) -> None:
    from prometheus_client.utils import floatToGoString

    assert go_float(value) == floatToGoString(value)


def test_shared_label_tuples_are_rendered_once_per_scrape() -> None:
    bodies, labels = Bodies(), ("app", "id", "q", "name")
    first = bodies.plain(cat.QUERY_LABELS, labels)
    assert first == 'app_id="id",app_name="app",query_id="q",query_name="name"'
    assert bodies.plain(cat.QUERY_LABELS, labels) is first


def test_label_sets_are_kept_across_scrapes_and_forgotten_after_two() -> None:
    kept = KeptLabels()
    labels = ("app", "id", "q", 'a "quoted" name')
    first = Bodies(kept).plain(cat.QUERY_LABELS, labels)
    kept.turn()
    # Another scrape builds new tuples of the same values: the text is the one kept.
    again = Bodies(kept).plain(cat.QUERY_LABELS, tuple(list(labels)))
    assert again is first and again.endswith('query_name="a \\"quoted\\" name"')
    kept.turn()
    kept.turn()  # two scrapes without the label set: forgotten
    assert kept.get(("", cat.QUERY_LABELS, labels)) is None


def test_a_kept_capped_label_set_still_marks_the_scrape_capped() -> None:
    kept, long = KeptLabels(), ("app", "id", "q", "x" * 1000)
    Bodies(kept).plain(cat.QUERY_LABELS, long)
    kept.turn()
    bodies = Bodies(kept)
    bodies.plain(cat.QUERY_LABELS, long)
    assert bodies.capped


def test_the_samples_api_still_sees_every_row() -> None:
    scraper = every_fixture()
    families = list(SparkwatchCollector(scraper.state).collect())
    rows = sum(len(f.samples) for f in families)  # type: ignore[attr-defined]
    text = b"".join(render(families)).decode()
    assert rows == sum(1 for line in text.splitlines() if not line.startswith("#"))


def test_gzipped_stream_inflates_to_the_exposition() -> None:
    chunks = [b"a" * 10_000, b"", b"b\n" * 5000]
    assert gzip.decompress(b"".join(gzipped(iter(chunks)))) == b"".join(chunks)
