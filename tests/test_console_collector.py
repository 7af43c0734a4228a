"""The collector's console: two apps pushed from two real Spark drivers (the suite's shared
session and a second driver process with its own JVM) on one page; a read token is required
(401 without, Basic credentials accepted for browsers); a tenant's read token shows its apps
only."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import sparkwatch
from tests.conftest import ROOT
from tests.support import wait_for
from tests.tenants_support import A_APP, A_READ, A_TOKEN, B_APP, B_TOKEN, tenant_collector
from tests.test_collector_support import (
    READ_TOKEN,
    TOKEN,
    Collector,
    fresh_ids,
    run_events,
    running,
)

APP_A, APP_B = "console-app-a", "console-app-b"


def _page(c: Collector, path: str, token: str | None) -> httpx.Response:
    return c.get(path, token, refresh="0")


@pytest.fixture
def read_token_collector(pg_url: str, tmp_path: Path) -> Iterator[Collector]:
    """A collector with a read token, stopped however its test ends: one whose test failed
    before its own clean-up (a Spark error as the query started) was left running after the
    run."""
    with running(Collector(pg_url, tmp_path / "spool",
                           env={"SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN})) as c:
        yield c


@contextmanager
def second_driver(c: Collector, tmp_path: Path
                  ) -> Iterator[Callable[[], subprocess.CompletedProcess[str]]]:
    """The second driver process, pushing to ``c``, run in a thread; what it gives is a wait
    for its end. Waited for on the way out too, whatever happened meanwhile (its run is
    bounded)."""
    other: dict[str, subprocess.CompletedProcess[str]] = {}

    def run() -> None:
        other["done"] = subprocess.run(
            [sys.executable, "-m", "tests.console_driver", APP_B, str(tmp_path / "chk-b"),
             "push", c.ingest_url, TOKEN],
            capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)

    thread = threading.Thread(target=run)
    thread.start()

    def done() -> subprocess.CompletedProcess[str]:
        thread.join(300)
        return other["done"]

    try:
        yield done
    finally:
        thread.join(300)


@contextmanager
def attached(spark: Any, c: Collector) -> Iterator[Any]:
    att = sparkwatch.attach(spark, metrics_enabled=False, history_url="off",
                            push_url=c.ingest_url, push_token=TOKEN, push_flush_seconds=0.2,
                            app_name=APP_A)
    try:
        yield att
    finally:
        att.detach()


@contextmanager
def counting_query(spark: Any, tmp_path: Path) -> Iterator[Any]:
    from pyspark.sql import functions as F

    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .groupBy((F.col("value") % 5).alias("k")).count()
             .writeStream.format("noop").outputMode("update").queryName(f"{APP_A}_counts")
             .trigger(processingTime="1 second")
             .option("checkpointLocation", str(tmp_path / "chk-a")).start())
    try:
        yield query
    finally:
        if query.isActive:
            query.stop()


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.timeout(400)
def test_the_collector_console_shows_apps_of_two_spark_drivers_behind_a_read_token(
        spark: Any, read_token_collector: Collector, tmp_path: Path) -> None:
    c = read_token_collector
    with second_driver(c, tmp_path) as second_done, attached(spark, c) as att, \
            counting_query(spark, tmp_path) as query:
        wait_for(lambda: len(query.recentProgress) >= 3, 180, "3 batches of app A")
        query.stop()
        assert att.flush(30)
        done = second_done()
        assert done.returncode == 0, done.stderr[-3000:]
        b = json.loads(done.stdout.strip().splitlines()[-1])
        assert b["batches"] >= 3 and b["flushed"]

        def both_listed() -> bool:
            r = _page(c, "/", READ_TOKEN)
            return r.status_code == 200 and str(query.id) in r.text and b["query_id"] in r.text
        wait_for(both_listed, 60, "both apps' queries on the collector's console")
        html = _page(c, "/", READ_TOKEN).text
        assert f"<td><bdi>{APP_A}</bdi></td>" in html and f"<td><bdi>{APP_B}</bdi></td>" in html
        for qid in (str(query.id), b["query_id"]):
            assert f'href="/queries/{qid}?refresh=0"' in html  # a page not refreshing links on
            page = _page(c, f"/queries/{qid}", READ_TOKEN)
            assert page.status_code == 200
            chart = page.text[page.text.index('id="op-0-rows"'):]
            assert int(re.search(r'data-points="(\d+)"', chart).group(1)) >= 3
            assert page.headers["content-security-policy"].startswith("default-src 'none'")
        # Without a token, with a wrong one: 401, asking a browser for credentials.
        for token in (None, "not-the-token"):
            refused = _page(c, "/", token)
            assert refused.status_code == 401 and str(query.id) not in refused.text
            assert refused.headers["www-authenticate"].startswith("Basic ")
        assert _page(c, f"/queries/{query.id}", None).status_code == 401
        # A browser's Basic credentials carry the read token as the password.
        basic = base64.b64encode(f"me:{READ_TOKEN}".encode()).decode()
        ok = httpx.get(c.url + "/", headers={"Authorization": f"Basic {basic}"}, timeout=30)
        assert ok.status_code == 200 and str(query.id) in ok.text
        # GET only: no page takes a write.
        assert httpx.post(c.url + "/", headers={"Authorization": f"Bearer {READ_TOKEN}"},
                          timeout=30).status_code == 405


@pytest.mark.postgres
def test_a_tenant_read_token_sees_only_its_tenants_apps(pg_admin_url: str,
                                                        tmp_path: Path) -> None:
    with tenant_collector(pg_admin_url, tmp_path) as c:
        a_ids, b_ids = fresh_ids(), fresh_ids()
        assert c.post(run_events(app=A_APP, **a_ids), A_TOKEN).status_code == 200
        assert c.post(run_events(app=B_APP, **b_ids), B_TOKEN).status_code == 200

        def listed() -> bool:
            r = _page(c, "/", READ_TOKEN)
            return a_ids["query_id"] in r.text and b_ids["query_id"] in r.text
        wait_for(listed, 60, "both tenants' queries on the admin's console")
        alpha = _page(c, "/", A_READ)
        assert alpha.status_code == 200
        assert a_ids["query_id"] in alpha.text and b_ids["query_id"] not in alpha.text
        assert A_APP["name"] in alpha.text and B_APP["name"] not in alpha.text
        # The live state lists both before the history process has migrated and written: the
        # page of a query the live state does not show answers 503 until the history is readable.
        b_page = f"/queries/{b_ids['query_id']}"
        wait_for(lambda: _page(c, b_page, A_READ).status_code != 503, 60,
                 "the history readable")
        assert _page(c, b_page, A_READ).status_code == 404
        assert _page(c, f"/queries/{a_ids['query_id']}", A_READ).status_code == 200
        assert _page(c, "/", None).status_code == 401


@pytest.mark.postgres
def test_the_collector_console_answers_head_as_it_answers_get(pg_admin_url: str,
                                                              tmp_path: Path) -> None:
    with tenant_collector(pg_admin_url, tmp_path) as c:
        ids = fresh_ids()
        assert c.post(run_events(app=A_APP, **ids), A_TOKEN).status_code == 200
        page = f"/queries/{ids['query_id']}"
        wait_for(lambda: _page(c, page, READ_TOKEN).status_code == 200, 60, "the query's page")
        auth = {"Authorization": f"Bearer {READ_TOKEN}"}
        for path in ("/", page, "/console.js", "/console.css"):
            head = httpx.head(c.url + path, params={"refresh": "0"}, headers=auth, timeout=30)
            get = httpx.get(c.url + path, params={"refresh": "0"}, headers=auth, timeout=30)
            assert head.status_code == 200, (path, head.status_code)
            assert head.content == b"" and get.content
            assert head.headers["content-type"] == get.headers["content-type"]
            assert head.headers["content-security-policy"].startswith("default-src 'none'")
        js = httpx.head(c.url + "/console.js", headers=auth, timeout=30)
        assert int(js.headers["content-length"]) == len(
            httpx.get(c.url + "/console.js", headers=auth, timeout=30).content)
        refused = httpx.head(c.url + "/", timeout=30)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic")
