"""The ingest tokens of the environment and of the tokens file, merged: an entry given again (the
same token for the same app, however its scope is spelled: ``orders`` is ``default/orders``) is
one token in force, counted once; a clash names each entry by its position as written; the
SIGHUP reload says how many distinct tokens are in force, and a refused file names the file
once. A real collector process; its log lines asserted whole."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.settings import SettingsError
from sparkwatch.settings.collector import load_collector_settings, parse_tokens
from tests.conftest import shown_canaries
from tests.support import wait_for
from tests.test_collector_support import APP_TOKEN, Collector

ENV = "SPARKWATCH_COLLECTOR_TOKENS"
CLASH = ("one token is given to two apps, in entry 2 of SPARKWATCH_COLLECTOR_TOKENS and entry 3 "
         "of the tokens file (is one written the wrong way round? the form is "
         "[TENANT/]APP=TOKEN)")


def test_an_entry_repeated_in_another_spelling_of_its_scope_is_one_token() -> None:
    assert parse_tokens("orders=t-1,default/orders=t-1, default / orders =t-1") == (
        ("orders", "t-1"),)


def test_env_and_file_giving_one_entry_twice_leave_it_in_force_once(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("default/orders=t-1\nfile-app=f-1\nfile-app=f-1\n")
    settings = load_collector_settings({ENV: "orders=t-1"}, tokens_file=path)
    assert settings.tokens == (("orders", "t-1"), ("file-app", "f-1"))


def test_a_clash_names_the_file_entry_by_its_position_as_written(tmp_path: Path) -> None:
    """Numbered among the file's distinct tokens, the clash was said to be in entry 2: the
    repeated first line was counted once, and entry 2 is no clash."""
    path = tmp_path / "tokens"
    path.write_text("file-app=f-1\nfile-app=f-1\nshop=t-2\n")
    with pytest.raises(SettingsError) as refused:
        load_collector_settings({ENV: "orders=t-1,billing=t-2"}, tokens_file=path)
    assert str(refused.value) == f"ingest tokens: {CLASH}"


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """Its environment gives two tokens: ``*`` and ``orders-etl`` (APP_TOKEN)."""
    tmp = tmp_path_factory.mktemp("tokens-reload")
    tokens = tmp / "tokens"
    tokens.write_text("file-app=first-file-token\n")
    c = Collector("off", tmp / "spool", "--tokens-file", str(tokens))
    c.tokens_file = tokens  # type: ignore[attr-defined]
    c.start()
    yield c
    c.stop()
    assert shown_canaries(c.log_text()) == []


def _reloaded(collector: Collector, text: str) -> str:
    """The line the collector logs on a SIGHUP after ``text`` is written to its tokens file."""
    def said() -> list[str]:
        return [line.partition("]: ")[2] for line in collector.log_text().splitlines()
                if "]: SIGHUP: " in line]

    before = len(said())
    collector.tokens_file.write_text(text)  # type: ignore[attr-defined]
    assert collector.proc is not None
    collector.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(said()) > before, 10, "the reload's line")
    [line] = said()[before:]
    return line


def test_a_reload_counts_each_token_in_force_once(collector: Collector) -> None:
    """Two in the environment and three in the file; the file repeats one of its own and, as
    ``default/orders-etl``, one of the environment's. Refused before as "given to two apps"."""
    line = _reloaded(collector, f"file-app=f-1\nfile-app=f-1\ndefault/orders-etl={APP_TOKEN}\n"
                                "team-b/other=f-2\n")
    assert line == (f"SIGHUP: reloaded 4 distinct ingest tokens "
                    f"({collector.tokens_file} and the environment)")  # type: ignore[attr-defined]


def test_a_file_that_does_not_parse_is_named_once(collector: Collector) -> None:
    line = _reloaded(collector, "file-app=f-1\nforgotten-app-f-3\n")
    assert line == (f"SIGHUP: tokens unchanged, cannot use "  # type: ignore[attr-defined]
                    f"{collector.tokens_file}: expected APP=TOKEN pairs separated by commas or "
                    "newlines (entry 2 of 2 is not)")


def test_a_reload_clash_names_the_file_entry_as_written(collector: Collector) -> None:
    line = _reloaded(collector, f"file-app=f-1\nfile-app=f-1\nshop={APP_TOKEN}\n")
    assert line == (f"SIGHUP: tokens unchanged, cannot use "  # type: ignore[attr-defined]
                    f"{collector.tokens_file}: ingest tokens: {CLASH}")
