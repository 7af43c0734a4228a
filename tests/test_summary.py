"""An exception is shown as one line: its message's first, or the driver's under SQLAlchemy's."""

from __future__ import annotations

import sqlite3

import sqlalchemy as sa

from sparkwatch.summary import one_line


def test_a_multi_line_message_is_cut_to_its_first_non_blank_line() -> None:
    exc = RuntimeError("\n  boom: disk on fire  \nstack\nmore stack")
    assert one_line(exc) == "boom: disk on fire"


def test_an_exception_without_a_message_is_shown_by_its_type() -> None:
    assert one_line(TimeoutError()) == "TimeoutError"
    assert one_line(ValueError("  \n ")) == "ValueError"


def test_a_sqlalchemy_error_shows_the_drivers_own_message_without_the_sql() -> None:
    engine = sa.create_engine("sqlite://")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT * FROM no_such_table WHERE x = :x"), {"x": 1})
    except sa.exc.DBAPIError as exc:
        assert isinstance(exc.orig, sqlite3.OperationalError)
        assert one_line(exc) == "no such table: no_such_table"
    else:  # pragma: no cover
        raise AssertionError("the query should have failed")
