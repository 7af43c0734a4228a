"""Helpers shared by the collector and push tests (this module has no tests of its own): a real
collector process, a private PostgreSQL cluster that can be stopped, and wire events built from the
recorded Spark fixtures."""

from __future__ import annotations

import copy
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from glob import glob
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from bench.local import free_port
from tests.conftest import CANARY_PASSWORD, CANARY_TOKEN, FIXTURES, shown_canaries, unavailable
from tests.support import create_database, drop_database, wait_for

# Every token carries the canary: a collector log or an answer that shows one fails the test.
TOKEN = f"{CANARY_TOKEN}-for-any-app"
APP_TOKEN = f"{CANARY_TOKEN}-for-orders"
READ_TOKEN = f"{CANARY_TOKEN}-read"
APP = {"name": "orders-etl", "id": "app-20261121093000-0001", "spark_version": "4.3.0"}



class Collector:
    """``sparkwatch collector`` as a real process on a free localhost port."""

    def __init__(self, history_url: str, spool_dir: Path, *flags: str,
                 env: dict[str, str] | None = None, port: int | None = None) -> None:
        self.history_url = history_url
        self.spool_dir = spool_dir
        self.flags = flags
        self.env = {
            "SPARKWATCH_COLLECTOR_TOKENS": f"*={TOKEN},orders-etl={APP_TOKEN}",
            **(env or {}),
        }
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = spool_dir.parent / f"collector-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def ingest_url(self) -> str:
        return self.url + "/api/v1/events"

    def start(self, timeout: float = 30) -> Collector:
        self.launch()
        try:
            self.wait_healthy(timeout)
        except BaseException:
            # No caller's `finally` holds it yet: a collector that did not come up in time
            # would outlive the test run, its jobs knocking at a dropped database for good.
            with suppress(AssertionError):
                self.stop()
            raise
        return self

    def wait_healthy(self, timeout: float = 30) -> None:
        wait_for(self._healthy, timeout, f"collector on port {self.port} (log {self.log})")

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        args = [
            sys.executable, "-m", "sparkwatch.cli.main", "collector", "--host", "127.0.0.1",
            "--port", str(self.port), "--history-url", self.history_url,
            "--spool-dir", str(self.spool_dir),
            # Recorded runs carry the dates they were recorded on: kept by retention and within
            # the stall horizon whatever today is (a test's own --retention-days, later, wins).
            "--retention-days", "3650", *self.flags,
        ]
        env = {**os.environ, **self.env}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"collector exited {self.proc.returncode}: {self.log_text()}")
        try:
            return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        self.assert_no_secret_logged()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None
        self.assert_no_secret_logged()

    def assert_no_secret_logged(self) -> None:
        """Its tokens and its history URL's password carry canaries: none may reach its log."""
        leaked = shown_canaries(self.log_text())
        assert not leaked, f"the collector logged a canary secret {leaked} ({self.log})"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def post(self, events: list[Any], token: str | None = TOKEN, gzipped: bool = False,
             headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        body = json.dumps({"events": events}).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
        if gzipped:
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.post(self.ingest_url, content=body, headers=headers, timeout=30, **kwargs)

    def get(self, path: str, token: str | None = None, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(self.url + path, params=params, headers=headers, timeout=30)

    def metrics(self, token: str | None = None) -> str:
        response = self.get("/metrics", token)
        assert response.status_code == 200, response.text
        return response.text


@contextmanager
def running(collector: Collector) -> Iterator[Collector]:
    collector.start()
    try:
        yield collector
    finally:
        collector.stop()


@contextmanager
def module_database(admin_url: str) -> Iterator[str]:
    name = create_database(admin_url)
    try:
        url = sa.engine.make_url(admin_url).set(database=name, password=CANARY_PASSWORD)
        yield url.render_as_string(False)
    finally:
        drop_database(admin_url, name)


@contextmanager
def database_collector(admin_url: str, spool_dir: Path, *flags: str,
                       env: dict[str, str] | None = None) -> Iterator[Collector]:
    """A running collector whose history is a database of its own, dropped afterwards."""
    with module_database(admin_url) as url, running(Collector(url, spool_dir, *flags,
                                                                env=env)) as collector:
        yield collector


def scalar(url: str, sql: str, **params: Any) -> Any:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql), params).scalar()
    finally:
        engine.dispose()


def count_rows(url: str, sql: str, **params: Any) -> int:
    """A count for ``wait_for``: 0 while the table does not exist yet (a collector migrates in
    the background and accepts events before its schema is there)."""
    try:
        return int(scalar(url, sql, **params))
    except (sa.exc.ProgrammingError, sa.exc.OperationalError):
        return 0


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of metric ``name`` in an exposition text."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


# --- wire events ----------------------------------------------------------------------------


def recorded(name: str = "window_agg_hdfs", spark: str = "spark-4.3.0") -> dict[str, Any]:
    return json.loads((FIXTURES / spark / f"{name}.json").read_text())


def envelope(kind: str, payload: dict[str, Any], app: dict[str, str] | None = None) -> dict:
    return {"kind": kind, "app": app or APP, "received_at": time.time(), "payload": payload}


def run_events(name: str = "window_agg_hdfs", app: dict[str, str] | None = None,
               query_id: str | None = None, run_id: str | None = None,
               terminated: bool = True) -> list[dict[str, Any]]:
    """A recorded run as wire envelopes (started, progress..., terminated), optionally under a
    new query id and run id so several runs can coexist."""
    data = copy.deepcopy(recorded(name))
    ids = {"id": query_id or data["started"]["id"], "runId": run_id or data["started"]["runId"]}
    out = [envelope("started", {**data["started"], **ids}, app)]
    out += [envelope("progress", {**p, **ids}, app) for p in data["progress"]]
    if terminated:
        out.append(envelope("terminated", {**data["terminated"], **ids}, app))
    return out


def fresh_ids() -> dict[str, str]:
    return {"query_id": str(uuid.uuid4()), "run_id": str(uuid.uuid4())}


# --- a private PostgreSQL cluster that tests may stop -----------------------------------------


class PrivatePostgres:
    """initdb + pg_ctl on a spare port in a temp dir; run as the ``postgres`` user when we are
    root (PostgreSQL refuses to run as root). The shared server stays untouched."""

    def __init__(self) -> None:
        bins = sorted(glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not bins and shutil.which("pg_ctl") is None:
            unavailable("PostgreSQL server binaries (initdb, pg_ctl) not installed")
        self.bin = Path(bins[-1]).parent if bins else Path(str(shutil.which("pg_ctl"))).parent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="sparkwatch-pg-"))
        self.data = self.dir / "data"
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed: {result.stdout}{result.stderr}")

    def init(self) -> PrivatePostgres:
        if self._as_postgres:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync")
        return self

    def start(self) -> None:
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                f"-c unix_socket_directories={self.dir} -c fsync=off")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"),
                  "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        try:
            scalar(self.url, "select 1")
        except sa.exc.OperationalError:
            return False
        return True

    @contextmanager
    def database(self) -> Iterator[str]:
        """A database of this cluster; the cluster runs again afterwards (a test may have stopped
        it)."""
        name = create_database(self.url)
        try:
            yield sa.engine.make_url(self.url).set(database=name).render_as_string(False)
        finally:
            if not self.running():
                self.start()

    def destroy(self) -> None:
        with suppress(AssertionError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A private cluster, running, destroyed on exit (tests that stop and start a database)."""
    pg = PrivatePostgres().init()
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()
