"""Settings: overrides > env > Spark conf > defaults, and clear errors naming the bad setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparkwatch.settings import ListenerSettings, SettingsError, load_listener_settings, parsers
from sparkwatch.settings.cli import TOKEN
from sparkwatch.settings.collector import SETTINGS as COLLECTOR_SETTINGS
from sparkwatch.settings.collector import CollectorSettings, load_collector_settings
from sparkwatch.settings.listener import LISTENER_FIELDS as LISTENER_SETTINGS
from sparkwatch.settings.spec import Setting


def test_defaults_serve_metrics_on_9750_and_write_sqlite_history() -> None:
    s = load_listener_settings({}, {})
    assert s == ListenerSettings()
    assert (s.metrics_port, s.history_url) == (9750, "sqlite:///sparkwatch.db")


def test_env_wins_over_spark_conf_and_overrides_win_over_env() -> None:
    env = {"SPARKWATCH_METRICS_PORT": "9000", "SPARKWATCH_QUEUE_CAPACITY": "50"}
    conf = {"spark.sparkwatch.metrics.port": "8000", "spark.sparkwatch.history.url": "off"}
    s = load_listener_settings(env, conf, queue_capacity=7)
    assert (s.metrics_port, s.history_url, s.queue_capacity) == (9000, None, 7)


def test_string_overrides_are_parsed_like_env_values() -> None:
    s = load_listener_settings({}, {}, history_url="off", metrics_port="0")
    assert (s.history_url, s.metrics_port) == (None, 0)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SPARKWATCH_METRICS_PORT": "nine"}, "SPARKWATCH_METRICS_PORT='nine'"),
        ({"SPARKWATCH_METRICS_PORT": "70000"}, "0-65535"),
        ({"SPARKWATCH_QUEUE_CAPACITY": "0"}, "positive"),
        ({"SPARKWATCH_MODE": "fast"}, "auto, jvm or public"),
        ({"SPARKWATCH_METRICS_ENABLED": "maybe"}, "true/false"),
    ],
)
def test_bad_values_name_the_setting_and_the_problem(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        load_listener_settings(env, {})


def test_bad_spark_conf_value_names_the_conf_key() -> None:
    with pytest.raises(SettingsError, match="spark.sparkwatch.history.batchSize"):
        load_listener_settings({}, {"spark.sparkwatch.history.batchSize": "-1"})


def test_unknown_override_lists_the_known_settings() -> None:
    with pytest.raises(SettingsError, match="unknown sparkwatch setting.*metric_port.*known:"):
        load_listener_settings({}, {}, metric_port=1)


# Durations reach timedelta and the collector's scheduler: inf or 1e308 crashed it at start-up,
# and --retention-days inf failed the stalls and lost-runs jobs on every run.
TEN_YEARS_MESSAGE = "expected a positive number, at most 315360000 (ten years in seconds)"
INTERVAL_MESSAGE = "expected a number of seconds from 0.1 to 315360000 (ten years)"
NO_AUTH = {"SPARKWATCH_COLLECTOR_NO_AUTH": "true"}


@pytest.mark.parametrize(("flags", "env", "named", "message"), [
    ({"retention_interval_seconds": "inf"}, {}, "--retention-interval-seconds='inf'",
     INTERVAL_MESSAGE),
    ({"evict_interval_seconds": "inf"}, {}, "--evict-interval-seconds='inf'", INTERVAL_MESSAGE),
    ({"stall_check_seconds": "inf"}, {}, "--stall-check-seconds='inf'", INTERVAL_MESSAGE),
    ({"rollup_interval_seconds": "1e308"}, {}, "--rollup-interval-seconds='1e308'",
     INTERVAL_MESSAGE),
    ({"stale_seconds": "nan"}, {}, "--stale-seconds='nan'", TEN_YEARS_MESSAGE),
    ({}, {"SPARKWATCH_COLLECTOR_RETENTION_INTERVAL_SECONDS": "inf"},
     "SPARKWATCH_COLLECTOR_RETENTION_INTERVAL_SECONDS='inf'", INTERVAL_MESSAGE),
    ({}, {"SPARKWATCH_COLLECTOR_ROLLUP_INTERVAL_SECONDS": "1e308"},
     "SPARKWATCH_COLLECTOR_ROLLUP_INTERVAL_SECONDS='1e308'", INTERVAL_MESSAGE),
])
def test_a_collector_float_that_is_not_finite_or_beyond_ten_years_is_refused_naming_it(
        flags: dict[str, str], env: dict[str, str], named: str, message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_collector_settings({**NO_AUTH, **env}, flags)
    assert str(refused.value) == f"{named}: {message}"


@pytest.mark.parametrize(("flags", "named", "expected"), [
    ({"retention_days": "inf"}, "--retention-days='inf'",
     "expected a positive number of days, at most 3650 (ten years)"),
    ({"rollup_retention_days": "1e6"}, "--rollup-retention-days='1e6'",
     "expected a positive number of days, at most 3650 (ten years)"),
    ({"max_bytes_per_second": "nan"}, "--max-bytes-per-second='nan'",
     "expected a positive number per second, at most 1e+15"),
])
def test_days_and_rates_are_held_to_their_own_ranges(
        flags: dict[str, str], named: str, expected: str) -> None:
    """Days reach ``now - timedelta(days=...)`` (past year 1 it overflows: every job run failed);
    a per-second quota only needs to be a finite number."""
    with pytest.raises(SettingsError) as refused:
        load_collector_settings(NO_AUTH, flags)
    assert str(refused.value) == f"{named}: {expected}"
    taken = load_collector_settings(NO_AUTH, {"retention_days": "3650",
                                              "max_bytes_per_second": "1e12"})
    assert (taken.retention_days, taken.max_bytes_per_second) == (3650.0, 1e12)


def test_a_duration_of_ten_years_is_taken_and_one_second_more_is_not() -> None:
    settings = load_collector_settings(NO_AUTH, {"retention_interval_seconds": "315360000"})
    assert settings.retention_interval_seconds == 315_360_000.0
    with pytest.raises(SettingsError, match="--retention-interval-seconds='315360001'"):
        load_collector_settings(NO_AUTH, {"retention_interval_seconds": "315360001"})


@pytest.mark.parametrize(("table", "defaults"), [
    (COLLECTOR_SETTINGS, CollectorSettings()), (LISTENER_SETTINGS, ListenerSettings())])
def test_every_default_float_written_out_is_taken_by_its_parser(
        table: tuple[Setting, ...], defaults: object) -> None:
    floats = [s for s in table if s.parse in (
        parsers.positive_float, parsers.non_negative_float, parsers.rate, parsers.days,
        parsers.interval, parsers.interval_or_off)]
    assert len(floats) >= 8  # durations, rate quotas (64 MiB/s), days (a 7-day horizon)
    for setting in floats:
        default = getattr(defaults, setting.name)
        assert setting.parse(repr(default)) == default, setting.name


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "1e400"])
def test_a_listener_interval_that_is_not_finite_is_refused(raw: str) -> None:
    with pytest.raises(SettingsError, match=f"SPARKWATCH_HISTORY_FLUSH_SECONDS='{raw}'"):
        load_listener_settings({"SPARKWATCH_HISTORY_FLUSH_SECONDS": raw}, {})
    with pytest.raises(SettingsError, match=r"expected 0 \(off\) or a number of seconds from "
                       r"0.1 to 315360000"):
        load_listener_settings({"SPARKWATCH_LISTENER_BUS_SAMPLE_SECONDS": raw}, {})


@pytest.mark.parametrize("name", ["SPARKWATCH_HISTORY_ROLLUP_SECONDS",
                                  "SPARKWATCH_LISTENER_BUS_SAMPLE_SECONDS"])
@pytest.mark.parametrize("raw", ["1e-9", "0.0001", "0.09"])
def test_a_driver_interval_so_short_it_would_keep_a_core_busy_is_refused(
    name: str, raw: str
) -> None:
    """1e-9 s rollups took a whole core of an idle driver, and bus sampling a quarter of one."""
    with pytest.raises(SettingsError, match=f"{name}='{raw}': expected 0 \\(off\\) or a number "
                       "of seconds from 0.1"):
        load_listener_settings({name: raw}, {})


def test_a_driver_interval_of_0_is_off_and_of_a_tenth_of_a_second_is_taken() -> None:
    settings = load_listener_settings({"SPARKWATCH_HISTORY_ROLLUP_SECONDS": "0",
                                       "SPARKWATCH_LISTENER_BUS_SAMPLE_SECONDS": "0.1"}, {})
    assert (settings.history_rollup_seconds, settings.listener_bus_sample_seconds) == (0.0, 0.1)


@pytest.mark.parametrize("flag", ["--retention-interval-seconds", "--rollup-interval-seconds",
                                  "--stall-check-seconds", "--evict-interval-seconds"])
def test_a_collector_job_interval_under_a_tenth_of_a_second_is_refused(flag: str) -> None:
    with pytest.raises(SettingsError, match=f"{flag}='0.001': expected a number of seconds "
                       "from 0.1"):
        load_collector_settings(NO_AUTH, {flag[2:].replace("-", "_"): "0.001"})


@pytest.mark.parametrize("raw", ["", "  "])
def test_an_empty_metrics_address_is_refused_naming_the_setting(raw: str) -> None:
    """It was taken, and the server then failed to bind ':0' with a warning naming no setting."""
    with pytest.raises(SettingsError, match="SPARKWATCH_METRICS_ADDRESS=.*: empty: give an "
                       "address"):
        load_listener_settings({"SPARKWATCH_METRICS_ADDRESS": raw}, {})


@pytest.mark.parametrize(("raw", "taken"), [("7", 7.0), ("0.5", 0.5), ("3650", 3650.0)])
def test_days_are_positive_and_at_most_ten_years(raw: str, taken: float) -> None:
    assert parsers.days(raw) == taken


@pytest.mark.parametrize("raw", ["0", "-1", "3651", "inf", "nan", "1e308"])
def test_days_beyond_ten_years_or_not_finite_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="expected a positive number of days, at most 3650"):
        parsers.days(raw)


@pytest.mark.parametrize("raw", ["SeCrEt\nx", "SeCrEt\r\nX-Evil: 1", "Se Cr Et", "SeCrEt\x00",
                                 "SeCrÉt", "SeCrEt\x7f"])
def test_a_token_no_authorization_header_can_carry_is_refused_without_showing_it(
        raw: str) -> None:
    with pytest.raises(SettingsError) as refused:
        TOKEN.parsed(raw, "SPARKWATCH_TOKEN")
    assert str(refused.value) == (
        "SPARKWATCH_TOKEN=<secret>: expected visible ASCII characters only (no spaces, control "
        "or non-ASCII characters)")


def test_a_token_is_trimmed_and_an_empty_one_is_none() -> None:
    assert parsers.secret("  abc-DEF_123.~+/=  \n") == "abc-DEF_123.~+/="
    assert parsers.secret("   ") is None


def test_a_collector_with_inf_as_its_eviction_interval_exits_2_in_one_line(
        tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparkwatch.cli.main", "collector", "--no-auth", "--host",
         "127.0.0.1", "--port", "0", "--history-url", "off", "--spool-dir",
         str(tmp_path / "spool"), "--evict-interval-seconds", "inf"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"sparkwatch collector: error: --evict-interval-seconds='inf': {INTERVAL_MESSAGE}")


def test_a_collector_count_past_what_a_float_holds_is_refused_at_start(tmp_path: Path) -> None:
    """--stall-intervals 1e400 (written out) started, then failed the stall job at every run:
    "int too large to convert to float"."""
    done = subprocess.run(
        [sys.executable, "-m", "sparkwatch.cli.main", "collector", "--no-auth", "--host",
         "127.0.0.1", "--port", "0", "--history-url", "off", "--spool-dir",
         str(tmp_path / "spool"), "--stall-intervals", "1" + "0" * 400],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("sparkwatch collector: error: --stall-intervals='1000"), line
    assert line.endswith(": expected a positive integer, at most 9007199254740992"), line

@pytest.mark.parametrize(("given", "expected"), [
    ({"metrics_port": 70000}, "metrics_port='70000': expected a port number 0-65535"),
    ({"queue_capacity": 0}, "queue_capacity='0': expected a positive integer"),
    ({"queue_capacity": 10**400}, "queue_capacity='1000"),
    ({"metrics_enabled": "maybe"}, "metrics_enabled='maybe'"),
])
def test_settings_given_in_code_are_checked_as_env_and_conf_are(
        given: dict[str, object], expected: str) -> None:
    """attach(spark, metrics_port=70000) reached bind() (an OverflowError in the app);
    queue_capacity=0 made the intake queue unbounded."""
    from sparkwatch.settings.listener import load_listener_settings

    with pytest.raises(SettingsError) as refused:
        load_listener_settings({}, {}, **given)
    assert str(refused.value).startswith(expected)
    taken = load_listener_settings({}, {}, metrics_port=0, metrics_enabled=False,
                                   push_flush_seconds=0.05)
    assert (taken.metrics_port, taken.metrics_enabled, taken.push_flush_seconds) == (0, False, 0.05)


@pytest.mark.parametrize(("env", "named"), [
    ({"SPARKWATCH_COLLECTOR_TOKENS": "orders=caf\u00e9-token"}, "SPARKWATCH_COLLECTOR_TOKENS"),
    ({"SPARKWATCH_COLLECTOR_TOKENS": "orders=a b"}, "SPARKWATCH_COLLECTOR_TOKENS"),
    ({"SPARKWATCH_COLLECTOR_TOKENS": "orders=t", "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN": "s",
      "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS": "acme=\u0442\u043e\u043a\u0435\u043d"},
     "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS"),
])
def test_a_token_no_http_client_can_send_is_refused_naming_the_variable_not_the_token(
    env: dict[str, str], named: str
) -> None:
    """Ingest and tenant read tokens of other characters were taken (the admin read and scrape
    tokens were not), and every request presenting one was a 401."""
    with pytest.raises(SettingsError) as refused:
        load_collector_settings(env)
    message = str(refused.value)
    assert message.startswith(f"{named}=<secret>: a token holds a space, control or non-ASCII")
    assert not {"caf\u00e9-token", "a b", "\u0442\u043e\u043a\u0435\u043d"} & set(message.split())
    assert "\u00e9" not in message and "\u0442" not in message


def test_a_tokens_file_with_a_token_no_client_can_send_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("orders=caf\u00e9\n")
    with pytest.raises(SettingsError) as refused:
        load_collector_settings({}, tokens_file=path)
    assert str(refused.value).startswith(f"--tokens-file {path}: a token holds a space")
    assert "caf" not in str(refused.value)


def test_visible_ascii_tokens_with_punctuation_are_taken() -> None:
    token = "Ab0-._~+/=!#$%&'*^`|"
    settings = load_collector_settings({"SPARKWATCH_COLLECTOR_TOKENS": f"orders={token}"})
    assert settings.tokens == (("orders", token),)


HUGE_VALUES = ("x" * 100_000, "1" + "0" * 100_000, "http://" + "a" * 100_000)
"""A file's content set by mistake (a regex of them compiles for a while: not megabytes here)."""


@pytest.mark.parametrize("setting", LISTENER_SETTINGS, ids=lambda s: s.name)
def test_a_refused_huge_listener_value_is_quoted_cut_short(setting: Setting) -> None:
    """Was the whole value, twice (the setting's quote and float's own message): a line of
    megabytes in the app's log, from ``sparkwatch.attach()`` called directly."""
    for value in HUGE_VALUES:
        try:
            load_listener_settings({setting.env: value})
        except SettingsError as exc:
            assert str(exc).startswith(f"{setting.env}=") and len(str(exc)) < 600, str(exc)[:700]


@pytest.mark.parametrize("setting", [s for s in COLLECTOR_SETTINGS if s.env],
                         ids=lambda s: s.name)
def test_a_refused_huge_collector_value_is_quoted_cut_short(setting: Setting) -> None:
    no_auth = next(s for s in COLLECTOR_SETTINGS if s.name == "no_auth")
    for value in HUGE_VALUES:
        try:
            load_collector_settings({str(no_auth.env): "true", str(setting.env): value})
        except SettingsError as exc:
            assert str(setting.env) in str(exc) and len(str(exc)) < 600, str(exc)[:700]
