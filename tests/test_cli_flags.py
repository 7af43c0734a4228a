"""Boolean collector options are flags (argparse conventions), read like the env vars."""

from __future__ import annotations

import argparse

import pytest

from sparkwatch.cli.collector import register
from sparkwatch.collector.config import SETTINGS, load_collector_settings


def _settings(*argv: str) -> object:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["collector", *argv])
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    return load_collector_settings({}, flags)


def test_no_auth_is_a_flag_and_booleans_have_a_negative_form() -> None:
    settings = _settings("--no-auth", "--no-jobs-enabled", "--no-spool-fsync")
    assert (settings.no_auth, settings.jobs_enabled, settings.spool_fsync) == (True, False, False)


def test_a_boolean_flag_left_out_keeps_the_default() -> None:
    settings = _settings("--no-auth")
    assert (settings.jobs_enabled, settings.spool_fsync) == (True, True)


def test_a_boolean_flag_takes_no_value() -> None:
    with pytest.raises(SystemExit):
        _settings("--no-auth", "true")


def _collector_options() -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    collector = parser._subparsers._group_actions[0].choices["collector"]  # type: ignore[union-attr]
    return {a.option_strings[0]: a for a in collector._actions if a.option_strings}


@pytest.mark.parametrize(("option", "metavar"), [
    ("--host", "HOST"), ("--port", "PORT"), ("--history-url", "URL"), ("--spool-dir", "DIR"),
    ("--spool-max-bytes", "BYTES"), ("--header-timeout-seconds", "SECONDS"),
    ("--retention-days", "DAYS"), ("--max-events-per-second", "RATE"),
    ("--write-batch-size", "N"), ("--metrics-profile", "{default,full}"),
    ("--metrics-allow", "REGEX,..."), ("--metrics-batch-buckets", "SECONDS,..."),
    ("--replica", "NAME"),
])
def test_collector_help_names_what_each_value_is(option: str, metavar: str) -> None:
    assert _collector_options()[option].metavar == metavar


def test_no_collector_option_is_a_bare_value() -> None:
    assert [o for o, a in _collector_options().items() if a.metavar == "VALUE"] == []


@pytest.mark.parametrize(("option", "default"), [
    ("--port", "9751"), ("--spool-dir", "sparkwatch-spool"),
    ("--max-bytes-per-second", "67108864"), ("--header-timeout-seconds", "10"),
    ("--jobs-enabled", "on"), ("--otlp", "off"), ("--metrics-profile", "default"),
])
def test_collector_help_shows_the_default_the_loader_applies(option: str, default: str) -> None:
    assert f"(default: {default}) (env " in (_collector_options()[option].help or "")


def test_a_collector_option_without_a_fixed_default_shows_none() -> None:
    options = _collector_options()
    # Off unless given; set by neither default nor loader; said by the help in words.
    assert "default" not in (options["--no-auth"].help or "")
    assert "default" not in (options["--metrics-allow"].help or "")
    assert (options["--replica"].help or "").count("default") == 1  # "(default: host-pid)"


def test_python_dash_m_sparkwatch_is_the_sparkwatch_command() -> None:
    """Where the script is not on the PATH (a virtualenv not activated): it said "No module
    named sparkwatch.__main__"."""
    import subprocess
    import sys

    from sparkwatch.version import __version__

    done = subprocess.run([sys.executable, "-m", "sparkwatch", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, f"sparkwatch {__version__}")
