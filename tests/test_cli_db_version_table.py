"""`sparkwatch db` believes the version table only when it says one revision of a schema that
is there, and writes nothing into a database that has no sparkwatch schema; on SQLite and
PostgreSQL, through the real entry point."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.engine import describe_url
from sparkwatch.history.errors import MigrationError
from sparkwatch.history.schema import SCHEMA_REVISION, VERSION_TABLE
from tests.support import run_cli as run
from tests.test_history_support import engine_for

ERROR = "sparkwatch db: error: "


def tables(url: str) -> list[str]:
    return sorted(sa.inspect(engine_for(url)).get_table_names())


def versions(url: str) -> list[str]:
    with engine_for(url).connect() as conn:
        return sorted(conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())


def sql(url: str, *statements: str) -> None:
    with engine_for(url).begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))


def test_a_database_without_our_schema_is_never_written_by_a_downgrade(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """Another application's database: a downgrade to base said "history schema at base" and
    left a sparkwatch version table in it."""
    sql(history_url, "CREATE TABLE batches (id INTEGER PRIMARY KEY, payload TEXT)",
        "INSERT INTO batches VALUES (1, 'theirs')")
    where = describe_url(history_url)
    code, out, _ = run(capsys, "db", "downgrade", "--revision", "base", "--url", history_url)
    assert (code, out) == (0, f"no sparkwatch history schema in {where}: nothing to downgrade\n")
    for revision in ("0009", "-1"):
        code, out, err = run(capsys, "db", "downgrade", "--revision", revision,
                             "--url", history_url)
        assert (code, out) == (2, "")
        assert err == (f"{ERROR}{where} has no sparkwatch history schema (no {VERSION_TABLE} "
                       f"table): nothing to downgrade\n")
    code, out, _ = run(capsys, "db", "current", "--url", history_url)
    assert (code, out) == (0, "none (no history schema: run `sparkwatch db upgrade`)\n")
    assert tables(history_url) == ["batches"]
    with engine_for(history_url).connect() as conn:
        assert conn.execute(sa.text("SELECT payload FROM batches")).scalar_one() == "theirs"


def test_a_downgrade_to_base_of_our_schema_at_base_says_so_again(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    migrate.upgrade(history_url)
    for _ in range(2):
        code, out, _ = run(capsys, "db", "downgrade", "--revision", "base", "--url", history_url)
        assert (code, out) == (
            0, f"history schema at base (no history tables) in {describe_url(history_url)}\n")


@pytest.mark.parametrize("version_table", ["emptied", "dropped"])
def test_a_schema_whose_revision_is_not_recorded_is_reported_and_no_command_migrates_it(
    history_url: str, capsys: pytest.CaptureFixture[str], version_table: str,
) -> None:
    """Before: `current` said "none", `downgrade base` claimed "no history tables" with every
    table left, and `upgrade` failed midway on `relation "query_runs" already exists`."""
    migrate.upgrade(history_url)
    sql(history_url, f"DELETE FROM {VERSION_TABLE}" if version_table == "emptied"
        else f"DROP TABLE {VERSION_TABLE}")
    schema = tables(history_url)
    unknown = (
        f"{ERROR}{describe_url(history_url)} has the history's tables but no revision in "
        f"{VERSION_TABLE}: record the one they are at with `sparkwatch db stamp --revision "
        f"REVISION` (this sparkwatch's head is {SCHEMA_REVISION}), or drop them to start "
        "afresh\n")
    for argv in (["current"], ["downgrade", "--revision", "base"], ["upgrade"]):
        code, out, err = run(capsys, "db", *argv, "--url", history_url)
        assert (code, out, err) == (2, "", unknown), argv
    assert tables(history_url) == schema
    # What a collector's writer meets as it migrates, where it failed on re-creating tables.
    with pytest.raises(MigrationError, match="but no revision in"):
        migrate.upgrade(history_url)

    # Recorded as the message says, the schema is ours again, and nothing was migrated.
    code, out, _ = run(capsys, "db", "stamp", "--revision", "head", "--url", history_url)
    assert (code, out) == (0, f"history schema recorded at {SCHEMA_REVISION} (head) in "
                              f"{describe_url(history_url)} (nothing migrated)\n")
    assert tables(history_url) == sorted({*schema, VERSION_TABLE})
    code, out, _ = run(capsys, "db", "current", "--url", history_url)
    assert (code, out) == (0, f"{SCHEMA_REVISION} (head)\n")


def test_two_revisions_in_the_version_table_are_refused_naming_both(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: `current` said "0011 (head)" and `downgrade 0010` reported success."""
    migrate.upgrade(history_url)
    older = f"{int(SCHEMA_REVISION) - 1:04d}"
    sql(history_url, f"INSERT INTO {VERSION_TABLE} (version_num) VALUES ('{older}')")
    schema = tables(history_url)
    several = (f"{ERROR}{describe_url(history_url)} has several revisions in its version table "
               f"{VERSION_TABLE} ({older}, {SCHEMA_REVISION}), where a schema is at one: record "
               "the one its tables are at with `sparkwatch db stamp --revision REVISION`\n")
    for argv in (["current"], ["downgrade", "--revision", older], ["upgrade"]):
        code, out, err = run(capsys, "db", *argv, "--url", history_url)
        assert (code, out, err) == (2, "", several), argv
    assert (tables(history_url), versions(history_url)) == (schema, [older, SCHEMA_REVISION])

    # The one the tables are at, recorded: the other row goes.
    code, _, _ = run(capsys, "db", "stamp", "--revision", SCHEMA_REVISION, "--url", history_url)
    assert (code, versions(history_url)) == (0, [SCHEMA_REVISION])


def test_stamp_refuses_a_database_without_the_history_tables_and_writes_nothing(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """Recording a revision there would make `db upgrade` skip creating the tables."""
    sql(history_url, "CREATE TABLE batches (id INTEGER PRIMARY KEY, payload TEXT)")
    code, out, err = run(capsys, "db", "stamp", "--revision", "head", "--url", history_url)
    assert (code, out) == (2, "")
    assert err == (f"{ERROR}{describe_url(history_url)} has no sparkwatch history tables to "
                   "record a revision of: `sparkwatch db upgrade` creates them\n")
    assert tables(history_url) == ["batches"]


@pytest.mark.parametrize("revision", ["base", "9999", "", "-1"])
def test_stamp_takes_only_a_revision_this_sparkwatch_ships(
    history_url: str, capsys: pytest.CaptureFixture[str], revision: str,
) -> None:
    migrate.upgrade(history_url)
    code, out, err = run(capsys, "db", "stamp", "--revision", revision, "--url", history_url)
    assert (code, out) == (2, "")
    assert err.startswith(f"{ERROR}--revision {revision!r}: {revision!r} is not a revision "
                          "this sparkwatch ships (they are 0001 to "), err
    assert versions(history_url) == [SCHEMA_REVISION]


def test_stamp_never_records_an_older_revision_over_a_newer_sparkwatch_s(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    migrate.upgrade(history_url)
    sql(history_url, f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    code, out, err = run(capsys, "db", "stamp", "--revision", "head", "--url", history_url)
    assert (code, out) == (2, "")
    assert "has history schema 9999, newer than this sparkwatch" in err, err
    assert versions(history_url) == ["9999"]


def test_an_upgrade_refuses_another_application_s_tables_of_the_history_s_names(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: "database error: table batches already exists", midway through the migration."""
    sql(history_url, "CREATE TABLE batches (id INTEGER PRIMARY KEY, payload TEXT)")
    code, out, err = run(capsys, "db", "upgrade", "--url", history_url)
    assert (code, out) == (2, "")
    assert err == (f"{ERROR}{describe_url(history_url)} has tables named as the history's "
                   f"(batches) but no sparkwatch version table ({VERSION_TABLE}): they are not "
                   "sparkwatch's; give the history a database (or schema) of its own\n")
    assert tables(history_url) == ["batches"]


def test_a_revision_no_sparkwatch_has_is_said_so_and_stamp_repairs_it(
    history_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """'13' typed by hand: every command called it "newer than this sparkwatch: upgrade
    sparkwatch", and stamp refused to replace it on the same grounds."""
    migrate.upgrade(history_url)
    sql(history_url, f"UPDATE {VERSION_TABLE} SET version_num = '13'")
    where = describe_url(history_url)
    code, out, _ = run(capsys, "db", "current", "--url", history_url)
    assert (code, out) == (0, "13 (not a revision of any sparkwatch: record the one the tables "
                              "are at with `sparkwatch db stamp --revision REVISION`)\n")
    code, out, err = run(capsys, "db", "upgrade", "--url", history_url)
    assert (code, out) == (2, "")
    assert err == (f"{ERROR}{where} has '13' in its version table {VERSION_TABLE}, no revision "
                   f"of this sparkwatch's (0001 to {SCHEMA_REVISION}) nor a later one: record the "
                   "one its tables are at with `sparkwatch db stamp --revision REVISION`\n")
    code, _, _ = run(capsys, "db", "stamp", "--revision", "head", "--url", history_url)
    assert (code, versions(history_url)) == (0, [SCHEMA_REVISION])
