"""Secrets are never shown: one redaction for every URL and token a message or log carries, and
CLI errors about URLs that name the problem without echoing what was typed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sparkwatch.history.engine import describe_url
from sparkwatch.listener.push_sink import safe_url
from sparkwatch.redact import UNPARSEABLE, redact_token, redact_url
from tests.conftest import CANARY_PASSWORD

CANARY = CANARY_PASSWORD


@pytest.mark.parametrize(("url", "shown"), [
    (f"postgresql+psycopg://app:{CANARY}@db:5432/hist", "postgresql+psycopg://app:***@db:5432/hist"),
    (f"postgresql://app@db/hist?sslpassword={CANARY}", "postgresql://app@db/hist?…"),
    (f"http://collector:9751/api/v1/events?token={CANARY}", "http://collector:9751/api/v1/events?…"),
    ("sqlite:///sparkwatch.db", "sqlite:///sparkwatch.db"),
    ("sqlite:////var/lib/sparkwatch/history.db", "sqlite:////var/lib/sparkwatch/history.db"),
    (f"app:{CANARY}@db/hist", UNPARSEABLE),  # no scheme: shown as nothing of what was typed
    (f"postgresql://app:{CANARY}@db:notaport/hist", UNPARSEABLE),
    (f"{CANARY} is not a url", UNPARSEABLE),
    ("postgresql://[::1]:5432/hist", "postgresql://[::1]:5432/hist"),
])
def test_urls_are_shown_without_their_secrets(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert describe_url(url) == safe_url(url) == shown


def test_a_sqlalchemy_url_object_is_shown_the_same_way() -> None:
    import sqlalchemy as sa

    url = sa.engine.make_url(f"postgresql+psycopg://app:{CANARY}@db/hist")
    assert redact_url(url) == "postgresql+psycopg://app:***@db/hist"


def test_tokens_are_never_shown() -> None:
    assert CANARY not in redact_token(CANARY) and redact_token(None) == ""


def _sparkwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("url", [
    f"app:{CANARY}@db/hist", f"postgresql://app:{CANARY}@db:notaport/hist",
])
@pytest.mark.parametrize("command", [("history", "queries"), ("db", "upgrade")])
def test_a_bad_url_is_a_clear_cli_error_that_does_not_echo_it(
    url: str, command: tuple[str, ...]
) -> None:
    result = _sparkwatch(*command, "--url", url)
    assert result.returncode == 2
    assert "not a database URL: <unparseable URL>" in result.stderr
    assert CANARY not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_the_collector_refuses_a_bad_history_url_without_echoing_it(tmp_path) -> None:
    result = _sparkwatch("collector", "--no-auth", "--spool-dir", str(tmp_path / "spool"),
                         "--history-url", f"postgresql://app:{CANARY}@db:x/hist")
    assert result.returncode == 2 and "<unparseable URL>" in result.stderr
    assert CANARY not in result.stdout + result.stderr and "Traceback" not in result.stderr


@pytest.mark.postgres
def test_a_database_that_refuses_the_connection_is_named_without_its_password(
    pg_admin_url: str,
) -> None:
    result = _sparkwatch("history", "queries", "--url",
                         f"postgresql://app:{CANARY}@127.0.0.1:1/hist")
    assert result.returncode == 2 and "postgresql+psycopg://app:***@127.0.0.1:1/hist" in \
        result.stderr
    assert CANARY not in result.stdout + result.stderr
