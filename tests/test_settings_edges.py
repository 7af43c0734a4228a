"""Settings are read once at the edge: only the places listed here touch the process environment,
and every command's option that has an environment variable is built from its declaration and
names the variable in ``--help``."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.cli.main import build_parser
from sparkwatch.cli.settings_table import commands, env_options
from sparkwatch.settings.collector import SETTINGS as COLLECTOR_SETTINGS
from sparkwatch.settings.options import SETTING_ATTRIBUTE
from tests.conftest import ROOT

PRODUCT = ("sparkwatch", "listener", "collector", "dashboards", "migrations")

EDGES = {
    "sparkwatch/settings/options.py:add_option":
        "a command's option defaults to its env var, read when the parser is built",
    "listener/attach.py:_attach":
        "the listener's settings and the OTEL_* variables, read once when it attaches",
    "sparkwatch/cli/collector.py:run":
        "the collector's settings, the OTEL_* variables and the env's tokens, read once at start",
    "sparkwatch/cli/demo.py:run":
        "the demo driver's listener settings, checked once before Spark starts",
    "sparkwatch/cli/demo.py:run_with_collector":
        "writes the push URL and token the in-process driver's listener reads at attach",
    "sparkwatch/cli/run.py:run_command":
        "writes the child's environment (the bootstrap on PYTHONPATH)",
    "collector/local.py:local_collector":
        "writes the environment of the collector process the demo starts (its token)",
    "sparkwatch/demo/session.py:build_session":
        "writes the local Spark's environment (loopback address, the driver's Python)",
    "sparkwatch/state/session.py:build_session":
        "writes the local Spark's environment (loopback address)",
}
"""``path:function`` → why it may touch ``os.environ``; nowhere else does."""


def environment_uses(source: str) -> Iterator[tuple[str, int]]:
    """(enclosing function, line) of every use of ``os.environ``, ``os.getenv`` and their
    imported names in ``source``."""
    tree = ast.parse(source)
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "os"
                for alias in node.names if alias.name in ("environ", "environb", "getenv")}

    def visit(node: ast.AST, function: str) -> Iterator[tuple[str, int]]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "environb", "getenv") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            yield function, node.lineno
        if isinstance(node, ast.Name) and node.id in imported:
            yield function, node.lineno
        for child in ast.iter_child_nodes(node):
            yield from visit(child, function)

    yield from visit(tree, "<module>")


def product_files() -> Iterator[Path]:
    for room in PRODUCT:
        yield from (p for p in (ROOT / room).rglob("*.py") if "generated" not in p.parts)


def test_only_the_listed_edges_touch_the_environment() -> None:
    found: dict[str, list[int]] = {}
    for path in product_files():
        for function, line in environment_uses(path.read_text()):
            found.setdefault(f"{path.relative_to(ROOT)}:{function}", []).append(line)
    deep = {where: lines for where, lines in found.items() if where not in EDGES}
    assert deep == {}, "read the setting at the edge and pass it down (or list the edge here)"
    assert set(found) == set(EDGES), "an edge listed here no longer touches the environment"


@pytest.mark.parametrize("source", [
    "import os\ndef deep():\n    return os.environ.get('SPARKWATCH_TOKEN')\n",
    "import os\ndef deep():\n    return os.getenv('SPARKWATCH_TOKEN')\n",
    "from os import environ as e\ndef deep():\n    return e['SPARKWATCH_TOKEN']\n",
    "import os\nTOKEN = os.environ.get('SPARKWATCH_TOKEN')\n",
])
def test_a_read_of_the_environment_anywhere_is_found(source: str) -> None:
    uses = list(environment_uses(source))
    assert uses and uses[0][0] in ("deep", "<module>")


def all_options() -> Iterator[tuple[str, argparse.Action]]:
    for path, parser in commands(build_parser()):
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield path, action


def test_every_option_with_an_environment_variable_names_it_in_its_help() -> None:
    options = list(env_options(build_parser()))
    assert len(options) > len(COLLECTOR_SETTINGS)
    for path, action, setting in options:
        assert action.help is not None and f"(env {setting.env})" in action.help, \
            f"{path} {action.option_strings[0]}"


def test_an_option_that_mentions_a_variable_is_built_from_its_declaration() -> None:
    for path, action in all_options():
        if re.search(r"\bSPARKWATCH_\w+", action.help or ""):
            assert hasattr(action, SETTING_ATTRIBUTE), f"{path} {action.option_strings[0]}"


@pytest.mark.parametrize(("command", "env"), [
    ("top", ("SPARKWATCH_TOKEN", "SPARKWATCH_HISTORY_URL")),
    ("doctor", ("SPARKWATCH_TOKEN", "SPARKWATCH_HISTORY_URL")),
    ("history queries", ("SPARKWATCH_HISTORY_URL",)),
    ("db upgrade", ("SPARKWATCH_HISTORY_URL",)),
    ("demo", ("SPARKWATCH_HISTORY_URL",)),
    ("quarantine replay", ("SPARKWATCH_COLLECTOR_SPOOL_DIR", "SPARKWATCH_COLLECTOR_HISTORY_URL")),
    ("collector", ("SPARKWATCH_COLLECTOR_NO_AUTH", "SPARKWATCH_COLLECTOR_RETENTION_DAYS")),
])
def test_help_output_names_the_variables(command: str, env: tuple[str, ...],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from sparkwatch.cli.main import main

    with pytest.raises(SystemExit) as done:
        main([*command.split(), "--help"])
    assert done.value.code == 0
    shown = re.sub(r"\s+", "", capsys.readouterr().out)  # argparse wraps long help
    for name in env:
        assert name in shown


def test_an_option_defaults_to_its_variable_and_the_command_line_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWATCH_TOKEN", "from-env")
    assert build_parser().parse_args(["top"]).token == "from-env"
    assert build_parser().parse_args(["top", "--token", "given"]).token == "given"
    monkeypatch.delenv("SPARKWATCH_TOKEN")
    assert build_parser().parse_args(["doctor"]).token is None


def test_a_required_option_may_come_from_its_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SPARKWATCH_COLLECTOR_SPOOL_DIR", raising=False)
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["quarantine", "list"])
    assert done.value.code == 2
    assert "--spool-dir" in capsys.readouterr().err
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_SPOOL_DIR", str(tmp_path))
    assert build_parser().parse_args(["quarantine", "list"]).spool_dir == tmp_path


def test_a_disabled_history_from_the_variable_is_an_error_naming_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sparkwatch.cli.main import main

    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", "off")
    assert main(["history", "queries"]) == 2
    assert "the history is disabled (SPARKWATCH_HISTORY_URL='off'); pass --url" \
        in capsys.readouterr().err
