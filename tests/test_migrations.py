"""Hand-written migrations create exactly the models' schema and undo it, on both backends."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.ddl.impl import DefaultImpl
from alembic.runtime.migration import MigrationContext
from sqlalchemy.schema import CreateIndex

from sparkwatch.history import migrate, partitions
from sparkwatch.history.errors import MigrationError, SchemaNotMigrated
from sparkwatch.history.revision import check_schema, is_older
from sparkwatch.history.schema import SCHEMA_REVISION, VERSION_TABLE, in_comparison, metadata
from tests.test_history_support import TABLES, counts, engine_for, load_sample, progress, write


def schema_drift(url: str) -> list[Any]:
    with engine_for(url).connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE, "compare_type": True,
                        "include_object": in_comparison}
        )
        return list(compare_metadata(context, metadata))


def history_tables(url: str) -> set[str]:
    return set(sa.inspect(engine_for(url)).get_table_names()) & set(TABLES)


def test_head_schema_matches_the_models(history_url: str) -> None:
    migrate.upgrade(history_url)
    assert schema_drift(history_url) == []


def test_drift_check_sees_a_missing_index(sqlite_url: str) -> None:
    """Guards the test above against comparing nothing."""
    migrate.upgrade(sqlite_url)
    with engine_for(sqlite_url).begin() as conn:
        conn.execute(sa.text("DROP INDEX ix_batches_query_id_timestamp"))
    [(kind, index)] = schema_drift(sqlite_url)
    assert (kind, index.name) == ("add_index", "ix_batches_query_id_timestamp")


def test_upgrade_downgrade_upgrade_round_trip(history_url: str) -> None:
    migrate.upgrade(history_url)
    assert migrate.current(history_url) == SCHEMA_REVISION
    assert history_tables(history_url) == set(TABLES)

    migrate.downgrade(history_url, "base")
    assert migrate.current(history_url) is None
    assert history_tables(history_url) == set()

    migrate.upgrade(history_url)
    assert migrate.current(history_url) == SCHEMA_REVISION
    assert schema_drift(history_url) == []
    write(history_url, progress(load_sample("dedupe")))
    assert counts(history_url)["operator_batches"] == 1


def test_models_state_the_revision_of_the_newest_migration() -> None:
    assert migrate.head() == SCHEMA_REVISION
    # Numbered one after another: revision.is_older tells an older schema by its number.
    known = sorted(migrate.known_revisions())
    assert known == [f"{n:04d}" for n in range(1, int(SCHEMA_REVISION) + 1)]
    assert all(is_older(r) for r in known[:-1]) and not is_older(SCHEMA_REVISION)


def test_upgrading_twice_changes_nothing(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url)
    write(sqlite_url, progress(load_sample("dedupe")))
    migrate.upgrade(sqlite_url)
    assert counts(sqlite_url)["batches"] == 1


def test_another_projects_alembic_table_is_left_alone(sqlite_url: str) -> None:
    """The history may share a PostgreSQL database with other Alembic projects."""
    with engine_for(sqlite_url).begin() as conn:
        conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(sa.text("INSERT INTO alembic_version VALUES ('their_rev')"))
    migrate.upgrade(sqlite_url)
    with engine_for(sqlite_url).connect() as conn:
        theirs = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
    assert theirs == "their_rev"
    assert migrate.current(sqlite_url) == SCHEMA_REVISION


def test_concurrent_upgrades_from_several_processes_all_succeed(pg_url: str) -> None:
    """Several drivers attaching to one PostgreSQL history at once each migrate on first write."""
    code = "import sys; from sparkwatch.history import migrate; migrate.upgrade(sys.argv[1])"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, pg_url], stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert migrate.current(pg_url) == SCHEMA_REVISION
    assert schema_drift(pg_url) == []


def test_concurrent_upgrades_from_threads_of_one_process_all_succeed(sqlite_url: str) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda _: migrate.upgrade(sqlite_url), range(3)))
    assert migrate.current(sqlite_url) == SCHEMA_REVISION


def test_unknown_revision_is_a_migration_error(sqlite_url: str) -> None:
    with pytest.raises(MigrationError, match="0042"):
        migrate.upgrade(sqlite_url, "0042")


def test_per_batch_maps_are_plain_json_on_postgresql_and_plans_stay_jsonb(pg_url: str) -> None:
    """Migration 0005: maps written once per batch and read back whole skip jsonb's decomposition
    (half of PostgreSQL's cost per progress event); plans and run tags stay jsonb."""
    migrate.upgrade(pg_url)
    with engine_for(pg_url).connect() as conn:
        types: dict[str, str] = dict(conn.execute(sa.text(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
            "WHERE data_type IN ('json', 'jsonb')")).all())
    # The partitions (migration 0010) have their parent's columns.
    types = {k: v for k, v in types.items() if not partitions.is_partition_name(k.split(".")[0])}
    assert types == {
        "batches.duration_ms": "json", "batches.observed_metrics": "json",
        "operator_batches.custom_metrics": "json",
        "source_batches.start_offset": "json", "source_batches.end_offset": "json",
        "source_batches.latest_offset": "json", "source_batches.metrics": "json",
        "sink_batches.metrics": "json",
        "query_runs.job_tags": "jsonb",
        "operator_plans.keys": "jsonb", "operator_plans.details": "jsonb",
        "operator_plans.settings": "jsonb",
    }
    migrate.downgrade(pg_url, "0004")
    with engine_for(pg_url).connect() as conn:
        custom = conn.execute(sa.text(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_name = 'operator_batches' AND column_name = 'custom_metrics'")).scalar()
    assert custom == "jsonb"


def run_batch_counts(url: str) -> dict[str, int]:
    with engine_for(url).connect() as conn:
        return dict(conn.execute(sa.text("SELECT run_id, batches FROM query_runs")).all())


def test_upgrading_to_run_batch_counts_counts_the_batches_already_there(
    history_url: str,
) -> None:
    """Migration 0007: a history written before it gets each run's count of its batch rows."""
    raw = load_sample("window_agg")
    other = {**raw, "runId": "00000000-0000-0000-0000-000000000007"}
    write(history_url, *(progress({**raw, "batchId": i}) for i in range(3)),
          progress({**other, "batchId": 0}))
    written = run_batch_counts(history_url)
    assert written == {raw["runId"]: 3, other["runId"]: 1}
    migrate.downgrade(history_url, "0006")
    migrate.upgrade(history_url)
    assert run_batch_counts(history_url) == written


def schema_of(url: str) -> dict[str, object]:
    """Every table of the database with its columns and indexes, and the history's revision."""
    inspector = sa.inspect(engine_for(url))
    tables = {
        table: (
            [column["name"] for column in inspector.get_columns(table)],
            sorted(str(index["name"]) for index in inspector.get_indexes(table)),
        )
        for table in inspector.get_table_names()
    }
    return {"tables": tables, "revision": migrate.current(url)}


def interrupt_at_index(monkeypatch: pytest.MonkeyPatch, index_name: str) -> None:
    """Ctrl-C as Alembic is about to create ``index_name``: mid-migration, earlier steps done."""
    original = DefaultImpl._exec

    def _exec(self: DefaultImpl, construct: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(construct, CreateIndex) and construct.element.name == index_name:
            raise KeyboardInterrupt
        return original(self, construct, *args, **kwargs)

    monkeypatch.setattr(DefaultImpl, "_exec", _exec)


def test_upgrade_failing_part_way_leaves_no_table_and_can_be_run_again(history_url: str) -> None:
    """A table of migration 0003 already there (made by hand at 0001): the upgrade fails after
    0002 created its tables, and takes them back. Before, SQLite kept them (non-transactional
    DDL) at revision 0002, and every later upgrade failed on "table query_rollups already
    exists". (A database sparkwatch never migrated is refused before any step when it holds a
    table of the history's names: tests/test_cli_db_version_table.py.)"""
    migrate.upgrade(history_url, "0001")
    with engine_for(history_url).begin() as conn:
        conn.execute(sa.text("CREATE TABLE operator_plans (x INTEGER)"))
    before = schema_of(history_url)
    with pytest.raises(sa.exc.DBAPIError, match="operator_plans"):
        migrate.upgrade(history_url)
    assert schema_of(history_url) == before
    assert before["revision"] == "0001" and "job_runs" not in before["tables"]  # type: ignore[operator]

    with engine_for(history_url).begin() as conn:
        conn.execute(sa.text("DROP TABLE operator_plans"))
    migrate.upgrade(history_url)
    assert migrate.current(history_url) == SCHEMA_REVISION
    assert schema_drift(history_url) == []


def test_upgrade_interrupted_mid_migration_leaves_the_database_as_it_was(
    history_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted in 0006, after 0005 and after 0006's new rollup columns: all of it undone."""
    migrate.upgrade(history_url, "0004")
    before = schema_of(history_url)
    assert before["revision"] == "0004"

    interrupt_at_index(monkeypatch, "ix_query_rollups_resolution_bucket_start")
    with pytest.raises(KeyboardInterrupt):
        migrate.upgrade(history_url)
    assert schema_of(history_url) == before

    monkeypatch.undo()
    migrate.upgrade(history_url)
    assert schema_drift(history_url) == []


def test_downgrade_interrupted_mid_migration_leaves_the_database_as_it_was(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0006's downgrade rebuilds the rollup tables (batch mode); 0007's ran before it."""
    migrate.upgrade(sqlite_url)
    write(sqlite_url, progress(load_sample("dedupe")))
    before = schema_of(sqlite_url)
    original = DefaultImpl.drop_index

    def drop_index(self: DefaultImpl, index: Any, **kwargs: Any) -> None:
        if index.name == "ix_operator_rollups_resolution_bucket_start":
            raise KeyboardInterrupt
        original(self, index, **kwargs)

    monkeypatch.setattr(DefaultImpl, "drop_index", drop_index)
    with pytest.raises(KeyboardInterrupt):
        migrate.downgrade(sqlite_url, "0005")
    assert schema_of(sqlite_url) == before
    assert counts(sqlite_url)["batches"] == 1


def test_a_newer_database_is_refused_with_the_advice_to_upgrade_sparkwatch(
    sqlite_url: str,
) -> None:
    migrate.upgrade(sqlite_url)
    with engine_for(sqlite_url).begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '0099'"))
    newer = "has history schema 0099, newer than this sparkwatch .*: upgrade sparkwatch$"
    with pytest.raises(MigrationError, match=newer):
        migrate.upgrade(sqlite_url)
    with pytest.raises(MigrationError, match=newer):
        migrate.downgrade(sqlite_url, "-1")
    assert migrate.current(sqlite_url) == "0099"
    # A reader says the same, not "run `sparkwatch db upgrade`", which refuses it.
    with engine_for(sqlite_url).connect() as conn, pytest.raises(
            SchemaNotMigrated, match=f"has history schema 0099, newer than this sparkwatch's "
                                     f"{SCHEMA_REVISION} \\(or not one of ours\\): upgrade "
                                     "sparkwatch$"):
        check_schema(conn)


@pytest.mark.parametrize(
    ("revision", "message"),
    [
        ("", "no revision given"),
        ("0005@", "cannot resolve revision '0005@'"),
        ("0042", "Can't locate revision identified by '0042'"),
        ("0009:0011", "^a range is not a revision: give one"),  # was a MigrationError
    ],
)
def test_an_empty_or_unknown_revision_is_a_bad_revision(
    revision: str, message: str, sqlite_url: str
) -> None:
    with pytest.raises(migrate.BadRevision, match=message):
        migrate.upgrade(sqlite_url, revision)
    with pytest.raises(migrate.BadRevision, match=message):
        migrate.downgrade(sqlite_url, revision)


def test_a_first_upgrade_racing_another_finds_the_history_at_head_not_foreign(
    history_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two first upgrades of one empty history (two replicas starting, a collector and a
    listener): the one whose version check ran before the other's migration committed refused
    the history as "not sparkwatch's" (its tables were there by then, their version too)."""
    original = migrate._check_not_newer

    def then_another_process_migrates(conn: sa.Connection) -> tuple[str | None, bool]:
        found = original(conn)
        subprocess.run([sys.executable, "-c", "import sys; from sparkwatch.history import "
                        "migrate; migrate.upgrade(sys.argv[1])", history_url],
                       check=True, timeout=120)
        return found

    monkeypatch.setattr(migrate, "_check_not_newer", then_another_process_migrates)
    migrate.upgrade(history_url)
    monkeypatch.undo()
    assert migrate.current(history_url) == SCHEMA_REVISION
