"""Register a listener the way its users would, then time its Py4J callback object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from bench.listener.e2e import MetricsProbe
from bench.listener.public_listener import add_public_listener
from bench.timing import CallbackTimer, find_proxy, summarize_ns

FLUSH_TIMEOUT_S = 30.0
PROBE_STOP_TIMEOUT_S = 15.0


@dataclass
class Measured:
    """One registered listener with a timer on its ``onQueryProgress``."""

    name: str
    timer: CallbackTimer
    exported: Callable[[], int]
    """Progress events folded into the listener's exporter state so far (after :meth:`settle`)."""
    details: Callable[[], dict[str, Any]]
    settle: Callable[[], bool]
    """Wait until the listener's own worker (if any) has exported what it received."""
    close: Callable[[], None]
    probe: MetricsProbe | None = None


def exported_batches(state: Any) -> int:
    with state.read() as (_apps, queries):
        return sum(q.batches for q in queries)


def sqlite_url(history_file: str | None) -> str:
    return f"sqlite:///{history_file}" if history_file else "off"


def measure_sparkwatch(spark: Any, probe_e2e: bool, history_file: str | None) -> Measured:
    import sparkwatch
    from sparkwatch.listener.receivers import JvmReceiver

    att = sparkwatch.attach(spark, metrics_port=0, metrics_address="127.0.0.1",
                            history_url=sqlite_url(history_file))
    if att.mode != "jvm":
        raise RuntimeError(f"sparkwatch attached in {att.mode!r} mode, expected 'jvm'")
    receiver = find_proxy(spark, lambda o: isinstance(o, JvmReceiver), "JvmReceiver")
    assert att.metrics_port is not None
    probe = MetricsProbe(att.metrics_port, history_file) if probe_e2e else None
    timer = CallbackTimer()
    timer.wrap(receiver, "onQueryProgress", after=probe.offer if probe else None)

    def details() -> dict[str, Any]:
        stats = att.stats()
        return {"intake_received": stats.received.get("progress", 0),
                "intake_dropped": sum(stats.dropped.values()),
                "parse_errors": stats.parse_errors}

    def close() -> None:
        if probe is not None:
            probe.stop(timeout=PROBE_STOP_TIMEOUT_S)
        att.detach()

    return Measured("sparkwatch", timer, lambda: exported_batches(att.state), details,
                    lambda: att.flush(FLUSH_TIMEOUT_S), close, probe)


def measure_public(spark: Any, probe_e2e: bool, history_file: str | None) -> Measured:
    public = add_public_listener(spark, history_file and sqlite_url(history_file))
    proxy = find_proxy(spark, public.is_its_proxy, "JStreamingQueryListener")
    probe = MetricsProbe(public.server.port, history_file) if probe_e2e else None
    timer = CallbackTimer()
    timer.wrap(proxy, "onQueryProgress", after=probe.offer if probe else None)

    def details() -> dict[str, Any]:
        export = summarize_ns(public.export.export_ns)
        # The inline export alone: callback time minus this is PySpark's fromJObject + .json.
        return {"export_errors": public.export.errors,
                "inline_export": asdict(export) if export else None}

    def close() -> None:
        if probe is not None:
            probe.stop(timeout=PROBE_STOP_TIMEOUT_S)
        public.remove(spark)

    return Measured("public", timer, lambda: exported_batches(public.export.state), details,
                    lambda: True, close, probe)
