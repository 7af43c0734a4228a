"""``docs/metrics.md``, generated from the catalogue so the reference can never drift from the code.

python -m sparkwatch.metrics.docs            # rewrite docs/metrics.md
python -m sparkwatch.metrics.docs --check    # exit 1 if docs/metrics.md is stale (CI)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.catalogue import MetricDef
from sparkwatch.metrics.custom import KNOWN, MS, CustomMetric
from sparkwatch.metrics.profiles import PROFILES

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
REGENERATE = "python -m sparkwatch.metrics.docs"

# Label sets are named once in the intro; tables refer to them by name to stay readable.
LABEL_SETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("operator", cat.OPERATOR_LABELS),
    ("source", cat.SOURCE_LABELS),
    ("query", cat.QUERY_LABELS),
    ("app", cat.APP_LABELS),
)

_CUSTOM_NAMES = frozenset(m.metric.name for m in KNOWN.values())


def _after_prefix(metric: MetricDef) -> str:
    return metric.name.removeprefix(cat.PREFIX)


def _is_state(metric: MetricDef) -> bool:
    return _after_prefix(metric).startswith("state_") and metric.name not in _CUSTOM_NAMES


# (title, blurb, membership test) in page order; every metric belongs to exactly one group.
GROUPS: tuple[tuple[str, str, Callable[[MetricDef], bool]], ...] = (
    (
        "Application and listener",
        "The Spark application and the health of the sparkwatch listener itself.",
        lambda m: _after_prefix(m).startswith(("app_", "listener_")),
    ),
    (
        "Query",
        "One series per query (by query id); the run id appears only in the info metric.",
        lambda m: _after_prefix(m).startswith("query_"),
    ),
    (
        "State operators",
        "One series per stateful operator of a query, identified by its position in Spark's "
        "`stateOperators` list (`operator_index`) and its `operatorName` (`operator`). Spark "
        "lists operators from the sink back to the sources: in `dropDuplicates` followed by an "
        "aggregation, the aggregation is index 0.",
        _is_state,
    ),
    (
        "State store custom metrics",
        "Dedicated metrics for the `customMetrics` keys sparkwatch knows (see the key table "
        "below); values are converted to base units.",
        lambda m: m.name in _CUSTOM_NAMES,
    ),
    (
        "Sources and sink",
        "One series per source of a query (by position and description) and per query for the "
        "sink.",
        lambda m: _after_prefix(m).startswith(("source_", "sink_")),
    ),
)

INTRO = (
    f"""\
# Metrics reference

<!-- Generated from sparkwatch/metrics/catalogue.py and custom.py by `{REGENERATE}`.
     Do not edit by hand: CI fails when this file differs from the catalogue. -->

Every metric sparkwatch exports, as served by the embedded exporter and the collector.

## Conventions

- Every name starts with `{cat.PREFIX}`.
- Base units only: seconds and bytes. Spark's milliseconds are divided by 1000; names carry the
  unit (`_seconds`, `_bytes`).
- `_total` only on counters. Spark reports per-batch amounts (rows updated, time spent, ...);
  sparkwatch adds them up across batches into counters, so `rate()` and `increase()` stay exact
  when several batches fall between two scrapes. A progress seen twice (same run id and batch id)
  is counted once, and counters keep growing across restarts of a query.
- The last batch's value of such amounts is also a gauge (`..._last_batch_...`); levels (rows in
  state, memory) are gauges; durations are histograms.
- While a query is idle (`{cat.QUERY_IDLE.name}` 1: Spark's idle event, no batch runs), the
  rate gauges (`{cat.QUERY_INPUT_RATE.name}`, `{cat.QUERY_PROCESSED_RATE.name}` and the
  sources') are 0, as Spark's own gauges are; every other last-batch gauge keeps the last
  batch's value (each one: [While a query is idle](#while-a-query-is-idle)).
- Timestamps are Unix time in seconds (`..._timestamp_seconds`).
- Type `info` is a gauge of value 1 whose labels carry the information (`..._info`).
- Labels are bounded: the run id, which changes on every restart, appears only on
  `{cat.QUERY_INFO.name}`; per-state-store-instance keys are aggregated (min, max, count)
  instead of becoming labels.
- The collector adds a `tenant` label to every series of its apps and queries: the tenant of the
  ingest token that pushed them (`default` for a token configured without one; see
  [security.md](security.md)). The embedded exporter has no such label.

## Profiles

`SPARKWATCH_METRICS_PROFILE` (listener) and `--metrics-profile` (collector) choose what /metrics
exports. **default** is what the generated dashboards and alert rules read and nothing more,
but for the batch counter, the listener's error counter and the two last-batch gauges `top`
shows (about 57 series per query with 4
stateful operators); **full** is every family below (about
340). The *profile* column says where each family is. Allow and deny lists of metric-name
regexes (`SPARKWATCH_METRICS_ALLOW` / `SPARKWATCH_METRICS_DENY`, `--metrics-allow` /
`--metrics-deny`; whole name, comma-separated) add families to the profile and take families
out of it (deny wins), as kube-state-metrics' `--metric-allowlist` / `--metric-denylist` do:
`spark_streaming_state_rocksdb_.*` adds the RocksDB families to the default. The bounds of the
two histograms are set with `SPARKWATCH_METRICS_BATCH_BUCKETS` / `..._PHASE_BUCKETS`
(`--metrics-batch-buckets` / `--metrics-phase-buckets`). Dashboards and rules are built for a
profile (`sparkwatch rules build --set metrics_profile=full`): panels and rules reading a family
outside it are left out. Under default, `sparkwatch top` shows each query's batch and its
time, and works out its operators' rows updated, removed and dropped per batch from the
counters between the batches it sees; only commit time stays empty (`--metrics-allow
'spark_streaming_state_last_batch_.*'` exports every last-batch gauge).

## Label sets

| set | labels |
|---|---|
"""
    + "".join(
        f"| *{name}* | {', '.join(f'`{label}`' for label in labels)} |\n"
        for name, labels in LABEL_SETS
    )
    + """
`query_name` is empty for unnamed queries. `operator` is Spark's `operatorName` (for example
`stateStoreSave`, `dedupe`, `symmetricHashJoin`; session windows report `defaultName` on
Spark 3.4/3.5). `source` is the source description, cut to 120 characters.
"""
)


CUSTOM_INTRO = f"""\
## Known `customMetrics` keys

Keys of `stateOperators[].customMetrics` with a dedicated metric. Per-batch amounts become
counters (summed across batches), levels become gauges. Any other key is exported as
`{cat.STATE_CUSTOM_METRIC.name}{{metric="<key>"}}` (raw value of the last batch), so keys
that a newer Spark adds are never lost under the full profile. Keys of the form
`<metric>.partition_<p>_<store>` (Spark 4.1+, e.g. `SnapshotLastUploaded`) are aggregated into
`{cat.STATE_INSTANCE_METRIC_MIN.name}`, `..._max` and `..._reported`. The default profile
exports none of these custom metrics (the dashboards and rules it serves read none): add them
with an allow list.
"""


def _cell(text: str) -> str:
    """Table cell text: pipes would split the cell, angle brackets would become HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    return f"`{text.replace('|', chr(92) + '|')}`" if text else ""


def render_labels(labels: tuple[str, ...]) -> str:
    for name, base in LABEL_SETS:
        if labels[: len(base)] == base:
            extra = labels[len(base) :]
            return " + ".join([f"*{name}*", *(f"`{label}`" for label in extra)])
    return ", ".join(f"`{label}`" for label in labels)


def _metric_rows(metrics: Iterable[MetricDef]) -> list[str]:
    rows = [
        "| name | type | labels | source in Spark | profile | help |",
        "|---|---|---|---|---|---|",
    ]
    for m in metrics:
        profile = "default" if m.name in PROFILES["default"] else "full"
        rows.append(
            f"| `{m.name}` | {m.kind.value} | {render_labels(m.labels)} | {_code(m.source)} "
            f"| {profile} | {_cell(m.help)} |"
        )
    return rows


def render_group(title: str, blurb: str, metrics: list[MetricDef]) -> str:
    return "\n".join([f"## {title}", "", blurb, "", *_metric_rows(metrics)]) + "\n"


def _conversion(custom: CustomMetric) -> str:
    if custom.scale == MS:
        return "ms → s (× 0.001)"
    if custom.scale == 1.0:
        return "none"
    return f"× {custom.scale:g}"


def render_known_custom() -> str:
    lines = [
        CUSTOM_INTRO,
        "| Spark key | metric | type | unit conversion | provider | since |",
        "|---|---|---|---|---|---|",
    ]
    for custom in KNOWN.values():
        lines.append(
            f"| `{custom.key}` | `{custom.metric.name}` | {custom.metric.kind.value} "
            f"| {_conversion(custom)} | {custom.provider} | {custom.since or 'all'} |"
        )
    return "\n".join(lines) + "\n"


IDLE_INTRO = f"""\
## While a query is idle

Spark sends `QueryIdleEvent` instead of a progress when a trigger finds no new data
(`{cat.QUERY_IDLE.name}` is then 1). No batch runs, so there is no new last batch: what each
last-batch gauge shows meanwhile (the next batch replaces them all). Counters do not move;
levels (rows in state, memory) stay what the last batch left.

A query in real-time mode (Spark 4.1+, `trigger(realTime=...)`;
`{cat.QUERY_TRIGGER_INFO.name}{{trigger="real_time"}}`) is not idle between rows: each batch
runs for its whole interval (`{cat.QUERY_TRIGGER_INTERVAL.name}`) reading rows as they come, so
its last batch duration is about that interval while healthy, and a progress arrives once per
interval.
"""


def render_idle() -> str:
    lines = [IDLE_INTRO, "| name | while idle |", "|---|---|"]
    lines += [f"| `{m.name}` | {_cell(m.idle)} |" for m in cat.ALL if m.idle]
    return "\n".join(lines) + "\n"


def grouped_metrics() -> list[tuple[str, str, list[MetricDef]]]:
    return [(title, blurb, [m for m in cat.ALL if test(m)]) for title, blurb, test in GROUPS]


def render_metrics_markdown() -> str:
    parts = [INTRO]
    parts += [render_group(title, blurb, metrics) for title, blurb, metrics in grouped_metrics()]
    parts.append(render_idle())
    parts.append(render_known_custom())
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/metrics.md from the catalogue.")
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    rendered = render_metrics_markdown()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != rendered:
            state = "missing" if current is None else "stale"
            print(f"{args.output} is {state}: regenerate it with `{REGENERATE}`", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(rendered, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
