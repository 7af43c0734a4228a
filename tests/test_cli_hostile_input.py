"""Every command met by a hostile user: empty values, bytes that are not UTF-8 in argv, URLs
that cannot be read, a host name no resolver takes. Each is refused in one line naming the option
or the environment variable (exit status 2), before anything is read or written, and never as a
traceback or as a silent fall-back to something the user did not ask for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkwatch.cli.main import main


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the command; check it failed in one line, exit status 2, nothing on stdout: that
    line."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    [line] = err.splitlines()[-1:]
    return line


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        # The empty string is false: each fell back to the history database, and read it.
        (["doctor", "--collector", ""], "--collector is empty: expected http://host:port"),
        (["top", "--once", "--metrics", ""], "--metrics is empty: expected http://host:port"),
        (["top", "--once", "--collector", ""],
         "--collector is empty: expected http://host:port"),
        # Said as "cannot reach the collector at <unparseable URL>", naming no option.
        (["doctor", "--collector", "http://\udcff"],
         "--collector is not a valid URL: expected http://host:port"),
        (["doctor", "--collector", "ftp://u:secret@127.0.0.1:1"],
         "--collector ftp://u:***@127.0.0.1:1: not an http:// or https:// URL with a host"),
        (["doctor", "--collector", "127.0.0.1:1"],
         "--collector <unparseable URL>: not an http:// or https:// URL with a host"),
        # top read these, and drew a frame saying it could not.
        (["top", "--once", "--metrics", "\udcff"],
         "--metrics is not a valid URL: expected http://host:port"),
        (["top", "--once", "--metrics", "file:///etc/passwd"],
         "--metrics file:///etc/passwd: not an http:// or https:// URL with a host"),
        (["top", "--once", "--metrics", "/etc/passwd"],
         "--metrics http:///etc/passwd: not an http:// or https:// URL with a host"),
        (["top", "--once", "--collector", "//"],
         "--collector http:////: not an http:// or https:// URL with a host"),
    ],
)
def test_a_collector_or_metrics_url_that_is_empty_or_unreadable_is_refused(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _usage_error(capsys, argv)
    assert line == f"sparkwatch {argv[0]}: error: {error}"


def test_a_doctor_query_that_is_not_utf8_is_a_usage_error(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was "database URL refused: 'utf-8' codec can't encode character ...", blaming the URL."""
    line = _usage_error(capsys, ["doctor", "q\udcff", "--url", sqlite_url])
    assert line == ("sparkwatch doctor: error: argument QUERY: not UTF-8 text "
                    "(query ids, names and run ids are UTF-8)")


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql://u:secret@[::1/x", "not a database URL: <unparseable URL> "
         "(expected sqlite:///FILE or postgresql://USER@HOST[:PORT]/DB)"),
        ("postgresql://u:secret@h:99999/x", "port 99999 is out of range 0-65535"),
    ],
)
def test_a_bad_history_url_names_the_flag_or_the_variable(
    url: str, error: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _usage_error(capsys, ["history", "queries", "--url", url])
    assert line == f"sparkwatch history: error: --url: {error}"
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", url)
    line = _usage_error(capsys, ["history", "queries"])
    assert line == f"sparkwatch history: error: SPARKWATCH_HISTORY_URL: {error}"
    assert "secret" not in line


@pytest.mark.parametrize("command", ["dashboards", "rules"])
@pytest.mark.parametrize("option", ["--output", "--config"])
def test_an_empty_build_path_is_refused_not_the_current_directory(
    command: str, option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path('') is '.': --output "" wrote the generated tree into the current directory."""
    pytest.importorskip("yaml")
    monkeypatch.chdir(tmp_path)
    line = _usage_error(capsys, [command, "build", option, ""])
    assert line == f"sparkwatch {command} build: error: argument {option}: empty path"
    assert list(tmp_path.iterdir()) == []


def test_a_collector_host_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    """Was a UnicodeError traceback from the socket's name lookup as the server started."""
    pytest.importorskip("uvicorn")
    code = "import sys; from sparkwatch.cli.main import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-c", code, "collector", "--no-auth", "--host", b"\xff",
         "--port", "0", "--spool-dir", str(tmp_path / "spool"), "--history-url", "off"],
        capture_output=True, text=True, timeout=120,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "sparkwatch collector: error: --host: not a host name or address (expected e.g. "
        "0.0.0.0, 127.0.0.1 or a DNS name)")


@pytest.mark.parametrize(("flags", "env", "error"), [
    (["--host", ""], {}, "--host='': empty: give an address (0.0.0.0 for every interface, "
     "127.0.0.1 for this machine only) or a host name"),
    ([], {"SPARKWATCH_COLLECTOR_HOST": ""}, "SPARKWATCH_COLLECTOR_HOST='': empty: give an "
     "address (0.0.0.0 for every interface, 127.0.0.1 for this machine only) or a host name"),
    (["--host", "256.1.1.1"], {}, "--host: '256.1.1.1' resolves to no address to listen on"),
    (["--spool-dir", ""], {}, "--spool-dir='': empty: give a directory"),
    ([], {"SPARKWATCH_COLLECTOR_SPOOL_DIR": ""},
     "SPARKWATCH_COLLECTOR_SPOOL_DIR='': empty: give a directory"),
])
def test_an_empty_or_unresolvable_collector_host_or_spool_is_a_usage_error(
        tmp_path: Path, flags: list[str], env: dict[str, str], error: str) -> None:
    """An empty host listened on every interface, an empty spool directory was the current
    one, and a host that resolves to nothing failed in uvicorn's log, naming neither."""
    pytest.importorskip("uvicorn")
    code = "import sys; from sparkwatch.cli.main import main; sys.exit(main())"
    defaults = {"--spool-dir": str(tmp_path / "spool"), "--host": "127.0.0.1"}
    given = [a for name, value in defaults.items() if name not in flags
             and name.replace("--", "SPARKWATCH_COLLECTOR_").replace("-", "_").upper() not in env
             for a in (name, value)]
    result = subprocess.run(
        [sys.executable, "-c", code, "collector", "--no-auth", "--port", "0",
         "--history-url", "off", *given, *flags],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**os.environ, **env},
    )
    assert (result.returncode, "Traceback" in result.stderr) == (2, False), result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"sparkwatch collector: error: {error}")
    assert list(tmp_path.iterdir()) == []  # no spool made anywhere


@pytest.mark.parametrize(("argv", "prefix"), [
    (["history", "runs", ""], "sparkwatch history runs: error: argument QUERY"),
    (["history", "state", " "], "sparkwatch history state: error: argument QUERY"),
    (["history", "operators", "q", "--run", ""], "sparkwatch history operators: error: "
                                                  "argument --run"),
    (["doctor", ""], "sparkwatch doctor: error: argument QUERY"),
])
def test_an_empty_query_or_run_is_a_usage_error_naming_it(
        capsys: pytest.CaptureFixture[str], argv: list[str], prefix: str) -> None:
    """'' is the start of every id: it was 'the start of the ids of more than one query'."""
    line = _usage_error(capsys, argv)
    assert line == f"{prefix}: empty: give an id, a name or the start of an id"
