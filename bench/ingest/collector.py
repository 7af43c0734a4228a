"""A real ``sparkwatch collector`` process for the ingest benchmark, used as a black box over
HTTP: product defaults (spool fsync on, write batch size, one uvicorn worker) except what a
1,000-query fleet needs.

Only two settings differ from the defaults, and why: ``--max-queries-per-app`` (and, for a fleet
over 1,000 queries, the tenant's ``--max-queries``) is raised to the fleet's size (the default
cap, 200, would refuse most of one app's queries), and the scheduled
jobs are off: the fleet's event times are fixed in the past, so retention and stall detection
would act on them, and their cost depends on time, not on events.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import procs
from bench.procs import ProcessFailed, tail
from sparkwatch.settings.collector import CollectorSettings

QUERY_CAP_MIN = 200


@dataclass(frozen=True, slots=True)
class Running:
    pid: int
    url: str
    token: str
    log: Path
    returncode: Callable[[], int | None]
    """None while the process runs"""

    def alive(self) -> bool:
        """True, or raises when the collector has exited (so waits on it end at once)."""
        code = self.returncode()
        if code is not None:
            raise ProcessFailed(f"the collector exited {code}: {tail(self.log)}")
        return True

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                "Content-Encoding": "gzip"}

    def self_metrics(self) -> dict[str, float]:
        """The collector's own ``sparkwatch_collector_*`` samples (one scrape of /metrics,
        which renders every query's series too: only call it outside the timed phases)."""
        text = httpx.get(self.url + "/metrics", timeout=120).text
        return parse_samples(text, "sparkwatch_collector_")


def parse_samples(text: str, prefix: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def sample(samples: dict[str, float], name: str, **labels: str) -> float:
    """One sample by name and exact labels (0 when absent: counters not yet touched)."""
    for key, value in samples.items():
        match = re.fullmatch(r"([^{]+)(?:\{(.*)\})?", key)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if found == labels:
            return value
    return 0.0


@contextmanager
def collector(history_url: str, workdir: Path, app: str, queries: int,
              python: str | None = None, extra: Sequence[str] = ()) -> Iterator[Running]:
    """``python``: another interpreter (e.g. a virtualenv holding an older sparkwatch, for
    before/after figures). ``extra``: more collector flags."""
    token = secrets.token_hex(16)
    flags = ["--history-url", history_url, "--no-jobs-enabled",
             "--max-queries-per-app", str(max(QUERY_CAP_MIN, queries)), *_tenant_cap(queries),
             *extra]
    with procs.collector(workdir, *flags, tokens=f"{app}={token}", python=python) as (proc, url):
        yield Running(proc.pid, url, token, workdir / "collector.log", proc.poll)


def _tenant_cap(queries: int) -> list[str]:
    """Only when the fleet needs it: a ``--collector-python`` build older than the tenant quota
    does not know the flag."""
    default = CollectorSettings().max_queries
    return ["--max-queries", str(queries)] if queries > default else []
