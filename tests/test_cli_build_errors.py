"""`sparkwatch dashboards build` and `sparkwatch rules build` refuse bad input in one line.

A config that is not YAML or not UTF-8, or an --output that cannot hold the files: exit status 2
and one error line naming the option and the file, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparkwatch.cli.main import main

COMMANDS = ("dashboards", "rules")


def build(capsys: pytest.CaptureFixture[str], command: str, *argv: str) -> tuple[int, str]:
    """``sparkwatch COMMAND build *argv``: its exit code and its one stderr line."""
    code = main([command, "build", *argv])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return code, err.rstrip("\n")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_config_file_that_is_not_yaml_names_the_file_line_and_column(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("alerts:\n  watermark_lag:\n    for: [30m\n")
    assert build(capsys, command, "--config", str(bad), "--output", str(tmp_path / "out")) == (
        2,
        f"sparkwatch {command}: error: --config {bad}: not valid YAML at line 4, column 1: "
        "expected ',' or ']', but got '<stream end>'",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_set_value_that_is_not_yaml_names_the_set(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build(capsys, command, "--set", "alerts.watermark_lag.for=[",
                 "--output", str(tmp_path)) == (
        2,
        f"sparkwatch {command}: error: --set 'alerts.watermark_lag.for=[': not valid YAML at "
        "line 1, column 2: expected the node content, but found '<stream end>'",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_config_file_that_is_not_utf8_names_the_file(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latin1 = tmp_path / "latin1.yaml"
    # The é, one byte in Latin-1, is the 20th byte: offset 19.
    latin1.write_bytes("selector: 'app=\"café\"'\n".encode("latin-1"))
    assert build(capsys, command, "--config", str(latin1), "--output", str(tmp_path)) == (
        2,
        f"sparkwatch {command}: error: --config {latin1}: not UTF-8 text "
        "(invalid continuation byte at byte offset 19)",
    )


def test_a_config_file_that_is_missing_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.yaml"
    assert build(capsys, "rules", "--config", str(missing), "--check") == (
        2, f"sparkwatch rules: error: --config {missing}: No such file or directory",
    )


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("check", [[], ["--check"]])
def test_an_output_that_is_a_file_is_refused(
    command: str, check: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory\n")
    assert build(capsys, command, "--output", str(a_file), *check) == (
        2, f"sparkwatch {command}: error: --output {a_file}: not a directory",
    )
    assert a_file.read_text() == "not a directory\n"


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_an_output_below_a_file_names_the_file_it_could_not_reach(
    check: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory\n")
    below = a_file / "rules"
    code, err = build(capsys, "rules", "--output", str(below), *check)
    doing = "read" if check else "write"
    assert code == 2
    assert err.startswith(
        f"sparkwatch rules: error: --output {below}: cannot {doing} {below}/generated/"
    )
    assert err.endswith(": Not a directory")


def test_installed_command_line_refuses_bad_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("alerts: [\n")
    result = subprocess.run(
        [sys.executable, "-m", "sparkwatch.cli.main", "rules", "build", "--config", str(bad),
         "--output", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"sparkwatch rules: error: --config {bad}: not valid YAML at line 2, column 1: "
        "expected the node content, but found '<stream end>'\n"
    )
