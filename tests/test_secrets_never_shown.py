"""Secrets are never shown: with a canary password in every database URL and a canary token in
every push and ingest token, no CLI command, collector log, listener log or error shows either,
whether the URL is good, unreachable, malformed or of the wrong scheme. (Every other test of the
suite is checked the same way by tests/conftest.py; this one drives the paths that handle bad
input.)"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.conftest import CANARY_PASSWORD, CANARY_TOKEN, ROOT, UNMEASURED, shown_canaries
from tests.support import wait_for
from tests.test_collector_support import Collector, free_port, fresh_ids, run_events, running

PW, TOK = CANARY_PASSWORD, CANARY_TOKEN
DEAD = f"127.0.0.1:{free_port()}"  # nothing listens here


def _sparkwatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def _assert_not_shown(result: subprocess.CompletedProcess[str]) -> None:
    output = result.stdout + result.stderr
    assert shown_canaries(output) == [], output
    assert "Traceback" not in output, output


@pytest.mark.parametrize("args", [
    ("doctor", "--collector", f"http://reader:{PW}@{DEAD}", "--token", TOK),
    ("doctor", "--collector", f"http://{DEAD}/?token={TOK}"),
    ("doctor", "--collector", f"file:///etc/passwd?password={PW}"),
    ("doctor", "--url", f"postgresql://app:{PW}@{DEAD}/hist"),
    ("doctor", "--url", f"app:{PW}@db/hist"),
    ("top", "--once", "--metrics", f"http://scraper:{PW}@{DEAD}/metrics", "--token", TOK),
    ("top", "--once", "--collector", f"http://{DEAD}/?token={TOK}"),
    ("top", "--once", "--url", f"postgresql://app:{PW}@{DEAD}/hist"),
    ("top", "--once", "--url", f"postgresql://app:{PW}@db:notaport/hist"),
    ("history", "queries", "--url", f"postgresql://app:{PW}@{DEAD}/hist"),
    ("-v", "db", "current", "--url", f"postgresql://app:{PW}@{DEAD}/hist"),
], ids=lambda args: " ".join(a.split(":")[0] for a in args[:3]))
def test_cli_commands_name_a_bad_source_without_its_secrets(args: tuple[str, ...]) -> None:
    result = _sparkwatch(*args)
    _assert_not_shown(result)
    assert "***" in result.stdout + result.stderr or "<unparseable URL>" in \
        result.stdout + result.stderr or "?…" in result.stdout + result.stderr


AT_USER, AT_HOST = "owner-u7", "127.0.0.1"
AT_URL = f"postgresql://{AT_USER}:my@{PW}@{DEAD}/hist"
"""'@' in the password, not percent-encoded: SQLAlchemy read password "my" and host
"<canary>@127.0.0.1", and the driver's "failed to resolve host" showed the canary (so did the
collector's repeated "history schema upgrade failed" log lines)."""


@pytest.mark.parametrize(("args", "env"), [
    (("db", "upgrade", "--url", AT_URL), {}),
    (("db", "downgrade", "--revision", "base", "--url", AT_URL), {}),
    (("db", "current"), {"SPARKWATCH_HISTORY_URL": AT_URL}),
    (("history", "queries", "--url", AT_URL), {}),
    (("doctor", "--url", AT_URL), {}),
    (("top", "--once"), {"SPARKWATCH_HISTORY_URL": AT_URL}),
    (("demo", "--history-url", AT_URL), {}),
    (("collector", "--no-auth", "--spool-dir", "SPOOL", "--history-url", AT_URL), {}),
    (("collector", "--no-auth", "--spool-dir", "SPOOL"),
     {"SPARKWATCH_COLLECTOR_HISTORY_URL": AT_URL}),
    (("quarantine", "replay", "--spool-dir", "SPOOL", "--history-url", AT_URL), {}),
], ids=lambda v: " ".join(v[:2]) if isinstance(v, tuple) else "env" if v else "flag")
def test_an_at_in_a_password_is_refused_at_once_showing_no_part_of_the_url(
    args: tuple[str, ...], env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "spool").mkdir()
    result = _sparkwatch(*(str(tmp_path / "spool") if a == "SPOOL" else a for a in args), env=env)
    _assert_not_shown(result)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "percent-encode '@' in the password as %40" in result.stderr
    assert AT_USER not in result.stderr and AT_HOST not in result.stderr
    assert "my@" not in result.stderr


def test_the_listener_gives_up_an_at_in_a_password_in_one_line_showing_none_of_it(
    caplog: pytest.LogCaptureFixture
) -> None:
    from sparkwatch.listener.attach import _history_sink
    from sparkwatch.settings import load_listener_settings
    from tests.test_history_sink import events

    settings = load_listener_settings({"SPARKWATCH_HISTORY_URL": AT_URL})
    counters = ListenerCounters()
    with caplog.at_level(logging.INFO, logger="sparkwatch"):
        sink = _history_sink(settings, counters)
        for event in events()[:3]:
            sink(event)
        wait_for(lambda: counters.dropped.get("history", 0) == 3, 10, "the events dropped")
        sink.stop(2)
    refused = [r.getMessage() for r in caplog.records if "%40" in r.getMessage()]
    assert len(refused) == 1 and "history.url): database URL refused" in refused[0]
    assert not [r for r in caplog.records if AT_HOST in r.getMessage()]


@pytest.mark.postgres
@pytest.mark.parametrize("args", [
    ("-v", "db", "upgrade"), ("-v", "db", "current"), ("-v", "history", "queries"),
    ("doctor",), ("top", "--once"),
])
def test_cli_commands_on_a_real_history_with_a_password_never_show_it(
    pg_url: str, args: tuple[str, ...]
) -> None:
    assert PW in pg_url
    if args[-1] != "upgrade":
        assert _sparkwatch("db", "upgrade", "--url", pg_url).returncode == 0
    result = _sparkwatch(*args, "--url", pg_url)
    assert result.returncode == 0, result.stderr[-2000:]
    _assert_not_shown(result)


SWAPPED = f"{TOK}-A=orders,{TOK}-B=orders"
"""Entries written the wrong way round (TOKEN=APP): the duplicate-token error quoted the two
"app names", the tokens."""


@pytest.mark.parametrize(("env", "named"), [
    ({"SPARKWATCH_COLLECTOR_TOKENS": TOK}, "SPARKWATCH_COLLECTOR_TOKENS=<secret>"),
    ({"SPARKWATCH_COLLECTOR_TOKENS": f"a={TOK},b={TOK}"}, "one token is given to two apps"),
    ({"SPARKWATCH_COLLECTOR_TOKENS": SWAPPED},
     "SPARKWATCH_COLLECTOR_TOKENS=<secret>: one token is given to two apps, in entries 1 and 2"),
], ids=["app-forgotten", "two-apps", "written-token-first"])
def test_a_collector_with_bad_tokens_refuses_to_start_without_showing_them(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    result = _sparkwatch("collector", "--history-url", "off", "--spool-dir",
                         str(tmp_path / "spool"), env=env)
    assert result.returncode == 2 and named in result.stderr
    _assert_not_shown(result)


def test_a_malformed_tokens_file_is_refused_without_showing_it(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOK}\n")  # the app name forgotten
    result = _sparkwatch("collector", "--history-url", "off", "--spool-dir",
                         str(tmp_path / "spool"), "--tokens-file", str(tokens))
    assert result.returncode == 2 and "expected APP=TOKEN pairs" in result.stderr
    _assert_not_shown(result)


def test_a_tokens_file_written_token_first_is_refused_naming_entries_not_tokens(
    tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(SWAPPED.replace(",", "\n"))
    result = _sparkwatch("collector", "--history-url", "off", "--spool-dir",
                         str(tmp_path / "spool"), "--tokens-file", str(tokens))
    assert result.returncode == 2, result.stderr
    assert f"--tokens-file {tokens}: one token is given to two apps, in entries 1 and 2" \
        in result.stderr
    _assert_not_shown(result)


def test_a_tokens_file_reloaded_written_token_first_is_logged_naming_entries_not_tokens(
    tmp_path: Path
) -> None:
    """The SIGHUP reload logs the refusal: it quoted the tokens too."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"file-app={TOK}-file\n")
    collector = Collector("off", tmp_path / "spool", "--tokens-file", str(tokens))
    with running(collector):
        assert collector.proc is not None
        tokens.write_text(SWAPPED.replace(",", "\n"))
        collector.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: tokens unchanged" in collector.log_text(), 10,
                 "the refused reload logged")
        events = run_events(**fresh_ids(), app={"name": "file-app", "id": "app-f",
                                                "spark_version": ""})
        assert collector.post(events[:1], token=f"{TOK}-file").status_code == 200
    log = collector.log_text()
    assert f"cannot use {tokens}: one token is given to two apps, in entries 1 and 2" in log, \
        log[-2000:]
    assert shown_canaries(log) == []


@pytest.fixture
def collector(pg_url: str, tmp_path: Path) -> Iterator[Collector]:
    c = Collector(pg_url, tmp_path / "spool", env={"SPARKWATCH_COLLECTOR_READ_TOKEN": f"{TOK}-r"})
    c.start()
    yield c
    c.stop()  # fails if the log shows a canary


@pytest.mark.postgres
def test_the_collector_logs_and_answers_without_its_secrets(collector: Collector) -> None:
    events = run_events(**fresh_ids())
    assert collector.post(events).status_code == 200
    wrong = collector.post(events[:1], token=f"{TOK}-wrong")
    assert wrong.status_code == 401 and shown_canaries(wrong.text) == []
    unread = collector.get("/metrics", token=f"{TOK}-wrong")
    assert unread.status_code == 401 and shown_canaries(unread.text) == []
    assert collector.get("/metrics", token=f"{TOK}-r").status_code == 200
    wait_for(lambda: "history postgresql+psycopg://postgres:***@" in collector.log_text(), 10,
             "the history URL logged with its password masked")
    assert shown_canaries(collector.log_text()) == []


def _events() -> list[Any]:
    return [parse_envelope(envelope_from_dict(e)) for e in run_events(**fresh_ids())]


@pytest.mark.parametrize("url", [
    f"http://pusher:{PW}@{DEAD}/api/v1/events", f"http://{DEAD}/api/v1/events?token={TOK}",
    f"file:///etc/passwd?password={PW}",
    # ids fixed: the dead port differs from one collection to the next (pytest-xdist's workers
    # must collect the same names)
], ids=["password-in-url", "token-in-query", "file-url"])
def test_the_push_sink_logs_failed_pushes_without_url_secrets_or_token(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    counters = ListenerCounters()
    caplog.set_level(logging.DEBUG, logger="sparkwatch")
    sink = PushSink(Endpoint(url, TOK, timeout=1), counters, capacity=100, batch_size=10,
                    flush_seconds=0.01, backoff=(0.01, 0.05))
    try:
        for event in _events():
            sink(event)
        wait_for(lambda: "push to" in caplog.text, 10, "a failed push logged")
    finally:
        sink.stop(1.0)
    assert shown_canaries(caplog.text) == [] and "retrying" in caplog.text


LEAKY_TESTS = f'''
import logging, sys

def test_logs_it():
    logging.getLogger("sparkwatch.x").info("connecting to postgresql://u:{PW}@h/db")

def test_prints_it():
    print("token {TOK}")

def test_writes_it_to_the_stderr_fd():
    import os
    os.write(2, b"{PW}")

def test_reads_it_back(capsys):
    print("{TOK}")
    assert capsys.readouterr().out

def test_shows_nothing(capsys):
    logging.getLogger("sparkwatch.x").info("connecting to postgresql://u:***@h/db")
    print("nothing secret")
'''


@pytest.mark.shows_canaries
@UNMEASURED  # the suite's own check, run on a throwaway suite: no product line of its own
def test_the_suite_fails_each_test_that_shows_a_canary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(
        "from tests.conftest import _secrets_never_shown, pytest_runtest_makereport  # noqa")
    pytester.makepyfile(test_leaky=LEAKY_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    flagged = {line.split("::")[1].split(" ")[0] for line in result.outlines
               if line.startswith(("FAILED test_leaky.py::", "ERROR test_leaky.py::"))}
    assert flagged == {"test_logs_it", "test_prints_it", "test_writes_it_to_the_stderr_fd",
                       "test_reads_it_back"}, result.stdout.str()


def _command_lines() -> list[str]:
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # the process ended meanwhile
            continue
    return lines


@pytest.mark.postgres
def test_the_demo_collector_gets_its_history_url_by_environment_not_argv(pg_url: str) -> None:
    from sparkwatch.collector.local import local_collector

    port = free_port()
    with local_collector(pg_url, port):
        ours = [line for line in _command_lines() if f"--port {port} " in line]
        assert len(ours) == 1 and "collector" in ours[0]
        assert shown_canaries(ours[0]) == [], ours[0]
