"""The attach and stop lines: one line each, naming where metrics, history and pushed events go,
with every secret redacted. (tests/test_run.py sees them printed by a real driver.)"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.listener.announce import (
    Destinations,
    announce,
    attach_line,
    disabled_line,
    stop_line,
)
from sparkwatch.version import __version__


def destinations(**changes: object) -> Destinations:
    values: dict[str, object] = {
        "app_id": "app-20260101-0001",
        "mode": "jvm",
        "version": "0.1.0",
        "metrics_address": "0.0.0.0",
        "metrics_port": 9750,
        "history_url": "sqlite:///sparkwatch.db",
        "push_url": None,
    }
    values.update(changes)
    return Destinations(**values)  # type: ignore[arg-type]


def test_the_attach_line_names_metrics_history_and_push() -> None:
    assert attach_line(destinations()) == (
        "sparkwatch 0.1.0 attached to app-20260101-0001 (jvm mode): "
        "metrics http://localhost:9750/metrics, history sqlite:///sparkwatch.db, push off"
    )


def test_secrets_in_the_history_and_push_urls_never_appear() -> None:
    line = attach_line(
        destinations(
            history_url="postgresql+psycopg://spark:s3cret@db:5432/hist?sslpassword=p4ss",
            push_url="https://bob:t0ken@collector:9751/api/v1/events?token=abc",
        )
    )
    for secret in ("s3cret", "p4ss", "t0ken", "abc"):
        assert secret not in line
    assert "history postgresql+psycopg://spark:***@db:5432/hist?…" in line
    assert line.endswith("push https://bob:***@collector:9751/api/v1/events?…")


def test_a_specific_bind_address_is_shown_and_no_server_says_off() -> None:
    assert "metrics http://10.0.0.7:9800/metrics" in attach_line(
        destinations(metrics_address="10.0.0.7", metrics_port=9800)
    )
    off = attach_line(destinations(metrics_address=None, metrics_port=None, history_url=None))
    assert off.endswith("metrics off, history off, push off")


@pytest.mark.parametrize("address, shown", [("::1", "[::1]"), ("fd00::7", "[fd00::7]"),
                                             ("10.0.0.7", "10.0.0.7")])
def test_an_ipv6_bind_address_is_shown_in_brackets_as_a_url_needs(address: str, shown: str) -> None:
    """``http://::1:9800/metrics`` was printed: no browser or curl takes it."""
    line = attach_line(destinations(metrics_address=address, metrics_port=9800))
    assert f"metrics http://{shown}:9800/metrics," in line


def test_the_stop_line_counts_received_and_dropped_and_spark_s_own_drops() -> None:
    assert stop_line("app-1", 120, 0) == (
        "sparkwatch stopped for app-1: 120 events received, 0 dropped"
    )
    assert stop_line("app-1", 120, 3, bus_dropped=17) == (
        "sparkwatch stopped for app-1: 120 events received, 3 dropped "
        "(Spark's listener bus dropped 17 events for all listeners)"
    )


def test_a_disabled_listener_says_it_is_off_and_how() -> None:
    assert disabled_line("app-1", "0.1.0") == (
        "sparkwatch 0.1.0 not attached to app-1: disabled (SPARKWATCH_ENABLED=false or "
        "spark.sparkwatch.enabled=false)"
    )


def test_announce_writes_exactly_one_line_and_survives_a_closed_stream() -> None:
    out = io.StringIO()
    announce("hello", out)
    assert out.getvalue() == "hello\n"
    out.close()
    announce("again", out)  # no exception: a broken stderr never stops the app


@pytest.mark.spark
def test_a_real_attach_prints_its_line_and_its_stop_line_and_disabled_says_so(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sparkwatch

    history = f"sqlite:///{tmp_path}/h.db"
    att = sparkwatch.attach(spark, metrics_port=0, history_url=history)
    try:
        port = att.metrics_port
    finally:
        att.detach()
    app_id = spark.sparkContext.applicationId
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"sparkwatch {__version__} attached to {app_id} (jvm mode): "
        f"metrics http://localhost:{port}/metrics, history {history}, push off",
        f"sparkwatch stopped for {app_id}: 0 events received, 0 dropped",
    ]
    sparkwatch.attach(spark, enabled=False)
    assert capsys.readouterr().err.splitlines() == [disabled_line(app_id, __version__)]
