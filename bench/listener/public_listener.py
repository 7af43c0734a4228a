"""The comparison: a listener registered with ``spark.streams.addListener`` that exports itself.

It is sparkwatch's own public-API receiver (:func:`make_public_listener`, the Spark Connect path)
with the export done inline on the callback thread, as a hand-written listener would: take
``event.progress.json``, parse it with sparkwatch's parser, fold it into a ``MetricState`` served
on its own ``/metrics`` and write it to its own SQL history. So both listeners do the same export;
only the way the event reaches Python differs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from sparkwatch.history.writer import HistoryWriter
from sparkwatch.listener.exporter import MetricsServer, serve_metrics
from sparkwatch.listener.receivers import make_public_listener
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo, EventKind
from sparkwatch.model.parse import envelope_from_json, parse_envelope


@dataclass
class InlineExport:
    """Parse + apply (+ history write) on the caller's thread; times the progress part (the
    export's own cost)."""

    app: AppInfo
    writer: HistoryWriter | None = None
    state: MetricState = field(default_factory=MetricState)
    export_ns: list[int] = field(default_factory=list)
    errors: int = 0

    def __call__(self, kind: EventKind, raw_json: str) -> None:
        start = time.perf_counter_ns()
        parsed = parse_envelope(envelope_from_json(kind, raw_json, self.app, time.time()))
        self.state.apply(parsed)
        if self.writer is not None:
            self.writer.write([parsed])
        if kind is EventKind.PROGRESS:
            self.export_ns.append(time.perf_counter_ns() - start)

    def on_error(self) -> None:
        self.errors += 1


@dataclass
class PublicListener:
    listener: Any
    export: InlineExport
    server: MetricsServer

    def is_its_proxy(self, obj: Any) -> bool:
        """PySpark wraps the listener in a ``JStreamingQueryListener``: that is what Py4J calls."""
        from pyspark.sql.streaming.listener import JStreamingQueryListener

        return isinstance(obj, JStreamingQueryListener) and obj.pylistener is self.listener

    def remove(self, spark: Any) -> None:
        spark.streams.removeListener(self.listener)
        self.server.stop()
        if self.export.writer is not None:
            self.export.writer.close()


def add_public_listener(spark: Any, history_url: str | None) -> PublicListener:
    app_id = spark.sparkContext.applicationId
    app = AppInfo(name="bench-public", id=app_id, spark_version=spark.version)
    export = InlineExport(app, HistoryWriter(history_url) if history_url else None)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(export.state))
    server = serve_metrics(registry, "127.0.0.1", 0)
    listener = make_public_listener(export, export.on_error)
    spark.streams.addListener(listener)
    return PublicListener(listener, export, server)
