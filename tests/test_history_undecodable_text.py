"""Text another tool wrote into a SQLite history that is not UTF-8 reads with its bad bytes
replaced (U+FFFD): every history command failed on it ("Could not decode to UTF-8 column
'name'"), the rest of the history with it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing

import pytest
import sqlalchemy as sa

from sparkwatch.history.reader import HistoryReader
from tests.support import run_cli as run
from tests.test_history_reader import DUP_IDS, JOIN, QUERY, populate
from tests.test_history_support import migrated_database

BAD_NAME = "join\ufffdetl"  # written as the bytes "join", 0xff, "etl"


@pytest.fixture(scope="module", params=["sqlite"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    for db_url in migrated_database(request):
        populate(db_url)
        path = sa.engine.make_url(db_url).database
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("UPDATE query_runs SET name = CAST(x'6a6f696eff65746c' AS TEXT), "
                         "exception = CAST(x'626f6f6dc3' AS TEXT) WHERE query_id = ?",
                         (JOIN["id"],))
            conn.commit()
        yield db_url


def test_queries_lists_the_name_with_the_bad_bytes_replaced(url: str, capsys) -> None:
    code, out, err = run(capsys, "history", "queries", "--format", "json", "--url", url)
    assert (code, err) == (0, "")
    names = {q["query_id"]: q["name"] for q in json.loads(out)}
    assert names == {QUERY: "window_agg", JOIN["id"]: BAD_NAME, **dict.fromkeys(DUP_IDS, "dup")}


def test_the_table_and_the_query_runs_read_too(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "queries", "--url", url)
    assert code == 0
    assert BAD_NAME in out and "window_agg" in out
    code, out, _ = run(capsys, "history", "runs", JOIN["id"], "--format", "json", "--url", url)
    [only] = json.loads(out)
    assert (code, only["name"], only["exception"]) == (0, BAD_NAME, "boom\ufffd")


def test_the_reader_finds_the_query_by_its_other_names(url: str) -> None:
    with HistoryReader(url) as reader:
        assert [r.name for r in reader.runs(JOIN["id"])] == [BAD_NAME]
        assert reader.resolve_query("window_agg") == QUERY
