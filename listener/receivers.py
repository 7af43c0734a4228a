"""How events arrive from Spark: the raw JVM path (classic) or PySpark's public API (Connect).

Both do one thing on Spark's callback thread: take the event's JSON and offer it to the intake.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from sparkwatch.model.events import EventKind

log = logging.getLogger(__name__)

Offer = Callable[[EventKind, str], None]


class JvmReceiver:
    """Implements the JVM interface ``PythonStreamingQueryListener`` directly through Py4J.

    PySpark's public path rebuilds every event field by field (~600 Py4J round trips, ~50 ms per
    progress); here each callback makes one call, ``jevent.json()``, and returns.
    """

    def __init__(self, offer: Offer, on_error: Callable[[], None]) -> None:
        self._offer = offer
        self._on_error = on_error

    def _take(self, kind: EventKind, jevent: Any) -> None:
        try:
            self._offer(kind, jevent.json())
        except Exception:  # noqa: BLE001 - an exception here would only be logged by Spark
            self._on_error()
            log.debug("sparkwatch: could not take %s event from the JVM", kind, exc_info=True)

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - JVM interface names
        self._take(EventKind.STARTED, jevent)

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        self._take(EventKind.PROGRESS, jevent)

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        self._take(EventKind.IDLE, jevent)

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        self._take(EventKind.TERMINATED, jevent)

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def register_jvm(spark: Any, receiver: JvmReceiver) -> Callable[[], None]:
    """Add ``receiver`` to the session's JVM StreamingQueryManager; returns a remover."""
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    ensure_callback_server_started(sc._gateway)
    wrapper_class = sc._jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper
    jlistener = wrapper_class(receiver)
    jstreams = spark._jsparkSession.streams()
    jstreams.addListener(jlistener)
    return lambda: jstreams.removeListener(jlistener)


def make_public_listener(offer: Offer, on_error: Callable[[], None]) -> Any:
    """A ``pyspark.sql.streaming.StreamingQueryListener`` that re-serialises what it is given."""
    from pyspark.sql.streaming import StreamingQueryListener

    class PublicReceiver(StreamingQueryListener):  # type: ignore[misc]
        def _take(self, kind: EventKind, build: Callable[[], str]) -> None:
            try:
                offer(kind, build())
            except Exception:  # noqa: BLE001 - never raise into Spark
                on_error()
                log.debug("sparkwatch: could not take %s event", kind, exc_info=True)

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            self._take(EventKind.STARTED, lambda: _started_json(event))

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            self._take(EventKind.PROGRESS, lambda: event.progress.json)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            self._take(EventKind.IDLE, lambda: _idle_json(event))

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            self._take(EventKind.TERMINATED, lambda: _terminated_json(event))

    return PublicReceiver()


def _started_json(event: Any) -> str:
    return json.dumps(
        {
            "id": str(event.id),
            "runId": str(event.runId),
            "name": event.name,
            "timestamp": event.timestamp,
            "jobTags": sorted(getattr(event, "jobTags", ()) or ()),
        }
    )


def _idle_json(event: Any) -> str:
    return json.dumps(
        {"id": str(event.id), "runId": str(event.runId), "timestamp": event.timestamp}
    )


def _terminated_json(event: Any) -> str:
    return json.dumps(
        {
            "id": str(event.id),
            "runId": str(event.runId),
            "exception": event.exception,
            "errorClassOnException": getattr(event, "errorClassOnException", None),
        }
    )
