"""The peer: Prometheus Pushgateway receiving the same series over HTTP.

Each progress event becomes one push of its query's series, exactly what sparkwatch's own
exposition shows for that query after the event (the catalogue rendered from a
:class:`MetricState` fed the same events, every operator and custom metric), to the group
``/metrics/job/<app>/query_id/<query id>`` with PUT (a query's push replaces its group; POST would
not remove series that disappeared). Bodies are rendered before timing.

The gateway holds the whole fleet while it is measured, as in production: before the timed
window every query's group is pushed once (round 0). With Pushgateway's default consistency
check, every push re-checks all groups, so filling 1,000 groups through pushes would take many
minutes; instead a first gateway with the check disabled is filled, measured and stopped, which
writes its persistence file, and a second one with the default settings starts from that file
and is measured on the same pushes. Neither writes its persistence file during a timed window
(interval of one hour).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from bench.fleet import Fleet
from bench.ingest.push import Request
from bench.local import free_port
from bench.procs import serving
from sparkwatch.metrics.exposition import Families, add_query
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.parse import envelope_from_dict, parse_envelope

BINARY = "/usr/bin/prometheus-pushgateway"
HEADERS = {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
NO_CHECK = "--push.disable-consistency-check"


@dataclass(frozen=True, slots=True)
class Gateway:
    pid: int
    url: str
    consistency_check: bool


class _Rendered(Collector):
    def __init__(self, families: Families) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return list(self._families)


def group_path(app: str, query_id: str) -> str:
    return f"/metrics/job/{app}/query_id/{query_id}"


def render_pushes(fleet: Fleet, start: int, count: int) -> Iterator[Request]:
    """One push per event ``start`` .. ``start+count``; the state is fed from event 0 on, so
    counters and histograms hold what a pushing driver would have accumulated."""
    state, template = MetricState(), fleet.template()
    for i in range(start + count):
        parsed = parse_envelope(envelope_from_dict(fleet.envelope(template, i)))
        state.apply(parsed)
        if i < start:
            continue
        query = state.query(parsed.app.id, parsed.event.query_id)
        assert query is not None
        families = Families()
        add_query(families, query)
        yield Request(group_path(fleet.app, query.query_id),
                      generate_latest(_Rendered(families)), 1)  # type: ignore[arg-type]


def available() -> str | None:
    """Why the Pushgateway cannot run here, or None."""
    if shutil.which(BINARY) is None:
        return f"{BINARY} not found (apt-get install prometheus-pushgateway)"
    return None


def args(port: int, persistence: Path, consistency_check: bool) -> list[str]:
    return [BINARY, f"--web.listen-address=127.0.0.1:{port}",
            f"--persistence.file={persistence}", "--persistence.interval=1h",
            "--log.level=warn", *([] if consistency_check else [NO_CHECK])]


@contextmanager
def pushgateway(workdir: Path, consistency_check: bool) -> Iterator[Gateway]:
    """A gateway whose groups survive from one to the next in ``workdir`` (see above)."""
    port, log = free_port(), workdir / "pushgateway.log"
    url = f"http://127.0.0.1:{port}"
    # Stopped with SIGTERM: the gateway writes its persistence file on the way out.
    with serving(args(port, workdir / "pushgateway.data", consistency_check), url + "/-/ready",
                 log) as proc:
        yield Gateway(proc.pid, url, consistency_check)
