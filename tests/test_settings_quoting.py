"""A refused value is quoted cut short, and a token entry is named by its position, never its text.

An ingest token entry written the wrong way round (TOKEN=APP) has its token where the app name
goes: the duplicate-token error quoted both "app names", the tokens. The OTLP variables, the
tokens file and the demo's options quoted a refused value whole (a line of megabytes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparkwatch.cli.errors import CliError
from sparkwatch.settings import SettingsError
from sparkwatch.settings.collector import (
    load_collector_settings,
    parse_tenant_tokens,
    parse_tokens,
    read_tokens_file,
)
from sparkwatch.settings.spec import SHOWN_CHARS
from sparkwatch.summary import quoted

SECRET_A, SECRET_B = "Zq8-secret-token-A", "Zq8-secret-token-B"
WRONG_WAY_ROUND = "one token is given to two apps, in entries 1 and 2 (is one written the " \
    "wrong way round? the form is [TENANT/]APP=TOKEN)"


def test_tokens_written_the_wrong_way_round_are_refused_naming_entries_not_tokens() -> None:
    with pytest.raises(ValueError) as refused:
        parse_tokens(f"{SECRET_A}=orders,{SECRET_B}=orders")
    assert str(refused.value) == WRONG_WAY_ROUND


def test_the_collector_env_refuses_swapped_tokens_naming_the_variable_and_entries() -> None:
    with pytest.raises(SettingsError) as refused:
        load_collector_settings(
            {"SPARKWATCH_COLLECTOR_TOKENS": f"# rotated\nbilling=t-1,{SECRET_A}=orders,"
                                            f"\n{SECRET_B}=orders"})
    assert str(refused.value) == f"SPARKWATCH_COLLECTOR_TOKENS=<secret>: " \
        f"{WRONG_WAY_ROUND.replace('entries 1 and 2', 'entries 2 and 3')}"


def test_a_malformed_token_entry_is_named_by_its_position_among_the_entries() -> None:
    with pytest.raises(ValueError) as refused:
        parse_tokens(f"orders=t-1\n\n# a comment\n{SECRET_A}\nbilling=t-2")
    assert str(refused.value) == \
        "expected APP=TOKEN pairs separated by commas or newlines (entry 2 of 3 is not)"
    with pytest.raises(ValueError) as unsendable:
        parse_tokens(f"orders=t-1,{SECRET_A}=caf\u00e9")
    assert str(unsendable.value).endswith("in a header); entry 2 of 2")


def test_a_read_token_given_to_two_tenants_names_the_entries() -> None:
    with pytest.raises(ValueError) as refused:
        parse_tenant_tokens(f"acme=r-1,{SECRET_A}=acme,globex=r-1")
    assert str(refused.value) == "one read token is given to two tenants, in entries 1 and 3 " \
        "(is one written the wrong way round? the form is TENANT=TOKEN)"


def test_a_tokens_file_with_a_megabyte_app_name_is_refused_in_one_short_line(
    tmp_path: Path
) -> None:
    """Its app name was the duplicate-token error's quote: an error of a megabyte."""
    path = tmp_path / "tokens"
    path.write_text(f"orders=t-1\n{'a' * 10**6}=t-1\n")
    with pytest.raises(SettingsError) as refused:
        read_tokens_file(path)
    assert str(refused.value) == f"--tokens-file {path}: {WRONG_WAY_ROUND}"


def test_a_token_the_env_and_the_tokens_file_give_two_apps_names_an_entry_of_each(
    tmp_path: Path
) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{SECRET_B}=billing\n")
    with pytest.raises(SettingsError) as refused:
        load_collector_settings({"SPARKWATCH_COLLECTOR_TOKENS": f"orders=t-1,{SECRET_A}=billing"},
                                tokens_file=path)
    assert str(refused.value) == (
        "ingest tokens: one token is given to two apps, in entry 2 of "
        "SPARKWATCH_COLLECTOR_TOKENS and entry 1 of the tokens file (is one written the wrong "
        "way round? the form is [TENANT/]APP=TOKEN)")


SECONDS = "expected a number of seconds, above 0 and at most 3600"
PROTOCOLS = "sparkwatch exports OTLP over http/protobuf or grpc"
OTLP_REFUSALS = {
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": SECONDS,
    "OTEL_EXPORTER_OTLP_TIMEOUT": SECONDS,
    "OTEL_METRIC_EXPORT_INTERVAL":
        "expected a number of milliseconds, at least 100 and at most 86400000",
    "OTEL_METRIC_EXPORT_TIMEOUT": "expected a number of milliseconds, above 0 and at most 3600000",
    "OTEL_EXPORTER_OTLP_PROTOCOL": PROTOCOLS,
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": PROTOCOLS,
}


@pytest.mark.parametrize("name", OTLP_REFUSALS)
def test_a_megabyte_otlp_variable_is_refused_quoted_cut_short(name: str) -> None:
    """Was the whole value: a 1,000,093-character SettingsError that attach() raised."""
    from sparkwatch.otlp.config import otlp_config

    value, expected = "x" * 10**6, OTLP_REFUSALS[name]
    with pytest.raises(SettingsError) as refused:
        otlp_config({name: value})
    assert str(refused.value) == f"{name}={quoted(value, SHOWN_CHARS)}: {expected}"
    assert str(refused.value).startswith(f"{name}='xxx") and len(str(refused.value)) < 300


def _sparkwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


DEMO_REFUSALS = {
    "--port": "argument --port: not a port number (0-65535): '",
    "--rows-per-second":
        "argument --rows-per-second: expected 1-1000 (two cores run eight queries): '",
}


@pytest.mark.parametrize("option", DEMO_REFUSALS)
@pytest.mark.parametrize("digit", ["9", "x"])
def test_the_demo_refuses_a_huge_option_value_in_one_short_line(option: str, digit: str) -> None:
    """``sparkwatch demo --port <100 KB>`` printed 100,315 bytes (all digits: argparse's own
    message, int() refusing past 4300 digits)."""
    refusal = DEMO_REFUSALS[option]
    result = _sparkwatch("demo", option, digit * 100_000)
    assert result.returncode == 2 and result.stdout == ""
    last = result.stderr.splitlines()[-1]
    assert last.endswith(f"{refusal}{digit * 37}...'"), last
    assert len(result.stderr) < 2000


def test_a_huge_checkpoint_dir_that_cannot_be_made_is_named_cut_short(tmp_path: Path) -> None:
    from sparkwatch.cli.demo import make_checkpoint_dir

    path = tmp_path / ("d" * 100_000)
    with pytest.raises(CliError) as refused:
        make_checkpoint_dir(path)
    message = str(refused.value)
    assert message.startswith(f"--checkpoint-dir: cannot make {tmp_path}/ddd")
    assert message.endswith("...: File name too long") and len(message) < 300, message[:400]
