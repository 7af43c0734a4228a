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
