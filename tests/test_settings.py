"""Settings: overrides > env > Spark conf > defaults, and clear errors naming the bad setting."""

from __future__ import annotations

import pytest

from sparkwatch.settings import ListenerSettings, SettingsError, load_listener_settings


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
